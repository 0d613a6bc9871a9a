#!/usr/bin/env python3
"""Query the CUDA part of a profile, read through the real consumer.

Input is the output of `go tool pprof -symbolize=none -traces -sample_index=IDX FILE`
(for byte and time indexes run it with -unit=byte / -unit=ns so that values print
exactly, e.g. "4194304B", "5449ns"). That output is a header, then one block per
sample (stack):

    -----------+-------------------------------------------------------
           pid:  19075                      <- labels, "key:  value"
    thread_name:  runtime_wl_stat
           100   saxpy_kernel<float>(...)   <- value for IDX, then the leaf frame
                 cudaLaunchKernel           <- further frames, leaf first
                 ...

usage: cuda_check.py CMD TRACES [filters...]
  sum     print the sum of the values of the matching stacks (an integer)
  count   print how many matching stacks have a non-zero value
  labels  print the distinct values of label --key among matching non-zero stacks
  stacks  print the matching non-zero stacks (for failure messages)
  why     the stacks with the same --leaf/--api, other filters dropped (for failure
          messages)
  dups    print non-zero stacks that have the same frame twice in a row (the
          workloads have no recursion); exit 1 if there are any
  serve   read queries "CMD<TAB>TRACES<TAB>filter..." from stdin, one answer line each
          (one python start for a whole test file)
filters (all must hold):
  --leaf NAME       frame 0 is NAME
  --api NAME        frame 0 or frame 1 is NAME (the synthetic API-function frame)
  --caller NAME     the frame right after the --api frame is NAME (needs --api)
  --under NAME      some frame after the leaf is NAME
  --not-under NAME  no frame after the leaf is NAME
  --label K=V       label K has value V;  --nolabel K: label K is absent
  --key K           (labels) the label to list
Each TRACES file is read once per process (serve caches it by path).
A NAME matches a frame equal to it, or the frame's name with its parameter list cut
off ("launch_a" matches "launch_a(int, float*, float*)"); a NAME ending in "*" matches
frames starting with the rest. Values with another unit than none, B or ns are an
error (run pprof with the -unit flag)."""
import re
import sys

SEP = "-----------+"
VALUE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e[+-]?\d+)?)(B|ns|)\s{2,}(\S.*)$")
LABEL_RE = re.compile(r"^\s*([A-Za-z_][\w.]*):\s{2,}(.*)$")


def blocks(path):
    """Yield (value, labels dict, [frames leaf first]) for every sample block."""
    started = False
    value, labels, frames = None, {}, []
    for raw in open(path):
        line = raw.rstrip("\n")
        if line.startswith(SEP):
            if value is not None:
                yield value, labels, frames
            started = True
            value, labels, frames = None, {}, []
            continue
        if not started or not line.strip():
            continue
        if value is None:
            m = VALUE_RE.match(line)
            if m:
                value = int(round(float(m.group(1))))
                frames = [m.group(3).strip()]
                continue
            m = LABEL_RE.match(line)
            if m:
                labels[m.group(1)] = m.group(2).strip()
                continue
            sys.exit(f"cuda_check.py: cannot parse line (wrong -unit?): {line!r}")
        frames.append(line.strip())
    if value is not None:
        yield value, labels, frames


def name_of(frame):
    f = frame
    if f.endswith(" (inline)"):
        f = f[: -len(" (inline)")]
    return f


def matches(frame, pat):
    f = name_of(frame)
    if pat.endswith("*"):
        return f.startswith(pat[:-1])
    if f == pat:
        return True
    return f.startswith(pat + "(")


def parse_args(argv):
    opts = {"leaf": None, "api": None, "caller": None, "under": [], "not_under": [], "label": [], "nolabel": [],
            "key": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if i + 1 >= len(argv):
            sys.exit(f"cuda_check.py: {a} needs a value")
        v = argv[i + 1]
        if a == "--leaf":
            opts["leaf"] = v
        elif a == "--api":
            opts["api"] = v
        elif a == "--caller":
            opts["caller"] = v
        elif a == "--under":
            opts["under"].append(v)
        elif a == "--not-under":
            opts["not_under"].append(v)
        elif a == "--label":
            k, _, val = v.partition("=")
            opts["label"].append((k, val))
        elif a == "--nolabel":
            opts["nolabel"].append(v)
        elif a == "--key":
            opts["key"] = v
        else:
            sys.exit(f"cuda_check.py: unknown option {a}")
        i += 2
    if opts["caller"] and not opts["api"]:
        sys.exit("cuda_check.py: --caller needs --api")
    return opts


def selected(o, labels, frames):
    if o["leaf"] and not matches(frames[0], o["leaf"]):
        return False
    if o["api"]:
        idx = next((i for i in (0, 1) if i < len(frames) and matches(frames[i], o["api"])), None)
        if idx is None:
            return False
        if o["caller"]:
            if idx + 1 >= len(frames) or not matches(frames[idx + 1], o["caller"]):
                return False
    rest = frames[1:]
    for u in o["under"]:
        if not any(matches(f, u) for f in rest):
            return False
    for u in o["not_under"]:
        if any(matches(f, u) for f in rest):
            return False
    for k, v in o["label"]:
        if labels.get(k) != v:
            return False
    for k in o["nolabel"]:
        if k in labels:
            return False
    return True


_cache = {}


def run(cmd, path, args):
    """One query; returns (text, exit status)."""
    o = parse_args(args)
    if cmd == "why":
        # the stacks a failed query looked at: same leaf/api, other filters dropped
        o = dict(parse_args([]), leaf=o["leaf"], api=o["api"])
        cmd = "stacks"
    if path not in _cache:
        _cache[path] = list(blocks(path))
    sel = [(v, l, f) for v, l, f in _cache[path] if selected(o, l, f)]
    if cmd == "sum":
        return str(sum(v for v, _, _ in sel)), 0
    if cmd == "count":
        return str(sum(1 for v, _, _ in sel if v)), 0
    if cmd == "labels":
        if not o["key"]:
            sys.exit("cuda_check.py: labels needs --key")
        return " ".join(sorted({l[o["key"]] for v, l, _ in sel if v and o["key"] in l})), 0
    if cmd == "stacks":
        return "\n".join(f"{v} [{' '.join(f'{k}={x}' for k, x in sorted(l.items()))}] " + " <- ".join(f)
                         for v, l, f in sel if v), 0
    if cmd == "dups":
        bad = []
        for v, l, f in sel:
            if not v:
                continue
            for a, b in zip(f, f[1:]):
                if a == b:
                    bad.append(f"{v}: frame '{a}' twice in a row: " + " <- ".join(f))
                    break
        return "\n".join(bad), 1 if bad else 0
    sys.exit(f"cuda_check.py: unknown command {cmd}")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        # One query per line, fields separated by tabs: CMD TRACES [filters...];
        # one answer line each (newlines in it become " ;; "), flushed.
        for line in sys.stdin:
            f = line.rstrip("\n").split("\t")
            try:
                text, _ = run(f[0], f[1], f[2:])
            except SystemExit as e:  # a bad query answers an error, the server goes on
                text = f"ERROR: {e}"
            except OSError as e:
                text = f"ERROR: {e}"
            sys.stdout.write(text.replace("\n", " ;; ") + "\n")
            sys.stdout.flush()
        return
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    text, rc = run(sys.argv[1], sys.argv[2], sys.argv[3:])
    if text:
        print(text)
    sys.exit(rc)


if __name__ == "__main__":
    main()
