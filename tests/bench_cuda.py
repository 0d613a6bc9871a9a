#!/usr/bin/env python3
"""CUDA overhead benchmarks, side by side in one run (alternating, median of RUNS):

1. launch-heavy: launch_loop calls cudaLaunchKernel through the real libcudart in a
   tight loop. Without a GPU each call fails fast (~40 ns), the worst case for the
   relative cost of a probe hit. Timed by the workload itself (its own launch loop), with
   gpubpf in default mode (overhead budget) and with --exact; then with a 4 us spin after
   each launch (what a real launch costs the calling thread); then the same into a device
   that sets the pace (10 us kernels, its queue of 1,024 full: each launch waits for one to
   finish, and the probes' delay comes out of that wait: gpubpf's estimate, the probes'
   share of the thread's time, is above the job's slowdown there by design).
   And a job that fills every CPU (launch_loop --busy: a spinning thread beside the
   launching one on each other CPU), where gpubpf's own threads take CPU time from it.
1r. replay: the real two-thread PyTorch timeline (tests/fixtures/gpu, H100) as a closed
   loop (each call after the previous one's real duration), its active part 4 times.
The --exact row also splits what a launch cost into kernel and user time (launch_loop's
getrusage): the user part, the loop's own code after each hit, is not counted.
1p. a launch-bound step driven by Python (ctypes), the same split, and default mode's
   launch estimate against the process's own count.
1w. the CUDA probes' own stack walk (bpf/fpwalk.bpf.h) against the kernel's
   (GPUBPF_FPWALK=0: a page fault every hit), under --exact: what a launch costs, split.
Each row prints gpubpf's own estimate of its overhead (the summary's "overhead ~X%",
medians of the runs) beside the slowdown measured: "estimated X%, measured Y%". gpubpf's
X is a share of its recording; the slowdown is of the part the job times (its loop: not
its start, nor the 1.5 s the producer sleeps after its loop for gpubpf to drain), where
the cost is spent: X is taken over that part (X times the recording's seconds over the
part's), and the recording's share is printed beside it.
2. mixed: the CUDA demo workload (runtime_wl_shared: launches, copies, syncs, allocations)
   held at its start gate, gpubpf attached with -p, released; timed from release to exit.
3. gpubpf's own CPU time and peak RSS over a 30 s recording of workload 1.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import bench_own

BUILD = os.environ.get("BUILD", "build")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
G = os.path.join(BUILD, "gpubpf")
CW = os.path.join(BUILD, "workloads", "cuda")
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
SECS = float(os.environ.get("BENCH_LAUNCH_SECS", "6"))
OWN_SECS = int(os.environ.get("BENCH_SECS", "30"))
BUSY = max(1, (os.cpu_count() or 2) - 1)  # launch_loop --busy: with its launching thread, every CPU


def measure(cmd, pattern, stdout=None):
    """Run CMD; the number PATTERN finds in its stdout, and gpubpf's estimated overhead
    (percent, from its summary line on stderr; None when CMD is not gpubpf). STDOUT, a
    list, gets CMD's standard output."""
    r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    m = re.search(pattern, r.stdout)
    if not m:
        sys.exit(f"cannot read {pattern!r} from: {r.stdout!r}")
    if stdout is not None:
        stdout.append(r.stdout)
    return float(m.group(1)), parse_est(r.stderr)


def parse_est(err):
    """gpubpf's summary: "overhead ~X%", and "(LO-HI%: ...)" when the traps' cost in the
    job is known only within a range, or "(LO-HI%: a device set the pace; T% of the
    thread's time)" where random stalls showed a device's queue absorbing the thread's
    delay (X is then the job's slowdown). (X, LO, HI, T) in percent (T = X where the
    thread's time is the estimate), or None."""
    # a number as gpubpf prints it ("7.3e-05"): a class with "-" in it ran on over the
    # range's own dash ("7.3e-05-8.1e-05%") and make bench stopped at the device-bound row
    num = r"([0-9.]+(?:e[+-]?[0-9]+)?)"
    m = re.search(rf"overhead ~{num}%(?: \({num}-{num}%)?"
                  rf"(?:: a device set the pace; {num}% of the thread's time)?", err)
    if not m:
        return None
    x = float(m.group(1))
    lo, hi = (float(m.group(2)), float(m.group(3))) if m.group(2) else (x, x)
    el = re.search(r"gpubpf: wrote .*?, ([0-9.]+) s[,)]", err)
    return x, lo, hi, float(m.group(4)) if m.group(4) else x, float(el.group(1)) if el else None


