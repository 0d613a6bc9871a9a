#!/usr/bin/env python3
"""The GPU check: everything about gpubpf that only a real NVIDIA GPU and driver can show,
in one run, with nothing but this bundle, Python 3 and PyTorch (no go, no perf, no
network). `make gpu-bundle` builds the bundle on the development machine; here:

  sudo python3 gpu_check.py            (env: OUT=dir, PYTHON=the PyTorch python,
                                        ITERS=200, ITERS_DEFAULT=2000 (default mode's
                                        PyTorch loop), QUICK=1 for one round of throughput,
                                        ROUNDS=N for N, GPU_CHECK_SECONDS=520,
                                        GPU_CHECK_PIN=0 or a CPU list,
                                        GPU_CHECKS="throughput estimates" for
                                        those checks only, in the order below)

It keeps to GPU_CHECK_SECONDS (520 by default: a device call's limit is 600): the rounds
of the throughput, switches and parts rows stop early (their rows say of how many rounds)
and a check with too little time left is not started (a SKIP row says so), each check
keeping for those after it what one round of them takes. SIGTERM (timeout) ends it with
the table of the rows so far.

SELFTEST=1 runs what needs no GPU and no PyTorch (the C workloads' rows, launch_loop's
throughput, a Python-driven ctypes step, launch_step.py, for PyTorch's) on a machine without either, to check this script itself (tests/e2e/79).

The timed jobs (throughput, switches, parts) run on the same few CPUs in every mode, alone
or not (GPU_CHECK_PIN: job_cpus), and each row gives its "alone" runs' spread.

Profiles are read with gpubpf's own reader (gpubpf convert --format folded). Every
result goes to $OUT/results.tsv as soon as it is known (a run cut short keeps what it
had), the table to $OUT/table.txt and standard output. Exit 0 when every check passed or
was skipped for a stated reason (no GPU, no PyTorch, not root), 1 when one failed.

Items (issue 12; throughput targets are issue 13's):
  1 device time on a PyTorch job, per-kernel mean durations against torch.profiler
  2 launches left unnamed ([cuda kernel 0x...]) in the PyTorch loop, default and --exact,
    and in runtime_wl (shared and static cudart) and driver_wl
  3 the share of device time under a Python frame, against the launches' share
  4 a program of under a second (runtime_wl) keeps all its kernels' device time
  5 --trace: launches joined to the traced call that made them
  6 throughput, alone / default / device time / --exact / torch.profiler: launch_loop
    (40-ns failing launches are not what runs here: real ones), launch_loop with a 4 us
    spin per launch, and a launch-bound PyTorch step
  13 default mode's launch estimates against the truth: launch_loop (the thread sets the
    pace), launch_loop --device-us 20 (a full device queue does), the PyTorch loop against
    --exact of the same length (ITERS_EST=3000); the self-paced ones with bare calls
    (GPUBPF_BARE_EVERY=8): what a call's work costs the job beyond its run time (INFO)
  13 (traps) a return hit's whole cost to the job by its pace, against the trap gpubpf books:
    launch_loop --spin-us 4 and the PyTorch step (gpu_traps.py; Linux 6.13+), and what a
    system call costs a Python step's own code after it (kentry_step.py), with a row on the
    host's kernel, CPU, boot flags, mitigations and CPU counters (the instruction clock's)
  14 device time never breaks the job: the PyTorch step and launch_loop --spin-us 4 under
    default mode with device time, SURVIVE_RUNS (4) runs each, none may die (at 1d503a9
    the step died in 4 of 9 runs: heap corruption, a cuptiFinalize inside a nested call)"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import gpu_common
import gpu_cost
import gpu_device
import gpu_traps
from gpu_common import *  # noqa: F401,F403 (the check's settings and helpers)

# Each check by the name the time table (LEAST_S) and the order below know it by.
CHECKS = {"cupti": gpu_cost.check_cupti, "survives": gpu_device.check_survives, "programs": gpu_device.check_programs,
          "pytorch": gpu_device.check_pytorch, "trace": gpu_device.check_trace, "estimates": gpu_cost.check_estimates,
          "remeasure": gpu_cost.check_remeasure, "throughput": gpu_cost.check_throughput,
          "switches": gpu_cost.check_switches, "parts": gpu_cost.check_parts, "traps": gpu_traps.check}


def environment():
    """None when the checks can run, else why not."""
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi: no NVIDIA driver here"
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if p.returncode:
        return "nvidia-smi -L fails: %s" % (p.stdout + p.stderr).strip()[:200]
    log("gpu: " + p.stdout.strip().splitlines()[0])
    p = subprocess.run([PY, "-c", "import torch; print(torch.__version__, torch.version.cuda, "
                        "torch.cuda.is_available())"], capture_output=True, text=True)
    if p.returncode or not p.stdout.strip().endswith("True"):
        return "PyTorch with CUDA is not usable by %s: %s" % (PY, (p.stdout + p.stderr).strip()[-200:])
    log("torch: " + p.stdout.strip())
    if os.geteuid() != 0:
        return "gpubpf record needs root"
    return None


def read_text(path):
    """PATH's text, or "" where it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def host():
    """The kernel, the CPU, the CPU's counters and the boot's flags and mitigations that weigh
    on a kernel entry (what a probe hit costs the job's code after it, and whether an
    instruction clock could time it)."""
    try:
        srcs = sorted(os.listdir("/sys/bus/event_source/devices"))
    except OSError:
        srcs = []
    pmu = [d for d in srcs if d == "cpu" or d.startswith("cpu_")]
    flags = ("mitigations", "nested_pvm", "pti", "nopti", "spectre_v2", "retbleed", "spec_rstack_overflow")
    boot = [w for w in read_text("/proc/cmdline").split() if w.split("=")[0] in flags]
    spectre = read_text("/sys/devices/system/cpu/vulnerabilities/spectre_v2").strip() or "unknown"
    cpuinfo = read_text("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    virt = "a hypervisor's guest" if re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M) else "bare metal"
    vdir = "/sys/devices/system/cpu/vulnerabilities"
    try:
        vnames = sorted(os.listdir(vdir))
    except OSError:
        vnames = []
    # what the kernel does about each, where it does anything (spectre_v2 is given whole above)
    active = ["%s=%s" % (v, read_text(os.path.join(vdir, v)).strip()) for v in vnames
              if v != "spectre_v2" and read_text(os.path.join(vdir, v)).strip() not in ("", "Not affected")]
    return "kernel %s; CPU counters: %s; boot: %s; spectre_v2: %s; CPU: %s, %s; others: %s" % (
        os.uname().release, ",".join(pmu) if pmu else "none (%s)" % " ".join(srcs),
        " ".join(boot) or "no such flags", spectre, model.group(1).strip() if model else "unknown", virt,
        "; ".join(active) or "none")


def table():
    lines = ["%-4s %-62s %-44s %-32s %s" % ("item", "check", "value", "target", "verdict")]
    for r in rows:
        lines.append("%-4s %-62.62s %-44s %-32s %s" % r)
    text = "\n".join(lines)
    with open(os.path.join(OUT, "table.txt"), "w") as f:
        f.write(text + "\n")
    print("\n" + text)


def main():
    want = os.environ.get("GPU_CHECKS", "").replace(",", " ").split()
    unknown = [c for c in want if c not in CHECKS]
    if unknown:
        print("gpu_check.py: GPU_CHECKS names no check %s; the checks, in the order they run: %s"
              % (", ".join(unknown), " ".join(CHECKS)), file=sys.stderr)
        return 2
    os.makedirs(OUT, exist_ok=True)
    for f in ("results.tsv", "log.txt", "throughput.txt"):
        if os.path.exists(os.path.join(OUT, f)):
            os.remove(os.path.join(OUT, f))
    p = subprocess.run([GPUBPF, "--version"], capture_output=True, text=True)
    log("gpubpf: %s; output in %s" % ((p.stdout or p.stderr).strip(), OUT))
    signal.signal(signal.SIGTERM, on_term)
    if SELFTEST:
        result("all", "self-test (no GPU): C workloads and launch_loop only", "-", "-", "SKIP")
        checks = ["survives", "programs", "estimates", "remeasure", "throughput", "switches", "parts", "traps"]
    else:
        why = environment()
        if why:
            result("all", "GPU checks", "not run: " + why, "a GPU, its driver, PyTorch, root", "SKIP")
            table()
            return 0
        checks = ["cupti", "survives", "programs", "pytorch", "trace", "estimates", "remeasure", "throughput",
                  "switches", "parts", "traps"]
    if want:
        # in the order the full run has them (what one check leaves, the next may use)
        checks = [c for c in checks if c in want]
        result("-", "the checks run (GPU_CHECKS)", " ".join(checks) or "none of them here", "-", "INFO")
    gpu_common.JOB_CPUS = job_cpus()
    result("6", "the timed jobs' CPUs, alone and under gpubpf (GPU_CHECK_PIN)",
           "%s of %d" % (",".join(map(str, gpu_common.JOB_CPUS)) if gpu_common.JOB_CPUS else "any", len(os.sched_getaffinity(0))),
           "one a core, by the GPU", "INFO")
    result("13", "the host (its kernel entry, its counters)", host(), "-", "INFO")
    try:
        for i, c in enumerate(checks):
            gpu_common.reserve = sum(LEAST_S[x] for x in checks[i + 1:])
            if left() < LEAST_S[c]:
                result("-", "check_" + c, "not run: out of time (%.0f s of GPU_CHECK_SECONDS=%g left, it takes %d s "
                       "or more)" % (max(left(), 0), SECONDS, LEAST_S[c]), "time", "SKIP")
                continue
            CHECKS[c]()
    except Stopped:
        result("-", "the check", "stopped by SIGTERM after %.0f s: the rows so far" % (time.monotonic() - T0),
               "not stopped", "FAIL")
    table()
    return 1 if gpu_common.failed else 0


if __name__ == "__main__":
    sys.exit(main())
