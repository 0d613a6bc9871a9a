#!/usr/bin/env python3
"""Synthetic CUDA call timelines for tests/workloads/cuda/replay: the launch patterns a
sampled profiler gets wrong when it assumes a steady rate from one thread.

usage: patterns.py NAME OUT.calls [--seconds S]    (NAME: see PATTERNS, or "list")

Every call is spun for a real call's duration after it returns (launches ~10 us, sets and
copies 12-25 us, as on the H100 timeline). Each (thread, call) pair is its own call site.
Times are in nanoseconds from the start.
"""
import random
import sys

US = 1000
MS = 1000 * US
S = 1000 * MS


class Timeline:
    def __init__(self, name):
        self.name = name
        self.threads = []
        self.calls = []
        self.sites = {}

    def thread(self, name):
        self.threads.append(name)
        return len(self.threads) - 1

    def call(self, th, api, t, dur=10 * US, nbytes=0, tag=""):
        key = (th, api, tag)
        if key not in self.sites:
            self.sites[key] = len(self.sites)
        self.calls.append((th, self.sites[key], api, int(t), int(dur), int(nbytes)))

    def write(self, path):
        assert len(self.sites) <= 32, "the replay has 32 call sites"
        self.calls.sort(key=lambda c: (c[3], c[0]))
        with open(path, "w") as f:
            f.write(f"# gpubpf synthetic call timeline: {self.name} (patterns.py)\n")
            f.write(f"threads {len(self.threads)}\n")
            for i, n in enumerate(self.threads):
                f.write(f"thread {i} {n}\n")
            for th, site, api, t, dur, nb in self.calls:
                f.write(f"call {th} {site} {api} {t} {dur} {nb}\n")
        return len(self.calls)


def step(tl, th, t, n_launch, gap, rng, tag=""):
    """One burst of a training step on thread TH from time T: launches (some through
    cudaLaunchKernelExC), a memset now and then; returns the time after it."""
    for i in range(n_launch):
        if i % 7 == 3:
            tl.call(th, "memset_async", t, 12 * US, rng.choice((16, 256, 1728)), tag)
        elif i % 5 == 1:
            tl.call(th, "launch_ex", t, 11 * US, 0, tag)
        else:
            tl.call(th, "launch", t, rng.uniform(8, 16) * US, 0, tag)
        t += gap * rng.uniform(0.5, 1.5)
    return t


def steady(secs, rng):
    """One thread, 4000 launches/s from two call sites (3:1), the case the old estimator
    was right about."""
    tl = Timeline("steady")
    th = tl.thread("main")
    t = 0
    while t < secs * S:
        for _ in range(3):
            tl.call(th, "launch", t, 10 * US, 0, "a")
        tl.call(th, "launch", t + 60 * US, 10 * US, 0, "b")
        t += 1 * MS
    return tl


def bursts(secs, rng):
    """Two threads taking turns, as a forward pass and autograd's backward thread do: a
    burst of ~20 calls 40-60 us apart on one, then the other, then a gap of ~1 ms."""
    tl = Timeline("bursts")
    a, b = tl.thread("main"), tl.thread("autograd")
    t = 0
    while t < secs * S:
        t = step(tl, a, t, 20, 50 * US, rng)
        t = step(tl, b, t + 100 * US, 18, 50 * US, rng)
        t += rng.uniform(0.6, 1.6) * MS
    return tl


def idle_start(secs, rng):
    """A few calls at start-up, seconds without any CUDA call (imports, data loading),
    then training bursts."""
    tl = Timeline("idle_start")
    a, b = tl.thread("main"), tl.thread("autograd")
    for i in range(5):
        tl.call(a, "malloc", i * 200 * US, 150 * US, 1 << 20)
        tl.call(a, "memcpy_htod_async", i * 200 * US + 50 * US, 25 * US, 8 << 20)
    t = 3 * S
    while t < (3 + secs) * S:
        t = step(tl, a, t, 24, 45 * US, rng)
        t = step(tl, b, t + 80 * US, 20, 45 * US, rng)
        t += rng.uniform(0.5, 1.0) * MS
    return tl


def stalls(secs, rng):
    """Bursts for ~0.7 s, then a stall of ~0.3 s (a sync on a long kernel, a data-loader
    wait), over and over."""
    tl = Timeline("stalls")
    a = tl.thread("main")
    t = 0
    while t < secs * S:
        end = t + rng.uniform(0.5, 0.9) * S
        while t < end:
            t = step(tl, a, t, 30, 40 * US, rng)
            t += 300 * US
        tl.call(a, "stream_sync", t, 20 * US)
        t += rng.uniform(0.2, 0.4) * S
    return tl


def rate_steps(secs, rng):
    """The rate changes in steps: 2k, 20k, 5k, 12k calls/s, each for a quarter of the run."""
    tl = Timeline("rate_steps")
    a = tl.thread("main")
    t = 0
    for i, rate in enumerate((2000, 20000, 5000, 12000)):
        end = (i + 1) * secs * S / 4
        while t < end:
            tl.call(a, "launch", t, 10 * US, 0, "s%d" % i)
            t += S / rate
    return tl


def late_thread(secs, rng):
    """A main thread from the start; a second thread with call sites of its own starts at
    40% of the run and calls at three times the main thread's rate."""
    tl = Timeline("late_thread")
    a, b = tl.thread("main"), tl.thread("worker")
    t = 0
    while t < secs * S:
        tl.call(a, "launch", t, 10 * US)
        tl.call(a, "memset_async", t + 150 * US, 12 * US, 256)
        t += 500 * US
    t = 0.4 * secs * S
    while t < secs * S:
        tl.call(b, "launch", t, 10 * US)
        tl.call(b, "launch_ex", t + 60 * US, 10 * US)
        tl.call(b, "memcpy_htod_async", t + 120 * US, 20 * US, 1728)
        t += 250 * US
    return tl


def periodic(secs, rng):
    """A burst of 400 calls every 200 ms exactly, on the window period the e2e tests use:
    windows that always open at the same phase would see all or nothing of every burst."""
    tl = Timeline("periodic")
    a = tl.thread("main")
    t = 0
    while t < secs * S:
        u = t
        for i in range(400):
            tl.call(a, "launch" if i % 4 else "launch_ex", u, 10 * US)
            u += 30 * US
        t += 200 * MS
    return tl


PATTERNS = {f.__name__: f for f in (steady, bursts, idle_start, stalls, rate_steps, late_thread, periodic)}


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "list":
        print(" ".join(PATTERNS))
        return
    if len(sys.argv) < 3 or sys.argv[1] not in PATTERNS:
        sys.exit(f"usage: patterns.py {{{'|'.join(PATTERNS)}}} OUT.calls [--seconds S]")
    secs = 8.0
    if "--seconds" in sys.argv:
        secs = float(sys.argv[sys.argv.index("--seconds") + 1])
    tl = PATTERNS[sys.argv[1]](secs, random.Random(13))
    n = tl.write(sys.argv[2])
    print(f"patterns: {sys.argv[1]}: {n} calls on {len(tl.threads)} threads, {len(tl.sites)} call sites")


main()
