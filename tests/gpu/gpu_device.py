"""The GPU check's device-time rows (issue 12's items 1-5, and 14): device time on a PyTorch
job against torch.profiler, kernels left unnamed, device time under Python frames, a
program of under a second, --trace, and the job living through device time. Run by
gpu_check.py."""
import json
import os
import re
import statistics

from gpu_common import *  # noqa: F401,F403 (the check's settings and helpers)


def check_pytorch():
    """Items 1-3 and the comparison with torch.profiler."""
    train = os.path.join(HERE, "train_loop.py")
    exact = os.path.join(OUT, "train-exact.pb.gz")
    dflt = os.path.join(OUT, "train-default.pb.gz")
    rc, out = run("train-exact", [GPUBPF, "record", "--exact", "-o", exact, "--", PY, train, "--iters", str(ITERS)],
                  env={"GPUBPF_INJECT_MAX_RATE": "0"})
    exact_out, prof_out = out, None
    if rc or not os.path.exists(exact):
        result("1-3", "PyTorch loop under gpubpf --exact", "rc %d: %s" % (rc, out.strip().splitlines()[-1:]),
               "records", "FAIL")
        return
    launches = folded(exact, "cuda_launches")
    ktime = folded(exact, "gpu_kernel_time")
    total, bad = unnamed(launches)
    result("2", "unnamed launches, PyTorch loop, --exact", "%d of %d (%.3f%%)" % (bad, total, pct(bad, total)),
           "<= 0.1%", "PASS" if total and pct(bad, total) <= 0.1 else "FAIL")
    ktotal = sum(v for _, v in ktime)
    m = re.search(r"device time: (\d+) kernels ([\d.]+) ms", out)
    result("1", "device time, PyTorch loop (--exact, every launch followed)",
           "%s kernels, %.1f ms" % (m.group(1) if m else "?", ktotal / 1e6) if ktotal else out.strip().splitlines()[-1],
           "> 0", "PASS" if ktotal > 0 else "FAIL")
    dev_py, want_py, launch_py = python_shares(exact)
    result("3", "device time under a Python frame (launches: %.1f%%)" % launch_py,
           "%.1f%% (%.1f%% by each kernel's launches)" % (dev_py, want_py),
           "within 5 points of its kernels' launches' split, > 0",
           "PASS" if dev_py > 0 and abs(dev_py - want_py) <= 5 else "FAIL")

    # torch.profiler, a separate run (never two CUPTI clients at once)
    tjson = os.path.join(OUT, "torch-profiler.json")
    rc, prof_out = run("torch-profiler", [PY, train, "--iters", str(ITERS), "--torch-profile", tjson])
    if rc == 0 and os.path.exists(tjson):
        tk = json.load(open(tjson))["kernels"]
        torch_by = {norm(k): v for k, v in tk.items()}
        ours_n = {norm(k): v for k, v in by_leaf(launches).items()}
        ours_t = {norm(k): v for k, v in by_leaf(ktime).items()}
        lines, errs = [], []
        for k, (cnt, ns) in sorted(torch_by.items(), key=lambda kv: -kv[1][1])[:15]:
            n, t = ours_n.get(k, 0), ours_t.get(k, 0)
            ours_mean = t / n if n else 0
            torch_mean = ns / cnt if cnt else 0
            err = pct(abs(ours_mean - torch_mean), torch_mean) if torch_mean and ours_mean else None
            if err is not None:
                errs.append(err)
            lines.append("  %-60.60s launches %6d / %6d  mean %8.2f / %8.2f us  %s" %
                         (k, n, cnt, ours_mean / 1e3, torch_mean / 1e3, "%.1f%%" % err if err is not None else "-"))
        with open(os.path.join(OUT, "kernels-vs-torch.txt"), "w") as f:
            f.write("kernel (gpubpf / torch.profiler)\n" + "\n".join(lines) + "\n")
        for line in lines:
            log(line)
        med = statistics.median(errs) if errs else None
        result("1", "per-kernel mean duration vs torch.profiler (top 15 by time, %d matched)" % len(errs),
               "median error %.1f%%, max %.1f%%" % (med, max(errs)) if errs else "no kernel matched",
               "median <= 10%", "PASS" if med is not None and med <= 10 else "FAIL")
        ours_total = sum(v for _, v in launches)
        torch_total = sum(v[0] for v in tk.values())
        result("1", "kernel launches vs torch.profiler's kernels", "%d / %d (%.1f%%)" %
               (ours_total, torch_total, pct(ours_total, torch_total)), "within 5%",
               "PASS" if torch_total and abs(pct(ours_total, torch_total) - 100) <= 5 else "FAIL")
    else:
        result("1", "torch.profiler run", "failed (see torch-profiler.log)", "runs", "FAIL")

    # default mode, as a user would record: device time sampled within the budget
    # with the library's trace in its log: why a measurement kept no call, where the windows were
    rc, out = run("train-default", [GPUBPF, "record", "-o", dflt, "--", PY, train, "--iters", str(ITERS_DEFAULT)],
                  env={"GPUBPF_INJECT_DEBUG": "2"})
    if rc or not os.path.exists(dflt):
        result("1-2", "PyTorch loop under gpubpf (default mode)", "rc %d" % rc, "records", "FAIL")
        return
    total, bad = unnamed(folded(dflt, "cuda_launches"))
    result("2", "unnamed launches, PyTorch loop, default mode", "%d of %d (%.3f%%)" % (bad, total, pct(bad, total)),
           "<= 0.1%", "PASS" if total and pct(bad, total) <= 0.1 else "FAIL")
    kt = sum(v for _, v in folded(dflt, "gpu_kernel_time"))
    why = re.search(r"device time unavailable \((.*)\)", out)
    result("1", "device time, PyTorch loop, default mode (%d iterations)" % ITERS_DEFAULT, "%.1f ms" % (kt / 1e6) if kt else
           (why.group(1) if why else "none"), "> 0", "PASS" if kt > 0 else "FAIL")
    device_windows(dflt)
    startup_row({"alone (torch.profiler's run)": prof_out, "--exact (the first run)": exact_out, "default": out})


