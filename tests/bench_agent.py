#!/usr/bin/env python3
"""make bench-agent (or BENCH_AGENT=1 make bench): the agent's own cost over a long run.

`gpubpf agent` runs at its defaults (--interval 15, -F 99, 1% budget) against the test
Pyroscope receiver (tests/e2e/pyroscope_recv.py) on 127.0.0.1 for BENCH_AGENT_SECONDS
(default 600) while CUDA jobs start and stop in four slots: two Python jobs calling
libcudart through ctypes (Python frames and CUDA calls, ~1000 steps/s), one C job
launching at a steady 8000 launches/s, and one that launches as fast as it can for 20 s
out of every 40. Every 10 s the agent's CPU time (/proc/PID/stat) and RSS
(/proc/PID/status) are read. Reported: CPU in % of one core (whole run, and per 100 s
window), RSS (after warm-up, peak, at the end, and its slope), profiles, bytes per
profile and per host-hour, CPU per upload (the agent's --metrics). The limits of issue
14: at most 1% of one core and 128 MiB, flat over time.
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD = os.environ.get("BUILD", "build")
G = os.path.join(BUILD, "gpubpf")
WL = os.path.join(BUILD, "workloads")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
SECS = float(os.environ.get("BENCH_AGENT_SECONDS", "600"))
WARMUP = min(60.0, SECS / 5)
HZ = os.sysconf("SC_CLK_TCK")


def agent_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / HZ  # utime, stime


def agent_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metrics(port):
    out = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
    return out


class Slot:
    """Start a job, let it run, pause, start the next one."""

    def __init__(self, kind, rng):
        self.kind, self.rng, self.proc, self.next_at, self.started = kind, rng, None, 0.0, 0

    def command(self):
        d = self.rng.uniform(20, 90)
        if self.kind == "python":
            return ["python3", "tests/workloads/python/cuda_ctypes.py", f"{CUDA_HOME}/lib64/libcudart.so", f"{d:.0f}"]
        if self.kind == "steady":
            return [os.path.join(WL, "cuda", "steady_launch"), str(int(d * 2000)), "2000"]
        return [os.path.join(WL, "cuda", "launch_loop"), "--seconds", "20"]

    def poll(self, now):
        if self.proc and self.proc.poll() is not None:
            self.proc = None
            self.next_at = now + (20 if self.kind == "busy" else self.rng.uniform(3, 10))
        if not self.proc and now >= self.next_at:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.started += 1

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


def slope(points):
    """Least-squares slope of (t, y)."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / den if den else 0.0


