#!/usr/bin/env python3
"""make bench: overhead of gpubpf, measured side by side in one run.

Each benchmark alternates runs of a fixed-work workload alone and under gpubpf and
reports the median wall time of each and their ratio. gpubpf's own CPU time and peak
RSS over a long recording are read with getrusage of the gpubpf child.
"""
import contextlib
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

import bench_holds
import bench_own

BUILD = os.environ.get("BUILD", "build")
G = os.path.join(BUILD, "gpubpf")
WL = os.path.join(BUILD, "workloads")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
results = []


def own_time(cmd):
    """The workload's own elapsed time, as it reports it ("... in 1.234 s"): what the
    target loses, without gpubpf's start-up and write-out around it."""
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    m = re.search(r"in ([0-9.]+) s", out)
    if not m:
        sys.exit(f"cannot read the elapsed time from: {out!r}")
    return float(m.group(1))


def side_by_side(name, workload, record_args, target):
    """Alternate: workload alone, workload under `gpubpf record ARGS -- workload`."""
    alone, under = [], []
    out = tempfile.mktemp(suffix=".pb.gz")
    for i in range(RUNS):
        alone.append(own_time(workload))
        under.append(own_time([G, "record", *record_args, "-o", out, "--", *workload]))
    os.unlink(out)
    ratio = statistics.median(under) / statistics.median(alone)
    # the host's noise in the same run: a ratio nearer 1.00 than it is not separable from it
    aa = statistics.median(abs(a / b - 1) for a, b in zip(alone, alone[1:])) if len(alone) > 1 else 0
    pairs = [u / a for a, u in zip(alone, under)]
    line = (f"{name}: alone {statistics.median(alone):.3f} s, with gpubpf {statistics.median(under):.3f} s, "
            f"ratio {ratio:.4f} (target <= {target}; median of {RUNS} alternating runs); host noise: consecutive "
            f"alone runs differ by {100 * aa:.1f}% (median), pair ratios {min(pairs):.3f}-{max(pairs):.3f}")
    print(line, flush=True)
    results.append(line)


def own_cost(name, workload, secs):
    """gpubpf's CPU time (percent of one core) and peak RSS over a recording of SECS."""
    cpu, rss, elapsed = bench_own.own_cost(G, workload, secs, tempfile.mktemp(suffix=".pb.gz"))
    line = f"{name}: gpubpf CPU {cpu:.2f}% of one core over {elapsed:.1f} s, peak RSS {rss:.1f} MiB"
    print(line, flush=True)
    results.append(line)