def startup(out):
    """train_loop's start-up line in OUT: seconds importing torch plus loading the
    driver, or None."""
    m = re.search(r"train_loop: start-up: import torch ([0-9.]+) s, the driver ([0-9.]+) s", out or "")
    return float(m.group(1)) + float(m.group(2)) if m else None


def startup_row(outs):
    """What a started command's holds cost the PyTorch loop's start-up, measured: its
    import and driver load alone and under `gpubpf record --`, run by run (one each: the
    first run reads its files cold), beside the holds gpubpf said (the row above)."""
    got = ["%s %.2f s" % (k, startup(v)) for k, v in outs.items() if startup(v) is not None]
    if got:
        result("13", "start-up of the PyTorch loop (import torch, the driver's load), alone and under "
               "record --", ", ".join(got), "measured", "INFO")
    return got


def device_windows(pb, what="", required=True):
    """Device time in windows (issue 13): what the profile's comments say (gpubpf report
    prints them), as result rows: the cost per launch measured in the job, the duty, the
    estimate with its interval. WHAT names the run where it is not the PyTorch loop's; a
    run not REQUIRED to have device time (no driver in the self-test) adds no row without."""
    rc, out = run("report-" + os.path.basename(pb), [GPUBPF, "report", pb])
    # the probes' cost part by part (issue 13): with no window open (attaching waits for a
    # grace period; the kernel is warmed ahead), and CPU sampling with its stack walk
    cc = re.search(r"cuda cost: estimated overhead ([0-9.e+-]+)%.*probe hits ([0-9.e+-]+)% .*; ([0-9.e+-]+)% of it "
                   r"with the probes in and no window open.*CPU sampling ([0-9.e+-]+)% \(([0-9.]+) us a sample[,)]", out)
    if cc:
        result("13", what + "CUDA probes' cost: overall, hits, of which no window open, CPU sampling (a sample)",
               "%s%%, %s%%, %s%%, %s%% (%s us)" % cc.groups(), "measured", "INFO")
    # a window thread that woke late (a loaded machine): windows late or never opened, and
    # the longest each group's probes were in with no window open (a window never opened
    # once left them in up to a period: 67% of a launch loop's time in a CI run)
    lw = re.search(r"windows opened late: ([0-9]+), by ([0-9.e+-]+) ms in all, and never opened: ([0-9]+) .*?"
                   r"no window open: ([a-z]+ [0-9.e+-]+ ms(?:, [a-z]+ [0-9.e+-]+ ms)*)", out)
    if lw:
        result("13", what + "CUDA windows opened late (by, in all), never opened; the longest each group's probes "
               "were in with no window open", "%s (%s ms), %s; %s" % lw.groups(), "measured", "INFO")
    # gpubpf's own CPU, where no CPU it may use was idle (a job that fills the machine)
    own = re.search(r"cost: gpubpf's own CPU: ([0-9.e+-]+) s over ([0-9.e+-]+) s .*?; ([0-9.e+-]+) s of it(?: and [a-z -]+?)? ran where "
                    r"none .*? is ([0-9.e+-]+)% of its time \(up to ([0-9.e+-]+)%", out)
    if own:
        result("13", what + "gpubpf's own CPU: seconds over the recording's, of them with no CPU idle, a "
               "thread's fair share (up to)", "%s s / %s s, %s s, %s%% (%s%%)" % own.groups(), "measured", "INFO")
    # a started command's holds at its exec and loads (start-up time: a PyTorch import
    # dlopens dozens of large libraries into a process of thousands of mappings)
    holds = re.search(r"cost: holds: .*?held (\d+) times .*?: ([0-9.]+) ms in all, the longest ([0-9.]+) ms .*?; "
                      r"(\d+) more calls", out)
    if holds:
        result("13", what + "start-up holds of the started command: how many, in all, the longest; the dynamic "
               "linker's calls let go with no hold", "%s, %s ms, %s ms; %s" % holds.groups(), "measured", "INFO")
    # the sampler's events in the targets' context switches (each thread on its own clock)
    sw = re.search(r"cost: context switches: .*? pays ([0-9.]+) us a switch .*? switched ([0-9.e+-]+) times a second "
                   r".*?, ([0-9.e+-]+)% of its time, .*? up to ([0-9.e+-]+)%", out)
    if sw:
        result("13", what + "context switches: a switch's added cost, the most switched thread's rate, its share "
               "(all threads')", "%s us, %s/s, %s%% (%s%%)" % sw.groups(), "measured", "INFO")
    cost = re.search(r"gpu cost: device time in windows of ([0-9.e+-]+)% .*a launch costs ([0-9.]+) us more with it "
                     r"\(CUPTI's activity and the launch probe ([0-9.]+) us.*callbacks ([0-9.]+) us.*against "
                     r"([0-9.]+) us without; estimated overhead ([0-9.e+-]+)%", out)
    # "(+-X%)", or "(+-X%: LO-HI at either end of CUPTI's cost's range ..., and the windows'
    # sampling +-Y% around them)" where a correction has a range
    est = re.search(r"gpu estimate: (kernels [0-9,]+, 95% CI [0-9,]+-[0-9,]+ \(\+-[0-9.e+]+%)[^)]*\); "
                    r"kernel time ([0-9.e+]+) ms", out)
    if not cost and not required and "gpu cost:" not in out:
        return
    if not cost:
        why = re.search(r"gpu cost: ([^\n]*)", out)
        result("13", what + "device time in windows: the cost per launch measured in the job",
               why.group(1)[:120] if why else "no 'gpu cost:' comment", "measured", "FAIL")
        return
    sw = re.search(r"gpu cost: .*CUPTI set up and torn down, ([0-9.e+-]+) ms a window", out)
    pr = re.search(r"gpu cost: .*launch probes alike: all out in (\d+), all in in (\d+), mixed in (\d+)", out)
    ev = re.search(r"gpu cost: .*one window in (\d+) periods", out)
    fx = re.search(r"gpu cost: .*CUPTI's set-up at attach and the measurement's switches [0-9.e+-]+% \(([0-9.e+-]+) ms", out)
    rp = re.search(r"gpu cost: .*what was spent once, ([0-9.e+-]+) ms, is repaid from the budget.* and ([0-9.e+-]+) ms "
                   r"of the two were repaid by the end", out)
    # CUPTI's dispatch, timed on the library's cuCtxGetCurrent (a pair: enter and exit) and
    # scaled by the pairs a launch met; against check_cupti's "callbacks - none" (its
    # subscription with it)
    dp = re.search(r"gpu cost: .*CUPTI's dispatch to them with the subscription ([0-9.]+) us \((?:its dispatch of a "
                   r"driver call's callbacks timed in the job, ([0-9.]+) us a pair, ([0-9.e+]+) pairs a launch)?", out)
    result("13", what + "device time in windows: cost per launch measured in the job (CUPTI activity + probe, callbacks, "
           "CUPTI's dispatch and subscription)",
           "+%s us (%s + %s + %s: a driver call's pair %s us x %s) on a %s us launch (timed with the launch probes "
           "%s); duty %s%%; set-up+teardown %s ms a window, 1 in %s periods; attach and measurement %s ms once; "
           "spent once %s ms, %s repaid from the budget; estimated overhead %s%%"
           % (cost.group(2), cost.group(3), cost.group(4), dp.group(1) if dp else "?",
              dp.group(2) if dp and dp.group(2) else "not timed", dp.group(3) if dp and dp.group(3) else "-",
              cost.group(5),
              "?" if not pr else "out" if pr.group(1) != "0" else "in" if pr.group(2) != "0" else "mixed",
              cost.group(1), sw.group(1) if sw else "?", ev.group(1) if ev else "1", fx.group(1) if fx else "?",
              rp.group(1) if rp else "?", rp.group(2) if rp else "?", cost.group(6)),
           "measured", "INFO")
    if est:
        result("13", what + "device time in windows: estimate", "%s), kernel time %s ms" % (est.group(1), est.group(2)),
               "an interval", "INFO")
    # who set the launches' pace, from the device's records (a launch's first kernel that
    # started within 1 us of the last one's end on its stream waited in the queue): a
    # launch-bound loop's should have started as launched, a device-bound one's waited;
    # the 1 us is a guess for an H100 (DEV_QUEUED_GAP_NS), which this row tests
    pace = re.search(r"gpu correction: .*? (\d+) started as launched and (\d+) waited \(the device's records, in "
                     r"(\d+) of (\d+) threads' runs", out)
    if pace:
        result("13", what + "device time in windows: launches' first kernels that started as launched, that waited "
               "for the one before them (the device's records, in runs of threads in windows)",
               "%s, %s (in %s of %s runs)" % pace.groups(), "launch-bound: started; device-bound: waited", "INFO")


