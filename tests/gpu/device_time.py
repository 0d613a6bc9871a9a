#!/usr/bin/env python3
"""GPU check of device-side time (run by tests/gpu/device_time.sh on a machine with a GPU).

  device_time.py loop SECONDS         the workload: matmuls, convolutions, elementwise ops;
                                      prints "loop: iters=N secs=S ips=I"
  device_time.py events SECONDS       the same loop, timing every kernel with torch.profiler
                                      (a separate run: never together with gpubpf, which a
                                      second CUPTI client would stop); prints
                                      "events: iters=N kernel_ns=K"
"""
import sys
import time

import torch


def step(x, w, conv):
    y = x @ w
    y = torch.relu(y) * 1.5 + 0.25
    z = conv(y.view(16, 4, 64, 64))
    return z.sum()


def setup():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(256, 4096, device=dev)
    w = torch.randn(4096, 4096, device=dev)
    conv = torch.nn.Conv2d(4, 8, 3, padding=1).to(dev)
    return x, w, conv


def loop(secs):
    x, w, conv = setup()
    for _ in range(5):
        step(x, w, conv)
    torch.cuda.synchronize()
    t0 = time.time()
    n = 0
    while time.time() - t0 < secs:
        step(x, w, conv)
        n += 1
        if n % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    dt = time.time() - t0
    print(f"loop: iters={n} secs={dt:.3f} ips={n / dt:.2f}", flush=True)


def events(secs):
    from torch.profiler import ProfilerActivity, profile

    x, w, conv = setup()
    for _ in range(5):
        step(x, w, conv)
    torch.cuda.synchronize()
    n = 0
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.time()
        while time.time() - t0 < secs:
            step(x, w, conv)
            n += 1
            if n % 20 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0 and e.key != "")
    # key_averages' device totals include nested ranges; count kernels only
    kern_us = sum(e.device_time for e in prof.events() if getattr(e, "device_type", None) is not None
                  and str(e.device_type).endswith("CUDA"))
    print(f"events: iters={n} kernel_ns={int(kern_us * 1000)} total_ns={int(total_us * 1000)}", flush=True)


if __name__ == "__main__":
    {"loop": loop, "events": events}[sys.argv[1]](float(sys.argv[2]))