@contextlib.contextmanager
def idle_polling():
    """Idle CPUs kept polling while held: /dev/cpu_dma_latency at 0, which every cpuidle
    governor reads as "no idle state but polling". A host whose idle vCPUs halt at once
    (haltpoll with guest_halt_poll_ns=0, a Firecracker guest's) wakes one in ~50 us, and a
    hand-over across CPUs waits on it; gpubpf's own threads keep a vCPU out of halt, so the
    pair ran faster beside them (0.769 on such a host): with both arms polling the
    comparison is like for like. Yields False where the file cannot be held."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except OSError:
        yield False
        return
    try:
        os.write(fd, struct.pack("i", 0))
        yield True
    finally:
        os.close(fd)


def cpuidle():
    """This host's cpuidle driver and its first non-polling state's exit latency."""
    base = "/sys/devices/system/cpu"
    try:
        with open(f"{base}/cpuidle/current_driver") as f:
            drv = f.read().strip()
        with open(f"{base}/cpu0/cpuidle/state1/latency") as f:
            lat = f.read().strip()
        return f"{drv}, its halt state's exit latency {lat} us as stated"
    except OSError:
        return "none"


SLICE = 0.1  # cpu_handoff's slices (WL_HANDOFF_SLICE), for the loss within a run


def early_loss(slices, until, secs):
    """The time the first UNTIL s of a run lost against the same run's rate after it, as a
    share of the run: the pair's rate drifts from run to run on a VM (85k-150k/s alone here,
    and within a run), far more than gpubpf costs it once sampling went per CPU, so a whole
    run's median against another's measures the host; the run against itself does not."""
    k = min(len(slices) - 1, int(until / SLICE + 0.999) + 2)  # a slice's margin each side
    steady = statistics.mean(slices[k:])
    return sum(max(0.0, 1 - x / steady) for x in slices[:k]) * SLICE / secs


def handoff(name, prefix, args=()):
    """Two threads handing work to each other (cpu_handoff: a switch of each thread a
    hand-over), alone and under gpubpf ARGS in turn: the hand-overs a second, and beside
    the measured loss what gpubpf estimated its sampler's events add to the switches (the
    most switched thread's, up to all the threads'). With --overhead-budget 100 each thread
    keeps its own clock to the end; under the default budget sampling goes per CPU within
    a second, and the loss is also measured within each run: its part before sampling went
    per CPU against its own rate after (alone's start-up, measured the same way, taken
    off)."""
    secs = 3
    wl = prefix + [os.path.join(WL, "cpu_handoff"), str(secs)]
    env = dict(os.environ, WL_HANDOFF_SLICE=str(SLICE))
    out = tempfile.mktemp(suffix=".pb.gz")
    rate = lambda text: float(re.search(r"per_sec=([0-9.]+)", text).group(1))
    cut = lambda text: [float(x) for x in re.findall(r"slice t=[0-9.]+ per_sec=([0-9.]+)", text)]
    alone, under, mids, alls, early = [], [], [], [], []
    for i in range(RUNS):
        r = subprocess.run(wl, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        alone.append(rate(r.stdout))
        a_slices = cut(r.stderr)
        r = subprocess.run([G, "record", *args, "-o", out, "--", *wl], check=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
        under.append(rate(r.stdout))
        u_slices = cut(r.stderr)
        c = subprocess.run([G, "report", out], check=True, stdout=subprocess.PIPE, text=True).stdout
        m = re.search(r"context switches: .*?, ([0-9.e+-]+)% of its time, .*? up to ([0-9.e+-]+)%", c)
        mids.append(float(m.group(1)) if m else float("nan"))
        alls.append(float(m.group(2)) if m else float("nan"))
        went = re.search(r"sampled per CPU from ([0-9.]+) s on", c)
        if went and len(a_slices) > 10 and len(u_slices) > 10:
            t = float(went.group(1))
            early.append(early_loss(u_slices, t, secs) - early_loss(a_slices, t, secs))
    os.unlink(out)
    a, u = statistics.median(alone), statistics.median(under)
    within = (f", {100 * statistics.median(early):.2g}% within the runs (their part before sampling went per "
              f"CPU against their rate after, less alone's: {' '.join(f'{100 * x:.2g}' for x in early)})"
              if len(early) == RUNS else "")
    line = (f"{name}: alone {a:.0f}/s, with gpubpf {u:.0f}/s, ratio {a / u:.3f} (median of {RUNS} alternating "
            f"runs); estimated {statistics.median(mids):.2g}% (up to {statistics.median(alls):.2g}%), measured "
            f"{100 * (1 - u / a):.2g}% of the threads' time{within}; runs alone "
            f"{' '.join(f'{x:.0f}' for x in alone)}, with {' '.join(f'{x:.0f}' for x in under)}")
    print(line, flush=True)
    results.append(line)


def main():
    if os.geteuid() != 0:
        sys.exit("make bench needs root (gpubpf records with BPF)")
    which = sys.argv[1:] or ["cpu"]
    print(f"gpubpf bench on {os.uname().release}, {os.cpu_count()} CPUs", flush=True)
    if "cpu" in which:
        side_by_side("cpu-bound, -F 99", [os.path.join(WL, "cpu_fixed"), "4000"], ["-F", "99"], 1.01)
        own_cost("cpu-bound recording", [os.path.join(WL, "cpu_ratio"), "1000"], int(os.environ.get("BENCH_SECS", "30")))
    if "cpu" in which or "handoff" in which:
        one = ["taskset", "-c", str(os.cpu_count() - 1)]
        own = ["--overhead-budget", "100"]
        handoff("two threads handing work to each other, own clocks kept (--overhead-budget 100)", [], own)
        handoff("the same, default (per CPU within a second)", [])
        with idle_polling() as held:
            if held:
                handoff("the same, default, idle CPUs kept polling in both arms (/dev/cpu_dma_latency 0; "
                        f"cpuidle: {cpuidle()})", [])
        handoff("the same on one CPU, own clocks kept", one, own)
        handoff("the same on one CPU, default", one)
    if "cpu" in which or "loads" in which:
        results.append(bench_holds.holds_row(
            G, "a start-up among 3000 mappings (maps_loads 3000: 8 dlopens)",
            [os.path.join(WL, "maps_loads"), "3000"], r"dlopens in ([0-9.]+) s", 2 * RUNS - 1))
        big = ["/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", "/usr/lib/llvm-14/lib/libclang-cpp.so.14"]
        if all(os.path.exists(b) for b in big):  # clang's own, which make deps installs
            results.append(bench_holds.holds_row(
                G, "large C++ libraries loaded (maps_loads 0 libLLVM-14 libclang-cpp14: 76k dynamic symbols)",
                [os.path.join(WL, "maps_loads"), "0", *big], r"dlopens in ([0-9.]+) s", 2 * RUNS - 1))
        # a library with its symbol table left in (a self-built LLVM's, a package's -g build)
        unstripped = bench_holds.unstripped_library(os.path.join(BUILD, "bench-unstripped.so"))
        results.append(bench_holds.holds_row(
            G, "an unstripped library loaded (maps_loads 0 bench-unstripped.so: 250k local functions, 20 MB "
            "of names)", [os.path.join(WL, "maps_loads"), "0", unstripped], r"dlopens in ([0-9.]+) s",
            2 * RUNS - 1))
        # the CUDA libraries a PyTorch start-up loads, among 1500 mappings
        lib64 = os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "lib64")
        cuda = [os.path.join(lib64, n) for n in (
            "libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9", "libcufft.so.12",
            "libcurand.so.10", "libcusparse.so.12", "libcusolver.so.12", "libnccl.so.2", "libnvrtc.so.13",
            "libcupti.so.13", "libnvJitLink.so.13")]
        if all(os.path.exists(c) for c in cuda):
            results.append(bench_holds.holds_row(
                G, "the CUDA toolkit's libraries loaded among 1500 mappings (maps_loads 1500: 12 dlopens)",
                [os.path.join(WL, "maps_loads"), "1500", *cuda], r"dlopens in ([0-9.]+) s", 2 * RUNS - 1))
    for name in ("cuda", "python"):
        extra = os.path.join(os.path.dirname(__file__), f"bench_{name}.py")
        if os.path.exists(extra) and name in which:
            subprocess.run([sys.executable, extra], check=True)


if __name__ == "__main__":
    main()