def on_span(e, span):
    """gpubpf's estimate is a share of its recording (E[4] seconds); the slowdown measured
    is of the part of it the job times (SPAN seconds: its loop, not its start or the 1.5 s
    the producer sleeps after its loop for gpubpf to drain), where every part of the cost
    is spent. Like for like: the estimate's seconds over SPAN (the recording's share is
    kept as E[5])."""
    if e is None or not e[4] or not span or span <= 0:
        return e
    f = max(e[4] / span, 1.0)
    return e[0] * f, e[1] * f, e[2] * f, e[3] * f, e[4], e[0]


def fmt_est(e):
    if e is None:
        return "?"
    return f"{e[0]:.2g}" if e[1] == e[2] else f"{e[0]:.2g} ({e[1]:.2g}-{e[2]:.2g})"


_splits = {}


def launch_rate(cmd):
    """launch_loop's rate under CMD and gpubpf's estimate; its CPU time a launch in user and
    kernel mode is kept for split_text (by the command, gpubpf's options and all)."""
    out = []
    v, e = measure(cmd, r"launches_per_sec=([0-9.]+)", out)
    u = re.search(r"user_us_per_launch=([0-9.]+) sys_us_per_launch=([0-9.]+)", out[0])
    n = re.search(r"launches=([0-9]+)", out[0])
    if u and n:
        _splits.setdefault(tuple(cmd), []).append((float(u.group(1)), float(u.group(2)), int(n.group(1)), e))
    return v, e


def split_text(a, u, note=True):
    """What a launch cost under gpubpf in kernel and in user time against alone (A and U: a
    run's (user us, kernel us a launch, the launches, gpubpf's estimate) each; medians),
    beside gpubpf's estimate of a hit (its share of its recording over the launches): the
    user part is the job's own code after each hit, not counted."""
    if not a or not u:
        return ""
    du = statistics.median(x[0] for x in u) - statistics.median(x[0] for x in a)
    dk = statistics.median(x[1] for x in u) - statistics.median(x[1] for x in a)
    g = [x[3][0] / 100 * x[3][4] * 1e6 / x[2] for x in u if x[3] and x[3][4] and x[2]]
    est = f"; gpubpf estimated {statistics.median(g):.2f} us a hit" if g else ""
    why = " (the job's own code after each hit, not counted)" if note else ""
    return f"a launch cost {du + dk:.2f} us more: {dk:.2f} us of kernel time, {du:.2f} us of user time{why}{est}"


def alternating(modes, run):
    """RUNS rounds of MODES ((name, arg) pairs), in turn, every other round backwards: RUN(arg)
    for each; the results by mode name."""
    res = {m: [] for m, _ in modes}
    for r in range(RUNS):
        for m, arg in modes if r % 2 == 0 else tuple(reversed(modes)):
            res[m].append(run(arg))
    return res


def run_kv(cmd, env=None):
    """Run CMD: the numbers of its summary line's k=v pairs (after its "name:"), and gpubpf's
    estimate as "est"."""
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **env) if env else None)
    v = {k: float(x) for k, x in re.findall(r"(\w+)=([0-9.]+)", p.stdout.rsplit(": ", 1)[-1])}
    v["est"] = parse_est(p.stderr)
    return v


def est_text(ests):
    """gpubpf estimates its cost as a share s of the busiest target thread's time; the
    slowdown that share makes is s / (1 - s) (the same for small s: 1% is 1.01%, but 95%
    is 19x), which is what is printed beside the measured slowdown."""
    ests = [e for e in ests if e is not None]
    if not ests:
        return "estimated ?"

    def slowdown(i):
        s = min(statistics.median(e[i] for e in ests), 99.99) / 100
        return s, 100 * s / (1 - s)

    (s, mid), (_, lo), (_, hi), (t, _) = slowdown(0), slowdown(1), slowdown(2), slowdown(3)
    rec = [e for e in ests if len(e) > 5]
    if rec:
        share = statistics.median(e[5] for e in rec)
        secs = statistics.median(e[4] for e in rec)
        over = f"over the job's timed part; {share:.2g}% of gpubpf's {secs:.3g} s recording, "
    else:
        over = ""
    if t > s:
        return (f"estimated {mid:.2g}% ({over}{lo:.2g}-{hi:.2g}%: the job's share of the thread's "
                f"{100 * t:.2g}%, a device set the pace)")
    span = f", {lo:.2g}-{hi:.2g}% with the traps' cost as uncertain as it is" if hi - lo > 0.1 * mid else ""
    return f"estimated {mid:.2g}% ({over}{100 * s:.2g}% of the thread's time{span})"