def main():
    for p in (G, os.path.join(WL, "cuda", "steady_launch"), os.path.join(WL, "cuda", "launch_loop")):
        if not os.access(p, os.X_OK):
            sys.exit(f"bench_agent: {p} is missing: run make tools (CUDA workloads need nvcc)")
    tmp = tempfile.mkdtemp(prefix="gpubpf-bench-agent.")
    rport = os.path.join(tmp, "port")
    recv = subprocess.Popen(["python3", "tests/e2e/pyroscope_recv.py", "--port-file", rport, "--log",
                             os.path.join(tmp, "recv.log"), "--rejects", os.path.join(tmp, "rejects"),
                             "--store", os.path.join(tmp, "store")])
    for _ in range(100):
        if os.path.exists(rport):
            break
        time.sleep(0.05)
    port = open(rport).read().strip()
    mport = str(20000 + os.getpid() % 20000)
    log = open(os.path.join(tmp, "agent.log"), "w")
    cmd = [G, "agent", "--server", f"http://127.0.0.1:{port}", "--spool-dir", os.path.join(tmp, "spool"),
           "--metrics", f"127.0.0.1:{mport}"]
    agent = subprocess.Popen(cmd, stderr=log)
    rng = random.Random(14)
    slots = [Slot("python", rng), Slot("python", rng), Slot("steady", rng), Slot("busy", rng)]
    t0 = time.monotonic()
    samples = []  # (t, cpu s, rss MB)
    next_sample = t0
    try:
        while True:
            now = time.monotonic()
            if now - t0 >= SECS:
                break
            if agent.poll() is not None:
                sys.exit(f"bench_agent: the agent exited: {open(os.path.join(tmp, 'agent.log')).read()}")
            for s in slots:
                s.poll(now - t0)
            if now >= next_sample:
                samples.append((now - t0, agent_cpu(agent.pid), agent_rss_mb(agent.pid)))
                next_sample += 10
            time.sleep(0.2)
        m = metrics(mport)
        samples.append((time.monotonic() - t0, agent_cpu(agent.pid), agent_rss_mb(agent.pid)))
    finally:
        for s in slots:
            s.stop()
        agent.send_signal(signal.SIGTERM)
        agent.wait()
        recv.terminate()
        recv.wait()
    recs = [json.loads(l) for l in open(os.path.join(tmp, "recv.log"))]
    sizes = [os.path.getsize(r["file"]) for r in recs]
    elapsed = samples[-1][0]
    cpu_all = samples[-1][1] / elapsed * 100
    warm = [s for s in samples if s[0] >= WARMUP]
    cpu_warm = (warm[-1][1] - warm[0][1]) / (warm[-1][0] - warm[0][0]) * 100
    windows = []
    for a in range(int(WARMUP), int(elapsed) - 99, 100):
        w = [s for s in samples if a <= s[0] <= a + 100]
        if len(w) >= 2:
            windows.append((w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0]) * 100)
    rss_warm, rss_peak, rss_end = warm[0][2], max(s[2] for s in samples), samples[-1][2]
    rss_slope = slope([(t, r) for t, r, in [(s[0], s[2]) for s in warm]]) * 600
    uploads = m.get("gpubpf_agent_uploads_total", 0)
    cpu_upload = m.get("gpubpf_agent_upload_cpu_microseconds_total", 0) / uploads if uploads else 0
    jobs = sum(s.started for s in slots)
    procs = len({r["labels"]["pid"] for r in recs})
    rejects = os.path.getsize(os.path.join(tmp, "rejects")) if os.path.exists(os.path.join(tmp, "rejects")) else 0
    res = {
        "seconds": round(elapsed), "jobs_started": jobs, "processes_profiled": procs,
        "cpu_pct_of_core_whole_run": round(cpu_all, 3), "cpu_pct_after_warmup": round(cpu_warm, 3),
        "cpu_pct_per_100s": [round(w, 3) for w in windows],
        "rss_mb_after_warmup": round(rss_warm, 1), "rss_mb_peak": round(rss_peak, 1), "rss_mb_end": round(rss_end, 1),
        "rss_mb_slope_per_10min": round(rss_slope, 2),
        "profiles": len(recs), "bytes_per_profile_mean": round(sum(sizes) / len(sizes)) if sizes else 0,
        "bytes_per_profile_max": max(sizes) if sizes else 0,
        "bytes_per_hour_this_host": round(sum(sizes) * 3600 / elapsed),
        "uploads": int(uploads), "cpu_us_per_upload": round(cpu_upload),
        "dropped": int(m.get("gpubpf_agent_profiles_dropped_spool_full_total", 0)), "receiver_refusals": rejects,
    }
    print(json.dumps(res, indent=1))
    ok = cpu_all <= 1.0 and rss_peak <= 128 and abs(rss_slope) <= 8 and rejects == 0 and recs
    print(f"agent over {elapsed:.0f} s with {jobs} CUDA jobs started ({procs} processes profiled): CPU "
          f"{cpu_all:.3f}% of one core ({cpu_warm:.3f}% after {WARMUP:.0f} s; per 100 s "
          f"{min(windows, default=0):.3f}..{max(windows, default=0):.3f}%), RSS {rss_warm:.1f} MB after warm-up, "
          f"{rss_peak:.1f} MB peak, {rss_end:.1f} MB at the end ({rss_slope:+.2f} MB per 10 min); {len(recs)} "
          f"profiles, {res['bytes_per_profile_mean']} bytes each on average, {res['bytes_per_hour_this_host']} "
          f"bytes per host-hour, {res['cpu_us_per_upload']} us CPU per upload -> "
          f"{'PASS' if ok else 'FAIL'} (limits: 1% of a core, 128 MiB, flat)", flush=True)
    print(f"bench_agent: logs in {tmp}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
