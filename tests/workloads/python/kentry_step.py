"""What a kernel entry costs a Python step's own code after it, where no probe is: the step
of launch_step.py (step_ops.py) with a call of libc's `abs` (nothing in the kernel) or of
`getppid` (a system call, about the least a kernel entry does) where it launches, the two
alternating for ROUNDS rounds of SECONDS / (2 ROUNDS) each. A probe hit is a kernel entry
too: where the system call's user time a call is far above the plain call's, what a hit
costs the job's code after it (which no clock of gpubpf's sees) is mostly the host's
kernel entry, not the probe's (docs/DESIGN.md, "A hit also costs the job's own code").

usage: kentry_step.py [SECONDS [ROUNDS]]   (6 s, 3 rounds)

Prints "kentry_step: rounds=R calls=N user_ns_plain=A sys_ns_plain=B user_ns_syscall=C
sys_ns_syscall=D extra_user_ns=E extra_user_lo_ns=L extra_user_hi_ns=H": medians over the
rounds of each call's user and kernel time (os.times: the kernel's accounting), and of
the rounds' differences C - A (their least and most)."""
import ctypes
import ctypes.util
import os
import statistics
import sys
import time

from step_ops import Tensor, step

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
ABS, GETPPID = libc.abs, libc.getppid


def plain(self):
    ABS(5)


def syscall(self):
    GETPPID()


def timed(launch, seconds):
    """User and kernel ns a call of LAUNCH in SECONDS of steps, and the calls."""
    Tensor.launch = launch
    for _ in range(50):
        step()
    n, t0, o0 = 0, time.perf_counter(), os.times()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    o1, calls = os.times(), n * 40
    return (o1.user - o0.user) / calls * 1e9, (o1.system - o0.system) / calls * 1e9, calls


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    each = seconds / (2 * rounds)
    p, s, calls = [], [], 0
    for _ in range(rounds):
        p.append(timed(plain, each))
        s.append(timed(syscall, each))
        calls += p[-1][2] + s[-1][2]
    extra = [b[0] - a[0] for a, b in zip(p, s)]
    med = statistics.median
    print(f"kentry_step: rounds={rounds} calls={calls} user_ns_plain={med(x[0] for x in p):.0f} "
          f"sys_ns_plain={med(x[1] for x in p):.0f} user_ns_syscall={med(x[0] for x in s):.0f} "
          f"sys_ns_syscall={med(x[1] for x in s):.0f} extra_user_ns={med(extra):.0f} "
          f"extra_user_lo_ns={min(extra):.0f} extra_user_hi_ns={max(extra):.0f}", flush=True)


if __name__ == "__main__":
    main()
