"""A started command's holds at its loads, for make bench's start-up rows (bench.py,
bench_python.py): the command alone and under `gpubpf record --` in turn, the time its
loads took as it prints it, and beside the time they lost what gpubpf's `cost: holds:`
comment says its holds took (its own account of that time)."""
import os
import re
import statistics
import subprocess
import tempfile


def loads_time(cmd, pattern):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return float(re.search(pattern, out).group(1))


def unstripped_library(path, n=250000):
    """An unstripped library like a self-built LLVM's: N local C++ functions, so a .symtab of
    N symbols and ~20 MB of names, and a .dynsym of one. Built once (gcc, from assembly)."""
    if os.path.exists(path):
        return path
    src = path + ".s"
    with open(src, "w") as f:
        f.write("\t.text\n")
        for i in range(n):
            name = f"_ZN4llvm{i % 97}detail{i}21SomeTemplateInstanceINS_{i % 13}ValueEE7computeERKNS_5ArrayEm"
            f.write(f"\t.type {name},@function\n{name}:\n\tret\n\t.size {name},.-{name}\n")
        f.write("\t.section .note.GNU-stack,\"\",@progbits\n\t.text\n")
        f.write("\t.globl unstripped_entry\n\t.type unstripped_entry,@function\nunstripped_entry:\n\tret\n")
    subprocess.run(["gcc", "-shared", "-o", path + ".tmp", src], check=True)
    os.rename(path + ".tmp", path)
    os.unlink(src)
    return path


def holds_row(gpubpf, label, cmd, pattern, runs):
    """One line: medians of RUNS alternating runs, every run, the holds said."""
    out = tempfile.mktemp(suffix=".pb.gz")
    alone, under, held, passed = [], [], [], []
    for _ in range(runs):
        alone.append(loads_time(cmd, pattern))
        under.append(loads_time([gpubpf, "record", "-o", out, "--", *cmd], pattern))
        c = subprocess.run([gpubpf, "report", out], check=True, stdout=subprocess.PIPE, text=True).stdout
        m = re.search(r"held (\d+) times .*?: ([0-9.]+) ms in all.*?; (\d+) more calls", c)
        held.append(float(m.group(2)) if m else float("nan"))
        passed.append(int(m.group(3)) if m else -1)
    os.unlink(out)
    a, u = statistics.median(alone), statistics.median(under)

    def ms(x):  # a tenth of a ms where a whole one would read 0
        return f"{1e3 * x:.1f}" if abs(x) < 0.01 else f"{1e3 * x:.0f}"

    line = (f"{label}, `record --`: alone {ms(a)} ms, with gpubpf {ms(u)} ms, ratio {u / a:.2f} "
            f"(median of {runs} alternating runs); gpubpf said its holds took {statistics.median(held):.0f} ms "
            f"(whole run, exec included), measured +{ms(u - a)} ms in the loads; "
            f"{statistics.median(passed):.0f} first calls of a load let go with no hold; runs alone "
            f"{' '.join(ms(x) for x in alone)}, with {' '.join(ms(x) for x in under)} ms")
    print(line, flush=True)
    return line
