#!/usr/bin/env python3
"""Compare gpubpf's kernel launch counts with torch.profiler's for train_loop.py.

usage: compare.py TRACES TORCH_JSON ITERS
TRACES: `go tool pprof -symbolize=none -traces -sample_index=cuda_launches PROFILE`.
TORCH_JSON: written by train_loop.py --torch-profile.
Prints a table (kernel -> gpubpf launches, torch.profiler launches) grouped by the
kernel's base name (templates and parameters cut off: the two demanglers differ in
detail), then PASS/FAIL lines:
  cublas / cudnn / elementwise: kernels of that family are named in the gpubpf profile
      with >= ITERS launches in all (each iteration runs several of each)
  named: no launch is left as "[cuda kernel 0x...]"
  total-vs-torch: gpubpf's launches are within 10% of torch.profiler's kernel count
      (a runtime launch that also showed up at the driver would double it)"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from cuda_check import blocks  # noqa: E402

FAMILIES = {
    "cublas": re.compile(r"gemm|cutlass|cublas|xmma|gemv|splitKreduce", re.I),
    "cudnn": re.compile(r"conv|cudnn|implicit|winograd|fft|wgrad|dgrad", re.I),
    "elementwise": re.compile(r"elementwise", re.I),
}


def base(name):
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    depth, out = 0, []
    for ch in n:  # cut template arguments and the parameter list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip() or n


def main():
    traces, tjson, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    g_full, g_base = {}, {}
    for v, _, frames in blocks(traces):
        if v:
            g_full[frames[0]] = g_full.get(frames[0], 0) + v
            b = base(frames[0])
            g_base[b] = g_base.get(b, 0) + v
    t_base = {}
    tk = json.load(open(tjson))["kernels"]
    for k, v in tk.items():
        b = base(k)
        t_base[b] = t_base.get(b, 0) + v
    rows = sorted(set(g_base) | set(t_base), key=lambda b: -(g_base.get(b, 0) + t_base.get(b, 0)))
    w = min(100, max([len(b) for b in rows] + [10]))
    print(f"{'kernel (base name)':<{w}} {'gpubpf':>9} {'torch':>9}")
    for b in rows:
        g, t = g_base.get(b, 0), t_base.get(b, 0)
        flag = "" if g == t else "   <- differs"
        print(f"{b[:w]:<{w}} {g:>9} {t:>9}{flag}")
    gt, tt = sum(g_base.values()), sum(t_base.values())
    print(f"{'TOTAL':<{w}} {gt:>9} {tt:>9}")
    ok = True
    for fam, rx in FAMILIES.items():
        n = sum(v for k, v in g_full.items() if rx.search(k))
        names = [k for k in g_full if rx.search(k)]
        if n >= iters:
            print(f"PASS gpu:{fam}-kernels-named: {n} launches >= {iters} iterations ({len(names)} kernels, e.g. {names[0][:120]})")
        else:
            ok = False
            print(f"FAIL gpu:{fam}-kernels-named: {n} launches of {fam} kernels in gpubpf's profile, want >= {iters}")
    unnamed = sum(v for k, v in g_full.items() if k.startswith("[cuda kernel"))
    if unnamed == 0:
        print("PASS gpu:all-launches-named")
    else:
        ok = False
        print(f"FAIL gpu:all-launches-named: {unnamed} of {gt} launches are [cuda kernel 0x...]")
    if tt and abs(gt - tt) <= 0.1 * tt:
        print(f"PASS gpu:total-vs-torch: gpubpf {gt}, torch.profiler {tt}")
    else:
        ok = False
        print(f"FAIL gpu:total-vs-torch: gpubpf {gt} launches, torch.profiler {tt} kernels (want within 10%)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
