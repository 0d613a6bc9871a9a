"""A launch-bound step driven by Python, as a PyTorch step is: 40 operators a step on
small "tensors", each calling cudaLaunchKernel in libcudart through ctypes (which fails
fast without a GPU, ~2 us a call with Python's and ctypes' own work). The step costs what
its Python and its launches cost, and a probe hit lands between Python's own work.

usage: launch_step.py LIBCUDART SECONDS

Prints "launch_step: steps=N launches=L seconds=S steps_per_sec=X steps_per_cpu_sec=Y
user_us_per_step=U sys_us_per_step=K user_instr_per_step=I user_cycles_per_step=C": L
counts every launch the process made (the warm-up's too: the truth for a profile's count),
Y is per second of the thread's CPU time (what the host's steal does not move), U and K
split the timed part's CPU time between user and kernel mode (os.times: the kernel's
accounting) per step, I and C are the thread's instructions and cycles in user mode a step
(user_counters.py; "user_instr_per_step=none(WHY)" where the CPU's counters cannot be
opened)."""
import ctypes
import os
import sys
import time

from step_ops import Tensor, step
from user_counters import UserCounters


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcudart.so")
lib.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                 ctypes.c_void_p]
FN = ctypes.cast(lib.cudaLaunchKernel, ctypes.c_void_p)
GRID, BLOCK = Dim3(1, 1, 1), Dim3(32, 1, 1)
ARGS = (ctypes.c_void_p * 1)()
launches = 0


def _launch(self):
    global launches
    lib.cudaLaunchKernel(FN, GRID, BLOCK, ARGS, 0, None)
    launches += 1


Tensor.launch = _launch


def main():
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2
    uc = UserCounters()
    for _ in range(200):
        step()
    n, t0, c0, o0, u0 = 0, time.perf_counter(), time.thread_time(), os.times(), uc.read()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    dt, dc, o1, u1 = time.perf_counter() - t0, time.thread_time() - c0, os.times(), uc.read()
    print(f"launch_step: steps={n} launches={launches} seconds={dt:.3f} steps_per_sec={n / dt:.1f} "
          f"steps_per_cpu_sec={n / dc:.1f} user_us_per_step={(o1.user - o0.user) / n * 1e6:.2f} "
          f"sys_us_per_step={(o1.system - o0.system) / n * 1e6:.2f} {uc.fields(u0, u1, n, 'step')}", flush=True)


if __name__ == "__main__":
    main()
