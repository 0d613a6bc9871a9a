#!/usr/bin/env python3
"""Check function shares in a profile, read through the real consumer.

usage: shares.py TRACES_FILE SPEC [TOLERANCE_PP]
TRACES_FILE is the output of `go tool pprof -traces FILE`. SPEC is
"leaf<parent=weight,..." : the share of samples whose leaf frame is `leaf` called
directly from `parent`, among all samples of the listed leaves, must equal
weight/sum(weights) within TOLERANCE_PP percentage points (default 5).
Prints the measured shares; exits 1 on a mismatch."""
import re
import sys


def traces(path, labels=True):
    """Yield (count, [frames leaf first]) from pprof -traces output; labels=False leaves
    out the label lines ("key:value") that follow a trace's frames."""
    count, frames = None, []
    for line in open(path):
        if line.startswith("-----------+"):
            if count is not None:
                yield count, frames
            count, frames = None, []
            continue
        m = re.match(r"^\s+(\d+)\s+(\S.*)$", line)
        if m and count is None:
            count, frames = int(m.group(1)), [m.group(2).strip()]
            continue
        if count is not None and line.strip() and (labels or ":" not in line.split()[0]):
            frames.append(line.strip())
    if count is not None:
        yield count, frames


def fname(frame):
    # "leaf_a" or "leaf_a /path/file.c:12" depending on pprof flags
    return frame.split()[0]


def main():
    path, spec = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    want = []
    for part in spec.split(","):
        pair, w = part.split("=")
        leaf, parent = pair.split("<")
        want.append((leaf, parent, float(w)))
    got = {(l, p): 0 for l, p, _ in want}
    wrong_parent = 0
    for count, frames in traces(path):
        if not frames:
            continue
        leaf = fname(frames[0])
        parent = fname(frames[1]) if len(frames) > 1 else ""
        for l, p, _ in want:
            if leaf == l:
                if parent == p:
                    got[(l, p)] += count
                else:
                    wrong_parent += count
    total = sum(got.values())
    wsum = sum(w for _, _, w in want)
    ok = total > 0
    for l, p, w in want:
        share = 100.0 * got[(l, p)] / total if total else 0.0
        expect = 100.0 * w / wsum
        flag = "ok" if abs(share - expect) <= tol else "MISMATCH"
        if flag != "ok":
            ok = False
        print(f"{l} (from {p}): {share:.1f}% (expected {expect:.1f}% +-{tol}) {got[(l, p)]} samples {flag}")
    if wrong_parent > total * 0.02:
        print(f"{wrong_parent} samples of those leaves under an unexpected parent")
        ok = False
    print(f"total {total} samples")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
