"""A Python start-up's dynamic loads: imports every extension module of the interpreter's
lib-dynload (47 on Debian 12's 3.11), each a dlopen, and prints "imported N in S s" (the
time of the imports alone: what a hold at each load costs the job, without the
interpreter's start and gpubpf's own).

usage: imports.py"""
import importlib
import os
import sysconfig
import time

d = os.path.join(sysconfig.get_path("platstdlib"), "lib-dynload")
t0 = time.perf_counter()
n = 0
for f in sorted(os.listdir(d)):
    if not f.endswith(".so"):
        continue
    try:
        importlib.import_module(f.split(".")[0])
        n += 1
    except ImportError:
        pass
print(f"imported {n} in {time.perf_counter() - t0:.4f} s")
