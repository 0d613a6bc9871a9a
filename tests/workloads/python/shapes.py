"""Threads, a generator, a coroutine and deep recursion, each spinning in its own leaf.

usage: shapes.py SECONDS"""
import asyncio
import sys
import threading
import time

SECS = float(sys.argv[1] if len(sys.argv) > 1 else 4)


def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s


def thread_a_leaf():
    return spin(3000)


def thread_a_main(end):
    while time.monotonic() < end:
        thread_a_leaf()


def thread_b_leaf():
    return spin(3000)


def thread_b_main(end):
    while time.monotonic() < end:
        thread_b_leaf()


def gen_work(end):
    while time.monotonic() < end:
        s = 0
        for i in range(3000):
            s += i
        yield s


def gen_consumer(end):
    for _ in gen_work(end):
        pass


async def coro_work(end):
    s = 0
    for i in range(3000):
        s += i
    await asyncio.sleep(0)
    return s


async def coro_main(end):
    while time.monotonic() < end:
        await coro_work(end)


def deep_leaf(end):
    while time.monotonic() < end:
        spin(3000)


def recurse(depth, end):
    if depth == 0:
        return deep_leaf(end)
    return recurse(depth - 1, end)


def main():
    part = SECS / 4
    end = time.monotonic() + part
    ts = [threading.Thread(target=thread_a_main, args=(end,), name="pyworker_a"),
          threading.Thread(target=thread_b_main, args=(end,), name="pyworker_b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    gen_consumer(time.monotonic() + part)
    asyncio.run(coro_main(time.monotonic() + part))
    recurse(150, time.monotonic() + part)
    print("shapes.py: done", flush=True)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
