#!/usr/bin/env python3
"""A launch-bound PyTorch step for the GPU check's throughput rows: 40 elementwise kernels
on 1k-element tensors per step, so the step costs what its launches cost.

  step_bench.py SECONDS [--torch-profile] [--slices]

Prints "step_bench: steps=N seconds=S steps_per_sec=X" for the SECONDS after a warm-up;
with --torch-profile the timed part runs under torch.profiler (CPU and CUDA activity);
with --slices also "step_bench: slices=X,Y,...", the steps a second of each half second
(the launches' pace on the CPU: nothing in the loop waits for the device)."""
import contextlib
import sys
import time

import torch


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3
    dev = torch.device("cuda")
    x = torch.randn(1024, device=dev)
    y = torch.randn(1024, device=dev)

    def step():
        a = x
        for _ in range(20):
            a = a * 1.0001  # one kernel
            a = a + y  # and another
        return a

    for _ in range(200):
        step()
    torch.cuda.synchronize()
    ctx = contextlib.nullcontext()
    if "--torch-profile" in sys.argv:
        from torch.profiler import ProfilerActivity, profile

        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    slices = []
    with ctx:
        n, t0 = 0, time.perf_counter()
        sn, st = 0, t0
        while True:
            now = time.perf_counter()
            if now - st >= 0.5 or (now - t0 >= seconds and now - st >= 0.25):
                slices.append((n - sn) / (now - st))
                sn, st = n, now
            if now - t0 >= seconds:
                break
            step()
            n += 1
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    print(f"step_bench: steps={n} seconds={dt:.3f} steps_per_sec={n / dt:.1f}", flush=True)
    if "--slices" in sys.argv:
        print("step_bench: slices=" + ",".join("%.1f" % r for r in slices), flush=True)


if __name__ == "__main__":
    main()
