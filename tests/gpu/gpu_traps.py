"""The GPU check's row on what a probe hit costs the job (issue 13). Run by gpu_check.py.

gpubpf books a hit at its program's time, timed in the job, and its trap's, calibrated on
a loop of its own at start-up; what the job's code pays after a trap (its caches and
predictors refilled) no clock of gpubpf's sees, and on the H100 the `--exact` PyTorch step
lost far more than it booked. workloads/ret_delay times a return hit by the job's own
pace: a uprobe session (Linux 6.13+) on the job's cudaLaunchKernel asks for a return hit
on one call in 8 and stalls another 500 ns in the kernel, and the gaps to the thread's
next call after each, against the rest, give the return hit's whole cost in ns of a
stall's, whatever paces the thread. Every other call walks the user stack, as gpubpf's
probes do, but for one in 8 at random, whose next gap is shorter by the walk's whole cost
(its run time, and what the job's code paid after it for what it touched). The row sets
the return hit beside the return trap gpubpf books (its `cuda cost:` comment in
check_parts' default profile, where that ran), and the walk's whole cost beside its run
time. A last row says what any kernel entry (a system call, no probe) costs a Python
step's own code after it here (kentry_step.py): on the development VM most of what a hit
costs the Python step's code."""
import os
import re
import subprocess
import time

import gpu_common as g


def mapped(pid, name):
    """The file of PID's first mapping whose base name holds NAME, or None."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                p = line.split()
                if len(p) >= 6 and name in os.path.basename(p[5]):
                    return p[5]
    except OSError:
        pass
    return None


def booked():
    """gpubpf's calibrated traps (entry, return), in us, from check_parts' default profile."""
    pb = os.path.join(g.OUT, "parts-default.pb.gz")
    if not os.path.exists(pb):
        return None
    rc, rep = g.run("traps-booked-report", [g.GPUBPF, "report", pb])
    m = re.search(r"traps of ([0-9.]+) us at entry and ([0-9.]+) us at return", rep)
    return (float(m.group(1)), float(m.group(2))) if m else None


def measure(name, cmd, seconds):
    """ret_delay on CMD's cudaLaunchKernel (its libcudart's; libcuda's cuLaunchKernel where
    no libcudart is mapped: the runtime linked in statically) for SECONDS, once that library
    is in and the job has launched a while: (fields, why-not, skipped)."""
    exe = os.path.join(g.WL, "ret_delay")
    tag = re.sub(r"\W+", "_", name)
    with open(os.path.join(g.OUT, "traps-%s-job.log" % tag), "w") as log:
        job = subprocess.Popen(g.pinned(cmd), stdout=log, stderr=subprocess.STDOUT)
        try:
            lib, t0 = None, time.monotonic()
            while lib is None and job.poll() is None and time.monotonic() - t0 < 60:
                time.sleep(0.2)
                lib = mapped(job.pid, "libcudart")
                if lib is None and time.monotonic() - t0 > 15:
                    lib = mapped(job.pid, "libcuda.so")
            if lib is None:
                return None, "neither libcudart nor libcuda mapped in the job in 60 s", False
            sym = "cudaLaunchKernel" if "libcudart" in os.path.basename(lib) else "cuLaunchKernel"
            time.sleep(2)  # past its warm-up
            rc, out = g.run("traps-%s" % tag, [exe, "--walk", "--seconds", str(seconds), str(job.pid), lib, sym])
        finally:
            job.kill()
            job.wait()
    if rc == 3:
        return None, out.strip().splitlines()[-1] if out.strip() else "no uprobe session here", True
    f = dict(re.findall(r"(\w+)=([-0-9.e+]+)", out))
    if rc != 0 or "ret_hit_ns" not in f:
        return None, "ret_delay failed (exit %d, see traps-%s.log)" % (rc, tag), False
    if float(f["after_ret"]) < 1000 or float(f["after_stall"]) < 1000:
        return None, "too few calls met %s in %s (%s gaps after a return hit): the job launches " \
            "elsewhere" % (sym, os.path.basename(lib), f["after_ret"]), True
    return f, None, False


def check():
    exe = os.path.join(g.WL, "ret_delay")
    if not os.path.exists(exe):
        g.result("13", "a return hit's whole cost to the job", "ret_delay missing from the bundle", "present", "SKIP")
        kernel_entry()
        return
    ll = os.path.join(g.WL, "launch_loop")
    cases = [("launch_loop --spin-us 4", [ll, "--seconds", "8", "--spin-us", "4"])]
    if not g.SELFTEST:
        cases.append(("launch-bound PyTorch step", [g.PY, os.path.join(g.HERE, "step_bench.py"), "8"]))
    traps = booked()
    for name, cmd in cases:
        f, why, skipped = measure(name, cmd, 3)
        what = "a return hit's whole cost to the job (trap, program, what its code paid): " + name
        if f is None:
            g.result("13", what, why, "measured", "SKIP" if skipped else "FAIL")
            continue
        hit, prog, resp = float(f["ret_hit_ns"]) / 1e3, float(f["ret_prog_ns"]) / 1e3, float(f["response"])
        value = "%.2f us (%.2f-%.2f), its program %.2f us; a stall pushed %.2f of itself out (%s gaps after one)" % (
            hit, float(f["ret_hit_lo_ns"]) / 1e3, float(f["ret_hit_hi_ns"]) / 1e3, prog, resp, f["after_ret"])
        if traps:
            value += "; gpubpf books its trap at %.2f us (calibrated): x%.2f" % (
                traps[1], (hit - prog) / traps[1] if traps[1] > 0 else 0)
        if "walk_whole_ns" in f:
            value += "; a user stack walk %.2f us whole (%.2f-%.2f) against %.2f us run" % (
                float(f["walk_whole_ns"]) / 1e3, float(f["walk_whole_lo_ns"]) / 1e3,
                float(f["walk_whole_hi_ns"]) / 1e3, float(f["walk_prog_ns"]) / 1e3)
        # a return hit costs at least its program; a stall's response is 1 on a loop that
        # sets its own pace and 0-1 where a device does: beyond that the gaps are noise
        ok = hit > prog > 0 and -0.1 <= resp <= 1.2
        g.result("13", what, value, "measured (more than its program)", "INFO" if ok else "FAIL")
    kernel_entry()


def kernel_entry():
    """What a system call costs a Python step's own code after it, no probe anywhere."""
    what = "a system call's cost to a Python step's own code after it"
    rc, out = g.run("traps-kentry", g.pinned([g.PY, os.path.join(g.HERE, "kentry_step.py"), "6", "3"]), timeout=60)
    f = dict(re.findall(r"(\w+)=([-0-9.e+]+)", out))
    if rc != 0 or "extra_user_ns" not in f:
        g.result("13", what, "kentry_step.py failed (exit %d, see traps-kentry.log)" % rc, "measured", "FAIL")
        return
    g.result("13", what, "+%s ns of user time a call (%s to %s) after a getppid of %s ns in the kernel; %s ns a "
             "call with none" % (f["extra_user_ns"], f["extra_user_lo_ns"], f["extra_user_hi_ns"], f["sys_ns_syscall"],
                                 f["user_ns_plain"]), "measured", "INFO")
