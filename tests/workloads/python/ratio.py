"""CPU time split 1:2:3 across three Python leaves, each under its own caller.

usage: ratio.py SECONDS. The work per round is fixed (units), so the split holds
whatever the speed of the machine; the leaves run the same loop."""
import sys
import time

UNIT = 2000


def leaf_a(n):
    s = 0
    for i in range(n * UNIT):
        s += i
    return s


def leaf_b(n):
    s = 0
    for i in range(n * UNIT):
        s += i
    return s


def leaf_c(n):
    s = 0
    for i in range(n * UNIT):
        s += i
    return s


def parent_a():
    return leaf_a(1)


def parent_b():
    return leaf_b(2)


def parent_c():
    return leaf_c(3)


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 4)
    rounds = 0
    while time.monotonic() < end:
        parent_a()
        parent_b()
        parent_c()
        rounds += 1
    print(f"ratio.py: rounds={rounds}", flush=True)


if __name__ == "__main__":
    main()
