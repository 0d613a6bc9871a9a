#!/usr/bin/env python3
"""Questions about what tests/e2e/pyroscope_recv.py accepted (its --log: one JSON line
per upload, in arrival order). Each command exits 0 when the answer is yes, 1 with one
line saying why not.

  agent_check.py pid LOG PID MIN [k=v ...]   PID has at least MIN profiles, one per interval
                                             without a gap (each begins where the last
                                             ended), all with these labels
  agent_check.py some LOG PID MIN [k=v ...]  the same without the gap check (across a restart)
  agent_check.py absent LOG PID              nothing of PID arrived
  agent_check.py order LOG                   arrivals in time order, none twice
  agent_check.py total LOG PID TYPE MIN      TYPE summed over PID's profiles >= MIN
  agent_check.py first LOG AFTER_NS          the earliest interval that arrived begins after AFTER_NS
  agent_check.py before LOG NS MIN           at least MIN profiles cover time before NS
  agent_check.py count LOG                   prints how many arrived
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []


def of_pid(recs, pid):
    return [r for r in recs if r["labels"].get("pid") == str(pid)]


def fail(msg):
    print(msg)
    return 1


def cmd_pid(recs, pid, least, *kvs, gaps=False):
    mine = of_pid(recs, pid)
    if len(mine) < int(least):
        return fail(f"pid {pid}: {len(mine)} profiles, expected at least {least}")
    mine.sort(key=lambda r: r["time_nanos"])
    for a, b in zip(mine, mine[1:]) if not gaps else []:
        if b["time_nanos"] != a["time_nanos"] + a["duration_nanos"]:
            return fail(f"pid {pid}: a gap or overlap between the interval at {a['time_nanos']} "
                        f"(+{a['duration_nanos']}) and the next at {b['time_nanos']}")
    for kv in kvs:
        k, v = kv.split("=", 1)
        bad = [r for r in mine if r["labels"].get(k) != v]
        if bad:
            return fail(f"pid {pid}: label {k}={bad[0]['labels'].get(k)!r}, expected {v!r} "
                        f"(labels {bad[0]['labels']}, service {bad[0]['service']})")
    return 0


def cmd_absent(recs, pid):
    mine = of_pid(recs, pid)
    return fail(f"pid {pid}: {len(mine)} profiles arrived") if mine else 0


def cmd_order(recs):
    seen = set()
    last = None
    for r in recs:
        key = (r["labels"].get("pid"), r["time_nanos"])
        if key in seen:
            return fail(f"pid {key[0]}: the interval at {key[1]} arrived twice")
        seen.add(key)
        if last is not None and r["time_nanos"] < last:
            return fail(f"upload {r['seq']} (interval at {r['time_nanos']}) arrived after a later interval "
                        f"({last})")
        last = r["time_nanos"] if last is None else max(last, r["time_nanos"])
    return 0


def cmd_total(recs, pid, typ, least):
    got = sum(r["totals"].get(typ, 0) for r in of_pid(recs, pid))
    return 0 if got >= int(least) else fail(f"pid {pid}: {typ} totals {got}, expected at least {least}")


def cmd_first(recs, after):
    if not recs:
        return fail("nothing arrived")
    first = min(r["time_nanos"] for r in recs)
    return 0 if first > int(after) else fail(f"the earliest interval that arrived begins at {first}, "
                                             f"not after {after}")


def cmd_before(recs, ns, least):
    n = sum(1 for r in recs if r["time_nanos"] < int(ns))
    return 0 if n >= int(least) else fail(f"{n} profiles of intervals begun before {ns}, expected {least}")


def main(argv):
    cmd, log = argv[1], argv[2]
    recs = load(log)
    if cmd == "count":
        print(len(recs))
        return 0
    return {"pid": cmd_pid, "some": lambda *a: cmd_pid(*a, gaps=True), "absent": cmd_absent, "order": cmd_order, "total": cmd_total,
            "first": cmd_first, "before": cmd_before}[cmd](recs, *argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