def noise_text(alone, under, rates=True):
    """The host's noise, measured in the same run: how much consecutive alone runs differ
    (the median of |a_i / a_i+1 - 1|), and the pair-by-pair wall-time ratios (median, range).
    A ratio of medians nearer 1.00 than that noise is not separable from it: that is when a
    ratio below 1.00 shows up, and why it is not a gpubpf speed-up."""
    if len(alone) < 2 or not all(alone) or not all(under):
        return ""
    aa = statistics.median(abs(a / b - 1) for a, b in zip(alone, alone[1:]))
    pairs = [a / u if rates else u / a for a, u in zip(alone, under)]
    return (f"\n   host noise: consecutive alone runs differ by {100 * aa:.1f}% (median); pair by pair the "
            f"wall-time ratio is {statistics.median(pairs):.3f} (median), {min(pairs):.3f}-{max(pairs):.3f}")


def launch_heavy(out):
    base = [os.path.join(CW, "launch_loop"), "--seconds", str(SECS)]
    for name, wl, extra in (("default (--overhead-budget 1)", base, []), ("--exact", base, ["--exact"]),
                            ("4 us spin a launch, default", base + ["--spin-us", "4"], []),
                            ("4 us spin a launch into a device that sets the pace (10 us kernels, a full "
                             "queue: launch_loop --device-us 10), default",
                             base + ["--spin-us", "4", "--device-us", "10"], []),
                            (f"4 us spin a launch, a job that fills all {os.cpu_count()} CPUs (launch_loop --busy "
                             f"{BUSY}: gpubpf's own CPU time comes out of the job), default",
                             base + ["--spin-us", "4", "--busy", str(BUSY)], [])):
        alone, under, ests = [], [], []
        for _ in range(RUNS):
            alone.append(launch_rate(wl)[0])
            u, e = launch_rate([G, "record", *extra, "-o", out, "--", *wl])
            under.append(u)
            ests.append(on_span(e, SECS))
        a, u = statistics.median(alone), statistics.median(under)
        split = split_text(_splits.get(tuple(wl)), _splits.get(tuple([G, "record", *extra, "-o", out, "--", *wl])))
        split = "\n   " + split if split and extra == ["--exact"] else ""
        print(f"   runs alone (M/s): {' '.join(f'{x / 1e6:.3f}' for x in alone)}; "
              f"with gpubpf: {' '.join(f'{x / 1e6:.3f}' for x in under)}; estimated overhead (%): "
              f"{' '.join(fmt_est(x) for x in ests)}")
        # Slowdown of the same work: the ratio of wall times is the inverse ratio of rates.
        print(f"1. launch-heavy, {name}: {a / 1e6:.3f}M launches/s alone, {u / 1e6:.3f}M with gpubpf: "
              f"wall-time ratio {a / u:.3f}; {est_text(ests)}, measured {100 * (a / u - 1):.2g}% "
              f"(target: ratio <= 1.02 in default mode; median of {RUNS}){noise_text(alone, under)}{split}",
              flush=True)


def replay(out, model=None):
    """The real two-thread PyTorch loop's timeline, replayed in a closed loop; with MODEL,
    its launches go through the CUPTI model of the H100's (10 ms set-up, 3 ms teardown) and
    gpubpf adds device time in windows."""
    calls = os.path.join(CW, "train.calls")
    if not os.path.exists(calls) or (model and not os.path.exists(model)):
        return
    wl = [os.path.join(CW, "replay"), calls, "--closed", "--loop-from", "6.1", "--repeat", "4"]
    wl += ["--cupti-model", model] if model else []
    alone, under, ests = [], [], []
    for _ in range(RUNS):
        alone.append(measure(wl, r"seconds=([0-9.]+)")[0])
        u, e = measure([G, "record", "-o", out, "--", *wl], r"seconds=([0-9.]+)")
        under.append(u)
        ests.append(on_span(e, u))
    a, u = statistics.median(alone), statistics.median(under)
    print(f"   runs alone (s): {' '.join(f'{x:.3f}' for x in alone)}; with gpubpf: "
          f"{' '.join(f'{x:.3f}' for x in under)}; estimated overhead (%): "
          f"{' '.join(fmt_est(x) for x in ests)}")
    what = ", launches through the CUPTI model, device time in windows" if model else ""
    print(f"1r. replay of the real PyTorch timeline (closed loop, 2 threads{what}), default: alone {a:.3f} s, "
          f"with gpubpf {u:.3f} s, ratio {u / a:.3f}; {est_text(ests)}, measured {100 * (u / a - 1):.2g}% "
          f"(target: ratio <= 1.02; median of {RUNS}){noise_text(alone, under, False)}", flush=True)


