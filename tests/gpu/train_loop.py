#!/usr/bin/env python3
"""A small PyTorch training loop on the GPU (the GPU check, tests/gpu/gpu_check.py): per
iteration two matmuls (nn.Linear -> cuBLAS), a convolution (nn.Conv2d -> cuDNN),
elementwise ops (ReLU, add, mul), a loss, backward (autograd's own thread launches the
backward kernels) and SGD optimizer.step; torch.cuda.synchronize() at the end.

  train_loop.py [--iters N] [--seconds S] [--torch-profile FILE.json]

--iters N: N iterations (default 20). --seconds S: iterations for S seconds after 20 of
warm-up, and the rate: "train_loop: steps=N seconds=S steps_per_sec=X".
--torch-profile FILE: the same loop under torch.profiler; FILE gets
{"iters": N, "kernels": {name: [launches, total device ns]}} from its CUDA kernel events.
Prints "train_loop: start-up: import torch X s, the driver Y s" first (what a started
command's holds cost shows there), then one line: "train_loop: iters=N ..."."""
import argparse
import json
import sys
import time

T_START = time.perf_counter()
import torch  # noqa: E402  (timed: the import dlopens PyTorch's and CUDA's libraries)
import torch.nn as nn  # noqa: E402

T_IMPORTED = time.perf_counter()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(16 * 16 * 16, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = x * 0.5 + 1.0  # elementwise
        x = x.flatten(1)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


def setup():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 16, 16, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    return model, opt, x, y, nn.CrossEntropyLoss()


def step(model, opt, x, y, lossf):
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(x), y)
    loss.backward()
    opt.step()
    return loss


def loop(iters):
    model, opt, x, y, lossf = setup()
    loss = None
    for _ in range(iters):
        loss = step(model, opt, x, y, lossf)
    torch.cuda.synchronize()
    return float(loss)


def timed(seconds):
    model, opt, x, y, lossf = setup()
    for _ in range(20):
        step(model, opt, x, y, lossf)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step(model, opt, x, y, lossf)
        n += 1
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"train_loop: steps={n} seconds={dt:.3f} steps_per_sec={n / dt:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--torch-profile", metavar="FILE")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("train_loop: no CUDA device", file=sys.stderr)
        return 2
    print(f"train_loop: start-up: import torch {T_IMPORTED - T_START:.3f} s, "
          f"the driver {time.perf_counter() - T_IMPORTED:.3f} s", flush=True)
    torch.backends.cudnn.benchmark = False  # the same algorithms in every run
    if a.seconds:
        timed(a.seconds)
        return 0
    if a.torch_profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            loss = loop(a.iters)
        kernels = {}
        for ev in prof.events():
            dt = getattr(ev, "device_type", None)
            if dt is None or "CUDA" not in str(dt):
                continue
            name = ev.name
            if name.startswith("Memcpy") or name.startswith("Memset"):
                continue  # copies, not kernel launches
            k = kernels.setdefault(name, [0, 0])
            k[0] += 1
            k[1] += int(ev.time_range.elapsed_us() * 1000)
        with open(a.torch_profile, "w") as f:
            json.dump({"iters": a.iters, "kernels": kernels}, f, indent=1)
    else:
        loss = loop(a.iters)
    print(f"train_loop: iters={a.iters} loss={loss:.4f} device={torch.cuda.get_device_name(0)} torch={torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
