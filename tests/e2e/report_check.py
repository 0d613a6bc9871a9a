#!/usr/bin/env python3
"""Every number `gpubpf report --raw --top 0` prints for a profile, recomputed from
`go tool pprof -raw` of the same file (pprof's own reading, not gpubpf's).

  report_check.py REPORT_TXT PPROF_FILE

Checked: the API summary (calls and wait per API function: the samples whose stack holds
that function), the GPU kernel summary (device time and launches per kernel), the memory
operations (calls, bytes and device time per copy direction), the top-functions table
(self: at the leaf, cum: anywhere once per stack) and every percentage and average.
Prints "ok N numbers" or the mismatches; exit 1 on any."""
import collections
import re
import subprocess
import sys


def parse_traces(text):
    """`go tool pprof -traces` output: [(value, [frame names, leaf first])]."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("-----------+"):
            cur = None
            continue
        if re.match(r"^\s*[\w.]+:\s{2}", line) and cur is None:
            continue  # a label of the sample ("pid:  468")
        m = re.match(r"^\s*(-?[\d.]+)(ns|B|)\s{3}(\S.*)$", line)
        if m and cur is None:
            cur = [float(m.group(1)), [re.sub(r" \(inline\)$", "", m.group(3))]]
            out.append(cur)
            continue
        if cur is not None and line.strip():
            cur[1].append(re.sub(r" \(inline\)$", "", line.strip()))
    return out


def load_traces(pprof_file):
    """{sample type: parsed -traces} for the types the report's tables use."""
    kinds = {"cuda_calls": "", "cuda_sync_wait": "-unit=ns", "cuda_launches": "", "gpu_kernel_time": "-unit=ns",
             "cuda_memcpy": "-unit=B", "samples": "", "cpu": "-unit=ns"}
    traces = {}
    for t, unit in kinds.items():
        args = ["go", "tool", "pprof", "-symbolize=none", "-sample_index=" + t, "-traces"]
        if unit:
            args.append(unit)
        r = subprocess.run(args + [pprof_file], capture_output=True, text=True)
        traces[t] = parse_traces(r.stdout) if r.returncode == 0 else []
    return traces


def parse_report(path):
    """{section: [(numbers, name)]}; numbers as strings ("-" kept)."""
    secs, cur, ncols = {}, None, 0
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if not line:
            cur = None
            continue
        if not line.startswith(" "):
            title = re.split(r" \(|:", line)[0]
            cur = secs.setdefault(title, [])
            ncols = 0
            continue
        if cur is None:
            continue
        toks = line.split()
        if not ncols and ":" in line:
            continue  # a note ("no device time: ..."), not the header
        if not ncols:
            # the header: numeric columns until the name column (its last word)
            header = re.split(r"\s{2,}|\s(?=\S+%)", line.strip())
            ncols = -1 if not toks or re.match(r"[-\d]", toks[0]) else len(line.split()) - 1
            if ncols > 0:
                # "avg wait" is one column of two words
                ncols = len(re.findall(r"\S+", line.replace("avg wait", "avg_wait"))) - 1
                if "call site" in line:
                    ncols -= 1
            continue
        if ncols <= 0 or len(toks) <= ncols or not re.match(r"[-\d]", toks[0]):
            continue
        # the name starts after the ncols-th number
        pos, n = 0, 0
        for m in re.finditer(r"\S+", line):
            n += 1
            if n == ncols:
                pos = m.end()
                break
        cur.append((toks[:ncols], line[pos:].strip()))
    return secs


def main():
    rep, pprof_file = sys.argv[1], sys.argv[2]
    traces = load_traces(pprof_file)
    secs = parse_report(rep)
    bad, checked = [], 0

    api_re = re.compile(r"^(__)?cu(da)?[A-Z]")

    def api_of(frames):
        """The CUDA API frame gpubpf puts under the GPU-side leaf (kernel, copy): the
        first API-named frame of the leaf-most three (a native cudaLaunchKernel deeper
        in the stack is not it)."""
        for f in frames[:3]:
            if api_re.match(f):
                return f
        return None

    def by_api(type_name, name):
        return round(sum(v for v, frames in traces.get(type_name, []) if api_of(frames) == name))

    def by_leaf(type_name, name):
        return round(sum(v for v, frames in traces.get(type_name, []) if frames and frames[0] == name))

    def check(what, got, want, tol=0):
        nonlocal checked
        checked += 1
        if abs(got - want) > tol:
            bad.append("%s: report %s, pprof %s" % (what, got, want))

    def num(s):
        return None if s == "-" else float(s.rstrip("%"))

    def pcts(sec, col, tcol):
        rows = secs.get(sec, [])
        total = sum(num(r[0][col]) or 0 for r in rows)
        for r in rows:
            v, p = num(r[0][col]), num(r[0][tcol])
            if total > 0 and v is not None:
                check("%s %s %%" % (sec, r[1][:40]), p, round(100 * v / total, 1), 0.051)

    for nums, name in secs.get("CUDA API summary", []):
        check("calls of " + name, num(nums[0]), by_api("cuda_calls", name))
        check("wait of " + name, num(nums[2]), by_api("cuda_sync_wait", name))
        if nums[4] != "-":
            check("avg wait of " + name, num(nums[4]), round(num(nums[2]) / num(nums[0])), 1)
    pcts("CUDA API summary", 0, 1)
    for nums, name in secs.get("GPU kernel summary", []):
        if len(nums) == 4:  # device time: time, time%, instances, avg
            check("device time of " + name[:60], num(nums[0]), by_leaf("gpu_kernel_time", name))
            check("launches of " + name[:60], num(nums[2]), by_leaf("cuda_launches", name))
        else:  # launches, launches%
            check("launches of " + name[:60], num(nums[0]), by_leaf("cuda_launches", name))
    if secs.get("GPU kernel summary"):
        pcts("GPU kernel summary", 0, 1)
    for nums, name in secs.get("Memory operations", []):
        check("calls of " + name, num(nums[0]), by_leaf("cuda_calls", name))
        check("bytes of " + name, num(nums[1]), by_leaf("cuda_memcpy", name))
    for title, rows in secs.items():
        m = re.match(r"Top functions by (\w+)", title)
        if not m:
            continue
        self_, cum_ = collections.Counter(), collections.Counter()
        for v, frames in traces.get(m.group(1), []):
            self_[frames[0]] += v
            for nm in set(frames):
                cum_[nm] += v
        for nums, name in rows:
            if name.startswith("["):  # "[N more]"
                continue
            check("self of " + name[:60], num(nums[0]), round(self_[name]))
            check("cum of " + name[:60], num(nums[2]), round(cum_[name]))
    if bad:
        print("\n".join(bad[:20]))
        print("%d of %d numbers differ" % (len(bad), checked))
        sys.exit(1)
    print("ok %d numbers" % checked)


if __name__ == "__main__":
    main()
