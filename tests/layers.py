#!/usr/bin/env python3
"""The layer rule of docs/DESIGN.md, checked over every #include "..." line.

userspace/ has one folder per layer, lowest first:
  lib < sym < model < out < trace < cmd
A file includes headers of its own layer or of lower ones, never of a higher one.
Besides those: the headers BPF shares with userspace (bpf/*.h, as "../../bpf/X.h") from
trace and cmd; BPF skeletons (X.skel.h) from trace; the pprof protobuf
(profile.pb-c.h) from out; the generated version.h (the Makefile's GPUBPF_VERSION) from out
and cmd. userspace/inject/ is a library loaded into the target: it
includes nothing of gpubpf's but bpf/cupti.h. userspace/static/ holds what only the static
binary links (stand-ins for what a static library lacks): it includes nothing of gpubpf's. A header named that is not in the tree is
a failure too (a stale include would hide a layer). The repository's root tracks only the
entry points (Makefile, README.md, .clang-format, .gitignore).

Prints PASS/FAIL lines for tests/run.sh; exits 1 on any violation.
"""
import os
import re
import subprocess
import sys

LAYERS = ["lib", "sym", "model", "out", "trace", "cmd"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROOT_FILES = {".clang-format", ".gitignore", "Makefile", "README.md"}
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def headers():
    where = {}
    for layer in LAYERS:
        for f in os.listdir(os.path.join(ROOT, "userspace", layer)):
            if f.endswith(".h"):
                if f in where:
                    sys.exit(f"FAIL layers:unique-names: {f} in {where[f]} and {layer}")
                where[f] = layer
    return where


def check_file(path, layer, where):
    bad = []
    rank = LAYERS.index(layer) if layer in LAYERS else None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            m = INC.match(line)
            if not m:
                continue
            inc = m.group(1)
            at = f"{os.path.relpath(path, ROOT)}:{n}: #include \"{inc}\""
            base = os.path.basename(inc)
            if inc.startswith("../../bpf/"):
                ok = layer in ("trace", "cmd") or (layer == "inject" and base == "cupti.h")
                if not os.path.exists(os.path.join(os.path.dirname(path), inc)):
                    bad.append(f"{at}: no such file")
                elif not ok:
                    bad.append(f"{at}: BPF's shared headers are for trace and cmd")
            elif layer == "static":
                bad.append(f"{at}: userspace/static/ includes nothing of gpubpf's")
            elif layer == "inject":
                if not os.path.exists(os.path.join(os.path.dirname(path), inc)):
                    bad.append(f"{at}: the injection library includes only its own headers")
            elif base.endswith(".skel.h"):
                if layer != "trace":
                    bad.append(f"{at}: a BPF skeleton outside trace")
            elif base == "profile.pb-c.h":
                if layer != "out":
                    bad.append(f"{at}: the pprof protobuf outside out")
            elif inc == "version.h":
                if layer not in ("out", "cmd"):
                    bad.append(f"{at}: the version header outside out and cmd")
            elif inc != base or base not in where:
                bad.append(f"{at}: not a header of a layer (include them by name)")
            elif LAYERS.index(where[base]) > rank:
                bad.append(f"{at}: {layer} includes {where[base]}, a higher layer")
    return bad


def main():
    where = headers()
    fails = 0
    for layer in LAYERS + ["inject", "static"]:
        d = os.path.join(ROOT, "userspace", layer)
        bad = []
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                bad += check_file(os.path.join(d, f), layer, where)
        if bad:
            fails += 1
            print(f"FAIL layers:{layer}: " + "; ".join(bad))
        else:
            print(f"PASS layers:{layer}")
    stray = [f for f in os.listdir(os.path.join(ROOT, "userspace")) if f.endswith((".c", ".h"))]
    if stray:
        fails += 1
        print(f"FAIL layers:no-loose-files: userspace/ holds {' '.join(sorted(stray))}: put each in its layer")
    else:
        print("PASS layers:no-loose-files")
    # the repository's root holds the entry points, nothing else: scratch output of a run
    # by hand (profiles, logs) once went into a commit there
    try:
        tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        tracked = None
    if tracked is None:
        print("PASS layers:clean-root (not a git checkout: nothing to check)")
    else:
        root = sorted(f for f in tracked.splitlines() if "/" not in f and f not in ROOT_FILES)
        if root:
            fails += 1
            print(f"FAIL layers:clean-root: tracked at the repository's root: {' '.join(root)}")
        else:
            print("PASS layers:clean-root")
    return 1 if fails else 0


sys.exit(main())
