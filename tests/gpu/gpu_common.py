"""What the GPU check's parts share (gpu_check.py runs them; its docstring says what they
check and which environment variables set them): the bundle's paths and settings, the
check's time and results, and helpers that run a command, pin it to the job's CPUs, and
read a profile."""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


GPUBPF = os.path.join(HERE, "gpubpf")


WL = os.path.join(HERE, "workloads")


OUT = os.environ.get("OUT") or os.path.join(HERE, "out")


PY = os.environ.get("PYTHON") or sys.executable


ITERS = int(os.environ.get("ITERS", "200"))


ITERS_EST = int(os.environ.get("ITERS_EST", "3000"))


# default mode's PyTorch loop: at 68a5e77 it ran ITERS (200), its launches over in a
# fraction of a second, and had no device time ("the targets launched too little while the
# library timed them"): device time in windows is for a job that runs seconds, as the
# PyTorch step's throughput runs (3 s) had it
ITERS_DEFAULT = int(os.environ.get("ITERS_DEFAULT", "2000"))


SELFTEST = bool(os.environ.get("SELFTEST"))


ROUNDS = int(os.environ.get("ROUNDS") or (1 if os.environ.get("QUICK") or SELFTEST else 3))


SURVIVE_RUNS = int(os.environ.get("SURVIVE_RUNS") or (1 if SELFTEST else 4))
BARE_EVERY = 8  # the estimates rows' self-paced runs measure what a call's work costs the job (GPUBPF_BARE_EVERY)
RESIDUE_RUNS = int(os.environ.get("RESIDUE_RUNS") or 4)  # pairs of cupti_cost --residue, ~2 s each


SECONDS = float(os.environ.get("GPU_CHECK_SECONDS") or 520)


T0 = time.monotonic()


# What each check takes at the least, one round, on an H100: estimates (the 2026-11-25 run
# took 370 s for the checks of then at 3 rounds; PyTorch starts in 3-5 s a run). What the
# checks still to come keep for themselves.
LEAST_S = {"cupti": 30, "survives": 25, "programs": 15, "pytorch": 60, "trace": 10, "estimates": 35,
           "remeasure": 15, "throughput": 90, "switches": 15, "parts": 35, "traps": 30}


reserve = 0.0  # the seconds the checks after the running one keep


rows = []


failed = 0


def left():
    """Seconds left of GPU_CHECK_SECONDS."""
    return SECONDS - (time.monotonic() - T0)


def another_round(done, started, keep=0.0):
    """Whether a check that has DONE rounds, the last begun at STARTED (monotonic), has time
    for one more and still leaves the checks after it theirs (and KEEP seconds more: its own
    cases still to come)."""
    if done == 0:
        return True
    if left() - reserve - keep >= time.monotonic() - started:
        return True
    log("  out of time: %d round(s) (%.0f s left, %.0f kept for what follows)" % (done, left(), reserve + keep))
    return False


def timed_rounds(n, modes, keep=0.0):
    """A check's rounds: (r, MODES in round r's order, alternating), as many of N as
    another_round allows."""
    started = 0.0
    for r in range(n):
        if not another_round(r, started, keep):
            return
        started = time.monotonic()
        yield r, modes if r % 2 == 0 else list(reversed(modes))


class Stopped(Exception):
    pass


def on_term(signum, frame):
    raise Stopped()


def log(msg):
    print(msg, flush=True)
    with open(os.path.join(OUT, "log.txt"), "a") as f:
        f.write(msg + "\n")


def result(item, what, value, target, verdict):
    """One row of the table, kept at once."""
    global failed
    rows.append((item, what, value, target, verdict))
    failed += verdict == "FAIL"
    with open(os.path.join(OUT, "results.tsv"), "a") as f:
        f.write("\t".join(str(x) for x in (item, what, value, target, verdict)) + "\n")
    log("%s %s: %s (%s) %s" % (verdict, what, value, target, ""))


def run(name, cmd, env=None, timeout=300):
    """Run CMD, its output into $OUT/NAME.log; returns (rc, output)."""
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.time()
    timeout = min(timeout, max(10.0, left()))  # nothing runs on far past the check's time
    with subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except (subprocess.TimeoutExpired, Stopped) as x:
            # SIGTERM first: gpubpf writes what it has and stops the command it started
            p.terminate()
            try:
                out, _ = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if isinstance(x, Stopped):
                raise
            rc = 124
    with open(os.path.join(OUT, name + ".log"), "w") as f:
        f.write("$ %s\n%s" % (" ".join(cmd), out))
    log("  ran %s in %.1f s (rc %d)" % (name, time.time() - t0, rc))
    return rc, out


