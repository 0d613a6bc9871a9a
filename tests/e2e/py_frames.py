#!/usr/bin/env python3
"""Checks on Python frames in `go tool pprof -traces` output.

usage: py_frames.py shares TRACES SPEC [TOL]   shares of leaf<parent=weight,... where
           the leaf is the innermost frame named like a listed leaf (native frames under
           it, the interpreter's own, are skipped), within TOL points (default 5)
       py_frames.py chain TRACES F1,F2,...     some trace with the sample index's value
           holds F1 then F2 ... as consecutive frames, leaf to root
Prints what it measured; exits 1 on a mismatch."""
import sys

from shares import traces as all_traces  # tests/e2e/shares.py, beside this file


def traces(path):
    return all_traces(path, labels=False)


def fname(frame):
    return frame.split()[0]


def shares(path, spec, tol):
    want = []
    for part in spec.split(","):
        pair, w = part.split("=")
        leaf, parent = pair.split("<")
        want.append((leaf, parent, float(w)))
    leaves = {l for l, _, _ in want}
    got = {(l, p): 0 for l, p, _ in want}
    wrong = 0
    for count, frames in traces(path):
        names = [fname(f) for f in frames]
        for i, n in enumerate(names):
            if n in leaves:
                parent = names[i + 1] if i + 1 < len(names) else ""
                if (n, parent) in got:
                    got[(n, parent)] += count
                else:
                    wrong += count
                break
    total = sum(got.values())
    wsum = sum(w for _, _, w in want)
    ok = total > 0
    for l, p, w in want:
        share = 100.0 * got[(l, p)] / total if total else 0.0
        expect = 100.0 * w / wsum
        flag = "ok" if abs(share - expect) <= tol else "MISMATCH"
        ok = ok and flag == "ok"
        print(f"{l} (from {p}): {share:.1f}% (expected {expect:.1f}% +-{tol}) {got[(l, p)]} samples {flag}")
    if wrong > total * 0.02:
        print(f"{wrong} samples of those leaves under an unexpected parent")
        ok = False
    print(f"total {total} samples")
    return ok


def chain(path, spec):
    want = spec.split(",")
    best = 0
    for count, frames in traces(path):
        names = [fname(f) for f in frames]
        for i in range(len(names) - len(want) + 1):
            if names[i:i + len(want)] == want:
                best += count
                break
    print(f"{' <- '.join(want)}: {best}")
    return best > 0


def main():
    mode = sys.argv[1]
    if mode == "shares":
        ok = shares(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 5.0)
    else:
        ok = chain(sys.argv[2], sys.argv[3])
    sys.exit(0 if ok else 1)


main()
