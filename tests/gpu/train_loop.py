#!/usr/bin/env python3
"""A small PyTorch training loop on the GPU for tests/gpu/run.sh: per iteration two
matmuls (nn.Linear -> cuBLAS), a convolution (nn.Conv2d -> cuDNN), elementwise ops
(ReLU, add, mul), a loss, backward and optimizer.step; torch.cuda.synchronize() at
the end.

  train_loop.py [--iters N] [--torch-profile FILE.json]

With --torch-profile the same loop runs under torch.profiler and FILE.json gets
{"iters": N, "kernels": {kernel name: launches}} from its CUDA kernel events.
Prints one line: "train_loop: iters=N ..."."""
import argparse
import json
import sys

import torch
import torch.nn as nn


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


def loop(iters):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 16, 16, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    lossf = nn.CrossEntropyLoss()
    loss = None
    for _ in range(iters):
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--torch-profile", metavar="FILE")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("train_loop: no CUDA device", file=sys.stderr)
        return 2
    # Deterministic algorithm choice, the same in both runs.
    torch.backends.cudnn.benchmark = False
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
            # memcpy/memset activity records are not kernel launches
            if name.startswith("Memcpy") or name.startswith("Memset"):
                continue
            kernels[name] = kernels.get(name, 0) + 1
        with open(a.torch_profile, "w") as f:
            json.dump({"iters": a.iters, "kernels": kernels}, f, indent=1)
    else:
        loss = loop(a.iters)
    print(f"train_loop: iters={a.iters} loss={loss:.4f} device={torch.cuda.get_device_name(0)} torch={torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