def cpu_list(text):
    """The CPUs of a list such as "0-3,8,10-11"."""
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def job_cpus():
    """The CPUs the timed jobs run on in every mode, alone or not, or None (GPU_CHECK_PIN=0,
    or too few CPUs). On the H100 the PyTorch step alone ran 3333 then 2654 steps/s in two
    rounds, as much as every loss it was there to measure: a job the scheduler puts on
    another core, another node, or beside a busy SMT sibling from one run to the next.
    GPU_CHECK_PIN=LIST takes those CPUs; by default one CPU of each of up to 4 cores on the
    GPU's NUMA node (not CPU 0, where interrupts go), at most half of the CPUs allowed:
    gpubpf itself is not pinned and runs on the others, as beside a job that leaves it room."""
    want = os.environ.get("GPU_CHECK_PIN", "")
    allowed = os.sched_getaffinity(0)
    if want == "0":
        return None
    if want:
        cpus = cpu_list(want) & allowed
        return sorted(cpus) or None
    near = set(allowed)
    for f in sorted(glob.glob("/sys/bus/pci/drivers/nvidia/*/local_cpulist")):
        try:
            near = (cpu_list(open(f).read()) & allowed) or near
        except (OSError, ValueError):
            pass
        break
    cores, picked = set(), []
    for c in sorted(near - {0} if len(near) > 1 else near, reverse=True):
        try:
            core = open("/sys/devices/system/cpu/cpu%d/topology/core_id" % c).read().strip()
            pkg = open("/sys/devices/system/cpu/cpu%d/topology/physical_package_id" % c).read().strip()
        except OSError:
            core, pkg = str(c), "0"
        if (pkg, core) in cores:
            continue
        cores.add((pkg, core))
        picked.append(c)
    picked = picked[:min(4, len(allowed) // 2)]
    return sorted(picked) or None


JOB_CPUS = None


def pinned(cmd):
    """CMD run on JOB_CPUS (through taskset, or a Python shim that sets the affinity and
    execs it: gpubpf follows the exec as it follows its command's)."""
    if not JOB_CPUS:
        return cmd
    cpus = ",".join(str(c) for c in JOB_CPUS)
    if shutil.which("taskset"):
        return ["taskset", "-c", cpus] + cmd
    return [PY, "-c", "import os, sys; os.sched_setaffinity(0, {%s}); os.execvp(sys.argv[1], sys.argv[1:])" % cpus,
            ] + cmd


def spread(v):
    """The runs' spread about their median, for a row: "-a%..+b%"."""
    if len(v) < 2:
        return ""
    m = statistics.median(v)
    return " (runs %+.1f%%..%+.1f%%)" % (100 * (min(v) / m - 1), 100 * (max(v) / m - 1)) if m else ""


_speedscope = {}


def stacks_of(pb, sample_type):
    """[(frames root first, value)] of one sample type, through gpubpf's own reader (its
    speedscope output: every frame with its file, so Python frames are known by theirs).
    A frame is (name, file)."""
    if pb not in _speedscope:
        out = os.path.join(OUT, "%s.speedscope.json" % os.path.basename(pb))
        rc, _ = run("convert-" + os.path.basename(pb), [GPUBPF, "convert", pb, "-o", out, "--format", "speedscope"])
        try:
            _speedscope[pb] = json.load(open(out)) if rc == 0 else None
        except (OSError, ValueError):
            _speedscope[pb] = None
    doc = _speedscope[pb]
    if not doc:
        return []
    frames = [(f.get("name", ""), f.get("file", "")) for f in doc["shared"]["frames"]]
    for prof in doc["profiles"]:
        if prof.get("name") == sample_type:
            return [([frames[i] for i in st], w) for st, w in zip(prof["samples"], prof["weights"])]
    return []


def folded(pb, sample_type):
    """[(frame names root first, value)] of one sample type."""
    return [([f[0] for f in st], v) for st, v in stacks_of(pb, sample_type)]


def by_leaf(stacks):
    out = {}
    for frames, v in stacks:
        out[frames[-1]] = out.get(frames[-1], 0) + v
    return out


def unnamed(stacks):
    total = sum(v for _, v in stacks)
    bad = sum(v for f, v in stacks if f[-1].startswith("[cuda kernel 0x"))
    return total, bad


def is_python(frame):
    return frame[1].endswith(".py")


def python_split(stacks):
    """{leaf name: [value without a Python frame, value with one]}"""
    out = {}
    for frames, v in stacks:
        out.setdefault(frames[-1][0], [0, 0])[any(is_python(f) for f in frames)] += v
    return out


def python_shares(pb):
    """Item 3: the share of device time under a Python frame, and the share it should have
    if each kernel's time sits under the stacks that launched it: each kernel's device time
    split as its launches are (launches from autograd's thread have no Python frame, and
    its kernels take their own time). Also the launches' own share."""
    launches = python_split(stacks_of(pb, "cuda_launches"))
    ktime = python_split(stacks_of(pb, "gpu_kernel_time"))
    total = sum(a + b for a, b in ktime.values())
    got = sum(b for _, b in ktime.values())
    want = sum((a + b) * launches[k][1] / sum(launches[k]) for k, (a, b) in ktime.items()
               if k in launches and sum(launches[k]))
    lt = sum(a + b for a, b in launches.values())
    return pct(got, total), pct(want, total), pct(sum(b for _, b in launches.values()), lt)


def norm(name):
    """Kernel names as both demanglers agree on them."""
    name = re.sub(r"^void ", "", name)
    return re.sub(r"\s+", "", name)


def summary(out, prefix):
    """A workload's "prefix: k=v ..." line as a dict."""
    for line in out.splitlines():
        if line.startswith(prefix + ":"):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return {}


def pct(a, b):
    return 100.0 * a / b if b else 0.0


def rate(out, key):
    m = re.search(key + r"=([\d.]+)", out)
    return float(m.group(1)) if m else 0.0


def own_cpu_of(text):
    """gpubpf's own CPU from its 'cost: gpubpf's own CPU' comment: (the recording's, the
    set-up's, what followed it: seconds, None where not said)."""
    m = re.search(r"own CPU: ([0-9.e+-]+) s over", text)
    if not m:
        return None
    s = re.search(r"; ([0-9.e+-]+) s more setting up before it", text)
    a = re.search(r"; ([0-9.e+-]+) s more after it", text)
    return (float(m.group(1)), float(s.group(1)) if s else None, float(a.group(1)) if a else None)


def died(rc, out, key):
    """Why a job run under gpubpf did not end well (a signal, a failure, no result line), or
    None."""
    m = re.search(r"was killed by signal (\d+)", out)
    if m:
        return "signal " + m.group(1)
    if rc != 0:
        return "exit %d" % rc
    if not re.search(key + r"=[0-9.]+", out):
        return "no result line"
    return None
