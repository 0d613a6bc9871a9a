#!/usr/bin/env python3
"""CUDA launch overhead, side by side: launch_loop (cudaLaunchKernel through the real
libcudart in a tight loop; without a GPU each call fails fast, the worst case for the
relative cost of a probe) alone and under gpubpf record."""
import os
import re
import statistics
import subprocess
import tempfile

BUILD = os.environ.get("BUILD", "build")
G = os.path.join(BUILD, "gpubpf")
WL = os.path.join(BUILD, "workloads", "cuda", "launch_loop")
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
N = os.environ.get("BENCH_LAUNCHES", "200000")


def wall(cmd):
    """launch_loop's own time for its launches ("seconds=T"): what the target loses."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    m = re.search(r"seconds=([0-9.]+)", out)
    if not m:
        raise SystemExit(f"cannot read launch_loop's time from: {out!r}")
    return float(m.group(1))


def main():
    if not os.path.exists(WL):
        print("cuda launch-heavy: skipped (no CUDA workloads built: CUDA is not installed)")
        return
    out = tempfile.mktemp(suffix=".pb.gz")
    variants = [("exact", [])] + [(v, a) for v, a in [("default", ["--overhead-budget", "1"])]
                                  if subprocess.run([G, "record", "--help"], capture_output=True,
                                                    text=True).stdout.find("--overhead-budget") >= 0]
    for name, extra in variants:
        alone, under = [], []
        for _ in range(RUNS):
            alone.append(wall([WL, N]))
            under.append(wall([G, "record", *extra, "-o", out, "--", WL, N]))
        a, u = statistics.median(alone), statistics.median(under)
        print(f"cuda launch-heavy ({N} cudaLaunchKernel calls, {name}): alone {a:.3f} s "
              f"({int(N) / a / 1e3:.0f}k launches/s), with gpubpf {u:.3f} s, ratio {u / a:.3f} "
              f"(median of {RUNS} alternating runs)", flush=True)
    os.unlink(out)


main()