def python_step(out):
    """A launch-bound step driven by Python (tests/workloads/python/launch_step.py: 40
    operators a step, each a cudaLaunchKernel through ctypes), alone, in default mode and
    with --exact, alternating; rates per second of the thread's CPU time (the host's steal
    moves them less). Beside the slowdowns: default mode's launch count against the
    process's own, and what a launch costs under --exact, split by the kernel's accounting
    into kernel time (the trap and the programs, what gpubpf times and calibrates) and user
    time (the job's own code running slower after each hit: no clock of gpubpf's sees it),
    beside gpubpf's estimate of a hit."""
    lib = os.path.join(CUDA_HOME, "lib64", "libcudart.so")
    wl = [sys.executable, os.path.join(os.path.dirname(__file__), "workloads", "python", "launch_step.py"), lib,
          str(min(SECS, 3))]
    if not os.path.exists(lib):
        return
    modes = (("alone", None), ("default", ["--no-device-time"]), ("--exact", ["--exact", "--no-device-time"]))

    def one(args):
        v = run_kv(wl if args is None else [G, "record", *args, "-o", out, "--", *wl])
        if args == ["--no-device-time"]:
            rep = subprocess.run([G, "report", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True).stdout
            e = re.search(r"cuda estimate: launches: ([0-9,]+) calls, 95% CI ([0-9,]+)-([0-9,]+|unbounded)", rep)
            if e:
                num = lambda x: float("inf") if x == "unbounded" else float(x.replace(",", ""))
                v["count"], v["lo"], v["hi"] = num(e.group(1)), num(e.group(2)), num(e.group(3))
        return v

    res = alternating(modes, one)
    med = lambda m, k: statistics.median(x[k] for x in res[m])
    a = med("alone", "steps_per_cpu_sec")
    print("   runs (steps per CPU s): " + "; ".join(
        m + " " + " ".join("%.0f" % x["steps_per_cpu_sec"] for x in res[m]) for m, _ in modes))
    parts = []
    for m in ("default", "--exact"):
        u = med(m, "steps_per_cpu_sec")
        ests = [x["est"] for x in res[m]]
        parts.append(f"{m}: ratio {a / u:.3f}, {est_text(ests)}, measured {100 * (a / u - 1):.2g}%")
    cnt = [x for x in res["default"] if "count" in x]
    if cnt:
        errs = [100 * (x["count"] / x["launches"] - 1) for x in cnt]
        inside = sum(x["lo"] <= x["launches"] <= x["hi"] for x in cnt)
        parts.append(f"default's launch estimate against the process's count: {statistics.median(errs):+.1f}% "
                     f"(median; {min(errs):+.1f}% to {max(errs):+.1f}%), the count inside its 95% CI in {inside} "
                     f"of {len(cnt)} (target: within 5%)")
    # what a launch costs under --exact: the timed part's CPU time a step over its 40 launches
    per = {m: [(x["user_us_per_step"] / 40, x["sys_us_per_step"] / 40, x["launches"], x["est"]) for x in res[m]]
           for m in ("alone", "--exact")}
    parts.append("under --exact " + split_text(per["alone"], per["--exact"]))
    # the CPU's own counters of the thread's user mode, where the machine has them
    # (user_counters.py): instructions alike in every mode are a clock of progress
    if all("user_instr_per_step" in x for m in ("alone", "--exact") for x in res[m]):
        ins = {m: med(m, "user_instr_per_step") / 40 for m in ("alone", "--exact")}
        cyc = {m: med(m, "user_cycles_per_step") / 40 for m in ("alone", "--exact")}
        parts.append("a launch in user mode: %.0f instructions alone, x%.3f under --exact; %.0f cycles, %+.0f" % (
            ins["alone"], ins["--exact"] / ins["alone"], cyc["alone"], cyc["--exact"] - cyc["alone"]))
    print(f"1p. Python launch-bound step (ctypes, 40 launches a step), alone {a:.0f} steps per CPU s; "
          + "; ".join(parts) + f" (medians of {RUNS})", flush=True)


def walk_cost(out):
    """1w. What the CUDA probes' own stack walk (bpf/fpwalk.bpf.h) saves against the
    kernel's (GPUBPF_FPWALK=0, whose last read takes a page fault every hit): under --exact,
    alone, the own walk and the kernel's in turn, what a launch costs in kernel and user
    time (the workloads' own accounting) beside gpubpf's estimate of a hit, at 10 frames at
    the probe, at 50 (launch_loop --depth 40) and in the Python step."""
    ll = os.path.join(CW, "launch_loop")
    lib = os.path.join(CUDA_HOME, "lib64", "libcudart.so")
    step = os.path.join(os.path.dirname(__file__), "workloads", "python", "launch_step.py")
    cases = (("launch_loop, 10 frames at the probe", [ll, "--seconds", "3"], 1),
             ("launch_loop --depth 40, 50 frames", [ll, "--seconds", "3", "--depth", "40"], 1),
             ("Python step", [sys.executable, step, lib, "3"], 40))
    modes = (("alone", None), ("own walk", {}), ("kernel's walk", {"GPUBPF_FPWALK": "0"}))
    for name, wl, per in cases:
        if per > 1 and not os.path.exists(lib):
            print(f"1w. {name}: skipped ({lib} is missing)")
            continue
        unit = "launch" if per == 1 else "step"

        def one(env):
            v = run_kv(wl if env is None else [G, "record", "--exact", "--no-device-time", "-o", out, "--", *wl], env)
            return v[f"user_us_per_{unit}"] / per, v[f"sys_us_per_{unit}"] / per, v["launches"], v["est"]

        res = alternating(modes, one)
        parts = [f"{m}: " + split_text(res["alone"], res[m], note=False) for m, _ in modes[1:]]
        print(f"1w. {name}, --exact, {'; '.join(parts)} (medians of {RUNS})", flush=True)


def device_time(out):
    """Device time in windows: the synthetic producer's launch-bound loop (launches of 5 us,
    0.6 us dearer while "CUPTI" calls back, 3 us while it has activity on, 5 us of work
    after each), alone, under gpubpf
    in default mode (device time in windows of the budget's duty) and with --exact (activity
    on and every launch followed all the time: what device time cost before issue 13).
    Then the CUPTI backend itself against tests/workloads/inject/cupti_model (a CUPTI that
    behaves as the H100's: 4.5 us launches, 1.5 us dearer from activity's first enable until
    cuptiFinalize, 10 ms to set up and 3 ms to tear down a window), launch-bound (1 us
    kernels) and device-bound (20 us kernels, a queue of 1024), in default mode."""
    inj = os.path.join(os.path.dirname(CW), "inject")
    prod, model = os.path.join(inj, "producer"), os.path.join(inj, "libcupti_model.so")
    if not os.path.exists(prod):
        return
    synth = "synthetic CUPTI (5 us launches, +0.6 us called back, +3 us with activity on)"
    cases = [(synth, [prod, "loop", str(SECS)], "default (--overhead-budget 1)", []),
             (synth, [prod, "loop", str(SECS)], "--exact", ["--exact"])]
    if os.path.exists(model):
        cases += [(f"CUPTI model of the H100's, {what}", [prod, "model", str(SECS), ns, model],
                   "default (--overhead-budget 1)", [])
                  for what, ns in (("1 us kernels (launch-bound)", "1000"),
                                   ("20 us kernels (device-bound)", "20000"))]
    pat = r"launches_per_sec=([0-9.]+)"
    for what, wl, name, extra in cases:
        alone, under, ests = [], [], []
        for _ in range(RUNS):
            r = subprocess.run(wl, check=True, stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PRODUCER_ALONE="1"))
            alone.append(float(re.search(pat, r.stdout).group(1)))
            u, e = measure([G, "record", *extra, "-o", out, "--", *wl], pat)
            under.append(u)
            ests.append(on_span(e, SECS))
        a, u = statistics.median(alone), statistics.median(under)
        print(f"   runs alone (k/s): {' '.join(f'{x / 1e3:.1f}' for x in alone)}; "
              f"with gpubpf: {' '.join(f'{x / 1e3:.1f}' for x in under)}; estimated overhead (%): "
              f"{' '.join(fmt_est(x) for x in ests)}")
        print(f"1d. device time, {what}, {name}: "
              f"{a / 1e3:.1f}k launches/s alone, {u / 1e3:.1f}k with gpubpf: wall-time ratio {a / u:.3f}; "
              f"{est_text(ests)}{NOT_MEASURED if extra else ''}, measured {100 * (a / u - 1):.2g}% (target: ratio "
              f"<= 1.02 in default mode; median of {RUNS}){noise_text(alone, under)}", flush=True)


