#!/usr/bin/env python3
"""Python frames: the extra cost per CPU sample, measured by the kernel itself
(kernel.bpf_stats_enabled: run time and run count of the sampling program) while gpubpf
records a CPU-bound Python workload, with Python frames and with --no-python. And a
Python start-up's loads: the imports of every lib-dynload module alone and under
`gpubpf record --` in turn, the time they lost beside the holds gpubpf says it made."""
import json
import os
import subprocess
import time

import bench_holds

BUILD = os.environ.get("BUILD", "build")
G = os.path.join(BUILD, "gpubpf")
PY = "/usr/bin/python3"
WL = os.path.join(os.path.dirname(__file__), "workloads", "python", "ratio.py")
IMPORTS = os.path.join(os.path.dirname(__file__), "workloads", "python", "imports.py")
SECS = 6
RUNS = int(os.environ.get("BENCH_RUNS", "9"))


def prog_stats():
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True).stdout
    for p in json.loads(out or "[]"):
        if p.get("name") == "on_cpu_sample":
            return p.get("run_time_ns", 0), p.get("run_cnt", 0)
    return 0, 0


def per_sample(extra):
    wl = subprocess.Popen([PY, WL, str(SECS + 3)], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    rec = subprocess.Popen([G, "record", "-F", "999", "-p", str(wl.pid), "-d", str(SECS), "-o", "/dev/null",
                            *extra], stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    t0, n0 = prog_stats()
    time.sleep(SECS - 3)
    t1, n1 = prog_stats()
    rec.wait()
    wl.kill()
    wl.wait()
    return (t1 - t0) / (n1 - n0) if n1 > n0 else float("nan"), n1 - n0


def start_up():
    """The imports alone and under gpubpf, alternating (bench_holds.py)."""
    bench_holds.holds_row(G, "5s. python start-up (tests/workloads/python/imports.py: every lib-dynload module "
                          "imported, each a dlopen)", [PY, IMPORTS], r"imported \d+ in ([0-9.]+) s", RUNS)


def main():
    if not os.path.exists(PY) or not os.path.exists(WL):
        print("python frames: skipped (no /usr/bin/python3)")
        return
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        on, n_on = per_sample([])
        off, n_off = per_sample(["--no-python"])
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    print(f"5. python frames: the CPU sampling program takes {on:.0f} ns a sample with Python frames and "
          f"{off:.0f} ns with --no-python ({on - off:+.0f} ns a sample; {n_on} and {n_off} samples of "
          f"tests/workloads/python/ratio.py, kernel bpf_stats)", flush=True)
    start_up()


main()