def check_programs():
    """Items 2 and 4 on the C/C++ workloads (real driver, no PyTorch)."""
    for wl, pfx in (("runtime_wl_shared", "runtime_wl"), ("runtime_wl_static", "runtime_wl"),
                    ("driver_wl", "driver_wl")):
        exe = os.path.join(WL, wl)
        if not os.path.exists(exe):
            result("2,4", wl, "missing from the bundle", "present", "SKIP")
            continue
        pb = os.path.join(OUT, wl + ".pb.gz")
        # --exact: the counts are the workload's own (default mode's are estimates:
        # issue 13's business, not the names')
        rc, out = run(wl, [GPUBPF, "record", "--exact", "-o", pb, "--", exe])
        sm = summary(out, pfx)
        # every launch API: runtime_wl's launch= is all of them, driver_wl's only cuLaunchKernel's
        want = sum(int(sm.get(k, 0)) for k in ("launch", "launch_ex", "launch_coop", "graph_launch"))
        stacks = folded(pb, "cuda_launches") if rc == 0 else []
        total, bad = unnamed(stacks)
        result("2", "unnamed launches, " + wl, "%d of %d" % (bad, total), "0, %d launches" % want,
               "PASS" if rc == 0 and total == want and bad == 0 else "FAIL")
        m = re.search(r"device time: (\d+) kernels", out)
        got = int(m.group(1)) if m else 0
        if wl != "driver_wl":
            result("4", "device time of a short program, " + wl, "%d of %d kernels" % (got, want), "all",
                   "PASS" if want and got == want else "FAIL")


