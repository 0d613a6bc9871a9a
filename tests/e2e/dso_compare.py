#!/usr/bin/env python3
"""How a process's CPU samples split across the objects their leaf frames fall in
(the executable, each library, the kernel), by perf and by gpubpf, and the total
variation distances (half the L1 distance between the shares): perf against perf (the
noise of two runs) and gpubpf against the mean of the two perf runs.

  dso_compare.py COMM PERF_DATA_A PERF_DATA_B GPUBPF_PPROF

Objects rather than functions: on stripped programs the two symbolizers name different
subsets of functions (perf 6.1 leaves functions of Debian's python3.11 unnamed that
its .dynsym names), but a leaf address is in the same object for both. Prints
"tv_perf_perf X" and "tv_gpubpf_perf Y", then the largest shares."""
import collections
import re
import subprocess
import sys


def perf_shares(data, comm):
    out = subprocess.run(
        ["perf", "report", "-i", data, "--comm", comm, "--no-children", "--sort", "dso", "--stdio", "-F",
         "overhead,dso", "-g", "none", "--percent-limit", "0", "--percentage", "relative"],
        capture_output=True, text=True, check=True).stdout
    shares = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m:
            shares[m.group(2).rsplit("/", 1)[-1]] += float(m.group(1))
    return normalise(shares)


def gpubpf_shares(pprof, comm):
    out = subprocess.run(["go", "tool", "pprof", "-symbolize=none", "-raw", "-tagfocus=process_name=" + comm, pprof],
                         capture_output=True, text=True, check=True).stdout
    section, loc_map, maps, samples, lost_locs = None, {}, {}, [], set()
    for line in out.splitlines():
        if line.startswith(("Samples:", "Locations", "Mappings")):
            section = line[0]
            continue
        if section == "S":
            m = re.match(r"\s+(\d+)\s+\d+.*?:\s+(\d+)", line)  # count, value...: leaf location
            if m:
                samples.append((int(m.group(1)), int(m.group(2))))
        elif section == "L":
            m = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=(\d+)", line)
            if m:
                loc_map[int(m.group(1))] = int(m.group(2))
                if "[stack lost]" in line:
                    lost_locs.add(int(m.group(1)))
        elif section == "M":
            m = re.match(r"\s*(\d+): 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S+)", line)
            if m:
                maps[int(m.group(1))] = m.group(2).rsplit("/", 1)[-1]
    shares, lost = collections.Counter(), 0
    for n, loc in samples:
        # a sample whose stack BPF could not keep (a stack map bucket taken by another
        # stack in the same drain period) has no object: said apart, not compared
        if loc in lost_locs:
            lost += n
            continue
        shares[maps.get(loc_map.get(loc), "?")] += n
    total = sum(shares.values()) + lost
    print("gpubpf_stacks_lost %.4f" % (lost / total if total else 0))
    return normalise(shares)


def normalise(c):
    total = sum(c.values())
    return {k: v / total for k, v in c.items()} if total else {}


def tv(a, b):
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b)) / 2


def main():
    comm, pa, pb, gp = sys.argv[1:5]
    a, b, g = perf_shares(pa, comm), perf_shares(pb, comm), gpubpf_shares(gp, comm)
    if not a or not b or not g:
        sys.exit("no samples of %s: perf %d and %d objects, gpubpf %d" % (comm, len(a), len(b), len(g)))
    mean = {k: (a.get(k, 0) + b.get(k, 0)) / 2 for k in set(a) | set(b)}
    print("tv_perf_perf %.4f" % tv(a, b))
    print("tv_gpubpf_perf %.4f" % tv(g, mean))
    for k in sorted(set(g) | set(mean), key=lambda k: -max(g.get(k, 0), mean.get(k, 0)))[:6]:
        print("  %-40.40s gpubpf %5.1f%%  perf %5.1f%%" % (k, 100 * g.get(k, 0), 100 * mean.get(k, 0)))


if __name__ == "__main__":
    main()
