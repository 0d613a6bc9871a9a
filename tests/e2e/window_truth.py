#!/usr/bin/env python3
"""A launch window against the job's own clock (tests/e2e/62_window_truth.sh).

launch_loop --trace wrote the time just before each of its launches; gpubpf -v printed each
launch window's open and close (CLOCK_MONOTONIC, the job's clock too) and, for a thread its
probes slowed, the calls it saw there, the probes' delay and the correction it applied
(x MID (x LO-x HI)). Checked:
  gate-exact         every window saw the job's own launches between its open and close,
                     give or take 2 (a call in flight at either edge), and those in the time
                     its gate's store may have landed late (gpubpf said; a preempted thread);
  lines              a thread line for 90% of the windows with more than 10 launches;
  correction-range   the slowdown the job really had in a window (its steady pace outside
                     the windows, over its pace inside) within the stated range in 80% of
                     the windows after the first 0.2 s (the start-up's pace is no steady one).
Prints the pooled numbers: what a call took inside and outside, the delay gpubpf counted.
Usage: window_truth.py TRACE STDERR"""
import array
import bisect
import re
import sys


def verdict(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
    return ok


def main():
    t = array.array("d")
    with open(sys.argv[1], "rb") as f:
        t.frombytes(f.read())
    t = sorted(t)
    log = open(sys.argv[2]).read()
    wins, slip = {}, {}
    for m in re.finditer(r"window (\d+) of launches: [0-9.]+ ms \(([0-9.]+)-([0-9.]+) s, CLOCK_MONOTONIC\)"
                         r".*?its gate's stores late by (\d+) and (\d+) us", log):
        wins[int(m[1])] = (float(m[2]), float(m[3]))
        slip[int(m[1])] = (float(m[4]) / 1e6, float(m[5]) / 1e6)
    thr = {}
    for m in re.finditer(r"window (\d+) of launches: thread \d+ made (\d+) calls .*?its probes' delay (\d+) us"
                         r".*?\): x([0-9.]+) \(x([0-9.]+)-x([0-9.]+|inf)\)", log):
        thr[int(m[1])] = (int(m[2]), float(m[3]) / 1e6, float(m[4]), float(m[5]), float(m[6]))
    if len(t) < 1000 or len(wins) < 5:
        verdict("windows", False, f"{len(t)} launches traced, {len(wins)} launch windows in the log")
        return 1

    def calls(a, b):
        return bisect.bisect_left(t, b) - bisect.bisect_left(t, a)

    span = t[-1] - t[0]
    in_len = sum(min(c, t[-1]) - max(o, t[0]) for o, c in wins.values() if c > t[0] and o < t[-1])
    in_calls = sum(calls(o, c) for o, c in wins.values())
    out_pace = (span - in_len) / (len(t) - in_calls)  # seconds a call, no window open

    def edge(i):  # the calls a gate's store landing late may have moved in or out of window I
        (o, c), (so, sc) = wins[i], slip[i]
        return calls(o, o + so) + calls(c, c + sc) if so or sc else 0

    off = [f"{i}: saw {thr[i][0]} of {calls(*wins[i])}" for i in sorted(thr) if i in wins
           and abs(thr[i][0] - calls(*wins[i])) > 2 + edge(i)]
    slipped = [i for i in wins if slip[i][0] or slip[i][1]]
    if slipped:
        print(f"# {len(slipped)} windows' gate stores landed late: "
              + ", ".join(f"{i} by {slip[i][0] * 1e6:.0f}/{slip[i][1] * 1e6:.0f} us" for i in slipped[:5]))
    ok = verdict("gate-exact", not off and bool(thr), "; ".join(off[:5]) or "no thread lines")
    busy = [i for i in wins if calls(*wins[i]) > 10]
    ok &= verdict("lines", len([i for i in busy if i in thr]) >= 0.9 * len(busy),
                  f"{len([i for i in busy if i in thr])} thread lines for {len(busy)} windows with launches")
    judged = inside = 0
    seen = delay = tin = lin = 0.0
    for i in sorted(thr):
        o, c = wins.get(i, (0, 0))
        n = calls(o, c)
        if o < t[0] + 0.2 or c > t[-1] or n <= 10:
            continue
        true_x = (c - o) / n / out_pace
        judged += 1
        inside += thr[i][3] <= true_x <= thr[i][4]
        seen, delay, tin, lin = seen + thr[i][0], delay + thr[i][1], tin + n, lin + (c - o)
    ok &= verdict("correction-range", judged >= 5 and inside >= 0.8 * judged,
                  f"the job's slowdown inside the stated range in {inside} of {judged} windows")
    if tin:
        print(f"# a call: {1e6 * out_pace:.2f} us outside the windows, {1e6 * lin / tin:.2f} us inside "
              f"(the job's clock); the probes' delay {1e6 * (lin / tin - out_pace):.2f} us a call, "
              f"gpubpf counted {1e6 * delay / seen:.2f} us; {inside} of {judged} windows' ranges held the truth")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