def check_trace():
    """Item 5."""
    tr = os.path.join(OUT, "train.trace.json")
    rc, _ = run("trace", [GPUBPF, "record", "--trace", "-o", tr, "--", PY, os.path.join(HERE, "train_loop.py"),
                          "--iters", "50"])
    if rc or not os.path.exists(tr):
        result("5", "--trace of the PyTorch loop", "rc %d" % rc, "records", "FAIL")
        return
    ev = json.load(open(tr))["traceEvents"]
    joined = sum(1 for e in ev if e.get("cat") == "cuda_api" and "correlation" in e.get("args", {}))
    own = sum(1 for e in ev if e.get("cat") == "cuda_launch")
    result("5", "--trace: launches joined to their API call", "%d of %d (%d own slices)" % (joined, joined + own, own),
           ">= 99.9%", "PASS" if joined and pct(own, joined + own) <= 0.1 else "FAIL")


def check_survives():
    """Item 14: the job lives through device time's windows, finalizes and set-ups."""
    ll = os.path.join(WL, "launch_loop")
    cases = [("launch_loop --spin-us 4", [ll, "--seconds", "2", "--spin-us", "4"], "launches_per_sec"),
             ("launch-bound PyTorch step", [PY, os.path.join(HERE, "step_bench.py"), "2"], "steps_per_sec")]
    if SELFTEST:
        cases = cases[:1]
    for name, cmd, key in cases:
        if not os.path.exists(cmd[0]):
            result("14", name, "missing from the bundle", "present", "SKIP")
            continue
        why = []
        for r in range(SURVIVE_RUNS):
            c = [GPUBPF, "record", "-o", os.path.join(OUT, "survive.pb.gz"), "--"] + cmd
            rc, out = run("survive-%s-%d" % (re.sub(r"\W+", "_", name), r), c)
            w = died(rc, out, key)
            if w:
                why.append(w)
        result("14", "the job survives device time: " + name,
               "died in %d of %d runs%s" % (len(why), SURVIVE_RUNS, (": " + ", ".join(why)) if why else ""),
               "none", "FAIL" if why else "PASS")
