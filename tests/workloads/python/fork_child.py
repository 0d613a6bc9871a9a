"""Launches through the injection library's synthetic CUPTI (libproducer.so, ctypes), then
fork(): the child launches too and ends with a normal exit (the library's atexit handler
runs in it), the parent launches on after it. Under a session the parent's probe sites
have fired, and Linux 6.18 has turned the 5-byte nops under them into calls to a uprobe
trampoline that the child does not have.

usage: fork_child.py LIBPRODUCER PROBE_OFFSET_HEX
       fork_child.py --probe-bytes PID PROBE_OFFSET_HEX   (the 5 bytes at the probe in PID)"""
import ctypes
import os
import sys
import time


def probe_bytes(pid="self", off=None):
    """The 5 bytes at the launch probe (OFF into libgpubpf_inject.so) in PID's memory."""
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and f[5].endswith("/libgpubpf_inject.so") and f[2] == "00000000":
            with open(f"/proc/{pid}/mem", "rb") as m:
                m.seek(int(f[0].split("-")[0], 16) + (OFF if off is None else off))
                return m.read(5).hex()
    return "none"


if sys.argv[1] == "--probe-bytes":
    print(probe_bytes(int(sys.argv[2]), int(sys.argv[3], 16)))
    sys.exit(0)
lib = ctypes.CDLL(sys.argv[1])
OFF = int(sys.argv[2], 16)


def launches(n):
    for _ in range(n):
        lib.producer_launch()


if lib.producer_start() != 0:
    sys.exit("fork_child.py: no gpubpf session attached")
time.sleep(1.2)  # gpubpf writes its settings into the library first
launches(2000)
print(f"fork_child.py: parent before fork: {probe_bytes()}", flush=True)
pid = os.fork()
if pid == 0:
    launches(2000)
    print(f"fork_child.py: child: {probe_bytes()}, launched 2000", flush=True)
    sys.exit(7)  # a normal exit: atexit handlers run
_, st = os.waitpid(pid, 0)
child = f"exit {os.WEXITSTATUS(st)}" if os.WIFEXITED(st) else f"signal {os.WTERMSIG(st)}"
launches(2000)
print(f"fork_child.py: child {child}; parent after: {probe_bytes()}", flush=True)
