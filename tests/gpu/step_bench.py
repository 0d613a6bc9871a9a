#!/usr/bin/env python3
"""A launch-bound PyTorch step for the GPU check's throughput rows: 40 elementwise kernels
on 1k-element tensors per step, so the step costs what its launches cost.

  step_bench.py SECONDS [--torch-profile] [--slices]

Prints "step_bench: steps=N seconds=S steps_per_sec=X launches=L user_us_per_step=U
sys_us_per_step=K user_instr_per_step=I user_cycles_per_step=C" for the SECONDS after a
warm-up (L: the steps' launches, the warm-up's too; U and K: the timed part's CPU time a
step in user and kernel mode, os.times, the process's: what a probe hit costs the job's own
code beside what it costs in the kernel; I and C: the main thread's instructions and cycles
in user mode a step, user_counters.py, "user_instr_per_step=none(WHY)" without counters);
with --torch-profile the timed part runs under torch.profiler (CPU and CUDA activity);
with --slices also "step_bench: slices=X,Y,...", the steps a second of each half second
(the launches' pace on the CPU: nothing in the loop waits for the device)."""
import contextlib
import os
import sys
import time

import torch
from step_ops import step
from user_counters import UserCounters


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3
    dev = torch.device("cuda")
    x = torch.randn(1024, device=dev)
    y = torch.randn(1024, device=dev)

    uc = UserCounters()
    for _ in range(200):
        step(x, y)
    torch.cuda.synchronize()
    ctx = contextlib.nullcontext()
    if "--torch-profile" in sys.argv:
        from torch.profiler import ProfilerActivity, profile

        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    slices = []
    with ctx:
        n, t0, o0, u0 = 0, time.perf_counter(), os.times(), uc.read()
        sn, st = 0, t0
        while True:
            now = time.perf_counter()
            if now - st >= 0.5 or (now - t0 >= seconds and now - st >= 0.25):
                slices.append((n - sn) / (now - st))
                sn, st = n, now
            if now - t0 >= seconds:
                break
            step(x, y)
            n += 1
        torch.cuda.synchronize()
        dt, o1, u1 = time.perf_counter() - t0, os.times(), uc.read()
    print(f"step_bench: steps={n} seconds={dt:.3f} steps_per_sec={n / dt:.1f} launches={(200 + n) * 40} "
          f"user_us_per_step={(o1.user - o0.user) / max(n, 1) * 1e6:.2f} "
          f"sys_us_per_step={(o1.system - o0.system) / max(n, 1) * 1e6:.2f} {uc.fields(u0, u1, n, 'step')}",
          flush=True)
    if "--slices" in sys.argv:
        print("step_bench: slices=" + ",".join("%.1f" % r for r in slices), flush=True)


if __name__ == "__main__":
    main()
