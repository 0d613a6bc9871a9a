"""A started command's holds at its loads, for make bench's start-up rows (bench.py,
bench_python.py): the command alone and under `gpubpf record --` in turn, the time its
loads took as it prints it, and beside the time they lost what gpubpf's `cost: holds:`
comment says its holds took (its own account of that time)."""
import os
import re
import statistics
import subprocess
import tempfile


def loads_time(cmd, pattern):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return float(re.search(pattern, out).group(1))


def holds_row(gpubpf, label, cmd, pattern, runs):
    """One line: medians of RUNS alternating runs, every run, the holds said."""
    out = tempfile.mktemp(suffix=".pb.gz")
    alone, under, held, passed = [], [], [], []
    for _ in range(runs):
        alone.append(loads_time(cmd, pattern))
        under.append(loads_time([gpubpf, "record", "-o", out, "--", *cmd], pattern))
        c = subprocess.run([gpubpf, "report", out], check=True, stdout=subprocess.PIPE, text=True).stdout
        m = re.search(r"held (\d+) times .*?: ([0-9.]+) ms in all.*?; (\d+) more calls", c)
        held.append(float(m.group(2)) if m else float("nan"))
        passed.append(int(m.group(3)) if m else -1)
    os.unlink(out)
    a, u = statistics.median(alone), statistics.median(under)
    line = (f"{label}, `record --`: alone {1e3 * a:.0f} ms, with gpubpf {1e3 * u:.0f} ms, ratio {u / a:.2f} "
            f"(median of {runs} alternating runs); gpubpf said its holds took {statistics.median(held):.0f} ms "
            f"(whole run, exec included), measured +{1e3 * (u - a):.0f} ms in the loads; "
            f"{statistics.median(passed):.0f} first calls of a load let go with no hold; runs alone "
            f"{' '.join(f'{1e3 * x:.0f}' for x in alone)}, with {' '.join(f'{1e3 * x:.0f}' for x in under)} ms")
    print(line, flush=True)
    return line
