#!/usr/bin/env python3
"""Per call site, a default-mode estimate against the truth: the replay's own counts (and
an --exact recording of the same replay, when given).

usage: estimates_check.py DEFAULT.top OWN.out [EXACT.top] [--log REPLAY.log --start T
                          --duration D] [--tol PCT] [--min-share PCT] [--ci COMMENTS]

*.top: `go tool pprof -sample_index=cuda_calls -top -cum -nodefraction=0` of a profile.
OWN.out: the replay's stdout ("replay: site_NN API COUNT"). With --log, the truth is what
the replay's log says was called between T (CLOCK_REALTIME seconds) and T + D: a profiler
attached in the middle of the run. Sites with less than --min-share of all calls (default
2%) are printed, not checked: a handful of calls seen cannot make a 5% claim.
Prints a table; exits 1 when a checked site is off by more than --tol percent (default 5)
from the truth or from the exact count, or an exact count is not the truth.
--ci COMMENTS: the profile's comments (pprof -raw); a site's bound is then the wider of
--tol and 1.5 times the half-width of the 95% interval gpubpf stated for its group (about
three standard errors): a pattern the windows see badly (bursts in phase with the period)
must come with an honest wide interval, and is held to it, not to a 5% it never claimed.
--by-group (with --ci): the sites are printed, not checked; each group's truth (its sites'
sum) must be inside the 95% interval gpubpf stated for the group. For a recording of few
periods (8): a site's share of its group's calls is itself drawn with the windows (the
bursts pattern's sites come in different bursts), and a site's error is then not the
group's: sites of one 3 s recording read -35% and +25% while the group was -6%."""
import bisect
import re
import sys


def arg(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def top(path):
    """site -> cumulative calls, from pprof -top -cum."""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 6 and re.match(r"^site_\d\d$", f[5]):
            out[f[5]] = float(f[3])
    return out


def own(path):
    out, api = {}, {}
    for line in open(path):
        m = re.match(r"^replay: (site_\d\d) (\S+) (\d+)$", line.strip())
        if m:
            out[m.group(1)] = float(m.group(3))
            api[m.group(1)] = m.group(2)
    return out, api


def from_log(path, start, dur):
    rows = [list(map(int, line.split())) for line in open(path) if line.strip()]
    ts = [r[0] / 1e9 for r in rows]

    def at(t):
        i = bisect.bisect_left(ts, t)
        if i == 0:
            return rows[0][1:]
        if i >= len(rows):
            return rows[-1][1:]
        a, b = rows[i - 1], rows[i]
        f = (t - ts[i - 1]) / (ts[i] - ts[i - 1])
        return [x + (y - x) * f for x, y in zip(a[1:], b[1:])]

    a, b = at(start), at(start + dur)
    return {"site_%02d" % i: y - x for i, (x, y) in enumerate(zip(a, b)) if y - x > 0}


GROUPS = (("launch", "launches"), ("memcpy", "copies"), ("memset", "copies"), ("sync", "syncs"))


def intervals(path):
    """group -> (lo, hi, half-width in percent) of gpubpf's 95% interval for its calls, from
    its comments (hi None and no half-width: unbounded above)."""
    out = {}
    for line in open(path):
        m = re.search(r"cuda estimate: (\w+): [\d,]+ calls, 95% CI ([\d,]+)-([\d,]+|unbounded) (\(\+-([\d.]+)%\))?", line)
        if m and m.group(1) not in out:
            hi = None if m.group(3) == "unbounded" else float(m.group(3).replace(",", ""))
            out[m.group(1)] = (float(m.group(2).replace(",", "")), hi, float(m.group(5)) if m.group(5) else 0)
    return out


def group_of(api_name):
    for key, group in GROUPS:
        if key in api_name:
            return group
    return None


def main():
    pos = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a.startswith("--")}
    pos = [a for a in pos if a not in flags]
    est = top(pos[0])
    truth, api = own(pos[1])
    exact = top(pos[2]) if len(pos) > 2 else None
    tol = float(arg("--tol", 5))
    min_share = float(arg("--min-share", 2))
    if arg("--log"):
        truth = from_log(arg("--log"), float(arg("--start")), float(arg("--duration")))
    stated = intervals(arg("--ci")) if arg("--ci") else {}
    ci = {g: v[2] for g, v in stated.items()}
    by_group = "--by-group" in sys.argv
    total = sum(truth.values())
    bad = []
    print(f"{'site':8} {'call':18} {'truth':>9} {'exact':>9} {'estimate':>10} {'est/truth':>9} {'bound':>6} checked")
    for site in sorted(truth):
        t, e = truth[site], est.get(site, 0)
        x = exact.get(site, 0) if exact is not None else None
        checked = total > 0 and 100 * t / total >= min_share and not by_group
        r = e / t if t else 0
        bound = max(tol, 1.5 * ci.get(group_of(api.get(site, "")), 0))
        print(f"{site:8} {api.get(site, '?'):18} {t:9.0f} {'' if x is None else '%9.0f' % x:>9} {e:10.0f} "
              f"{r:9.3f} {bound:5.1f}% {'yes' if checked else 'no (by group)' if by_group else 'no (few calls)'}")
        if x is not None and x != t:
            bad.append(f"{site}: exact {x:.0f} != truth {t:.0f}")
        if not checked:
            continue
        if abs(e - t) > bound / 100 * t:
            bad.append(f"{site}: estimate {e:.0f} off the truth {t:.0f} by {100 * (e / t - 1):+.1f}% (bound {bound:.1f}%)")
        if x and abs(e - x) > bound / 100 * x:
            bad.append(f"{site}: estimate {e:.0f} off --exact {x:.0f} by {100 * (e / x - 1):+.1f}% (bound {bound:.1f}%)")
    print(f"{'total':27} {total:9.0f} {'' if exact is None else '%9.0f' % sum(exact.values()):>9} "
          f"{sum(est.values()):10.0f} {sum(est.values()) / total if total else 0:9.3f}")
    if by_group:
        for group in sorted({group_of(a) for a in api.values()} - {None}):
            t = sum(v for site, v in truth.items() if group_of(api.get(site, "")) == group)
            if t <= 0:
                continue
            if group not in stated:
                bad.append(f"{group}: no interval stated for {t:.0f} calls")
                continue
            lo, hi, _ = stated[group]
            print(f"{group}: truth {t:.0f}, stated 95% interval {lo:.0f}-{'unbounded' if hi is None else '%.0f' % hi}")
            if t < lo or (hi is not None and t > hi):
                bad.append(f"{group}: truth {t:.0f} outside the stated interval {lo:.0f}-{hi}")
    for b in bad:
        print("MISMATCH " + b)
    sys.exit(1 if bad else 0)


main()