# --exact follows every launch with CUPTI on all the time: its cost per launch is measured
# only in windows, and the estimate leaves it out (gpubpf's summary says so)
NOT_MEASURED = " (CUPTI's cost per launch left out: measured only in windows)"


def gated_run(cmd, env, attach):
    """Start CMD held at its gate, optionally attach gpubpf -p, release, time to exit."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env, text=True)
    assert p.stdout.readline().strip() == "ready"
    rec = None
    if attach:
        ready = attach + ".ready"
        if os.path.exists(ready):
            os.unlink(ready)
        rec = subprocess.Popen([G, "record", "-p", str(p.pid), "-o", attach], stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, GPUBPF_READY_FILE=ready))
        # gpubpf writes its pid there once it records (probes attached, sampling on)
        for _ in range(800):
            if os.path.exists(ready) and open(ready).read().strip() == str(rec.pid):
                break
            time.sleep(0.0125)
        else:
            sys.exit("gpubpf did not start recording within 10 s")
        os.unlink(ready)
        time.sleep(0.3)
    t0 = time.monotonic()
    p.stdin.write("go\n")
    p.stdin.flush()
    p.wait()
    t = time.monotonic() - t0
    est = None
    if rec:
        err = rec.communicate()[1]
        est = parse_est(err)
    return t, est


def mixed(out):
    env = dict(os.environ, GPUBPF_WL_WAIT="1", GPUBPF_WL_REPEAT=os.environ.get("BENCH_MIXED_REPEAT", "300000"))
    wl = [os.path.join(CW, "runtime_wl_shared")]
    alone, under, ests = [], [], []
    for _ in range(RUNS):
        alone.append(gated_run(wl, env, None)[0])
        u, e = gated_run(wl, env, out)
        under.append(u)
        ests.append(on_span(e, u))
    a, u = statistics.median(alone), statistics.median(under)
    print(f"   runs alone: {' '.join(f'{x:.3f}' for x in alone)}; with gpubpf: {' '.join(f'{x:.3f}' for x in under)}")
    print(f"2. mixed (runtime_wl_shared, GPUBPF_WL_REPEAT={env['GPUBPF_WL_REPEAT']}, default mode, -p): "
          f"alone {a:.3f} s, with gpubpf {u:.3f} s, ratio {u / a:.3f}; {est_text(ests)}, measured "
          f"{100 * (u / a - 1):.2g}% (target <= 1.01; median of {RUNS}){noise_text(alone, under, False)}", flush=True)


def own_cost(out):
    cpu, rss, _ = bench_own.own_cost(G, [os.path.join(CW, "launch_loop"), "--seconds", str(OWN_SECS + 5)],
                                     OWN_SECS, out, settle=0.3)
    print(f"4. gpubpf itself over a {OWN_SECS} s recording of launch-heavy (default mode): CPU "
          f"{cpu:.2f}% of one core, peak RSS {rss:.1f} MiB (targets <= 2%, <= 64 MiB)", flush=True)


def main():
    if not os.path.exists(os.path.join(CW, "launch_loop")):
        print("cuda benchmarks: skipped (CUDA is not installed: no CUDA workloads)")
        return
    out = tempfile.mktemp(suffix=".pb.gz")
    which = sys.argv[1:] or ["launch", "python", "walk", "device", "replay", "mixed", "own"]
    if "launch" in which:
        launch_heavy(out)
    if "python" in which:
        python_step(out)
    if "walk" in which:
        walk_cost(out)
    if "device" in which:
        device_time(out)
    if "replay" in which:
        replay(out)
        replay(out, os.path.join(os.path.dirname(CW), "inject", "libcupti_model.so"))
    if "mixed" in which:
        mixed(out)
    if "own" in which:
        own_cost(out)
    if os.path.exists(out):
        os.unlink(out)


if __name__ == "__main__":
    main()
