#!/usr/bin/env python3
"""Convert a gpubpf --trace timeline (Chrome trace JSON, optionally gzipped) into the call
file tests/workloads/cuda/replay reads: every traced CUDA API call with its thread, start
time and duration, mapped to the runtime call the replay makes for it.

usage: timeline2calls.py TRACE.json[.gz] OUT.calls

The timeline's `cuda_api` slices are the driver calls gpubpf traced (cuLaunchKernel,
cuMemsetD8Async, ...), with their real durations. Bytes of copies and sets come from the
device records (`memcpy` slices), joined on CUPTI's correlation id to the runtime call
(`cuda_launch` slices) and then, per thread and in order, to the driver call it made.
Each (thread, call) pair is a call site of its own in the replay (site_NN).
"""
import collections
import gzip
import json
import sys

# driver function -> the replay's call (tests/workloads/cuda/replay.c)
API = {
    "cuLaunchKernel": "launch",
    "cuLaunchKernel_ptsz": "launch",
    "cuLaunchKernelEx": "launch_ex",
    "cuLaunchKernelEx_ptsz": "launch_ex",
    "cuMemsetD8Async": "memset_async",
    "cuMemsetD32Async": "memset_async",
    "cuMemcpyHtoDAsync_v2": "memcpy_htod_async",
    "cuMemcpyDtoHAsync_v2": "memcpy_dtoh_async",
    "cuMemcpyDtoDAsync_v2": "memcpy_dtod_async",
    "cuMemAlloc_v2": "malloc",
    "cuMemFree_v2": "free",
    "cuStreamSynchronize": "stream_sync",
    "cuCtxSynchronize_v2": "device_sync",
    "cuCtxSynchronize": "device_sync",
}
# runtime calls whose bytes the device records give, by the replay call they map to
BYTES_OF = {"cudaMemsetAsync": ("memset_async",), "cudaMemcpyAsync": ("memcpy_htod_async", "memcpy_dtod_async",
                                                                        "memcpy_dtoh_async")}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        events = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    calls = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_api"), key=lambda e: e["ts"])
    skipped = collections.Counter(e["name"] for e in calls if e["name"] not in API)
    calls = [e for e in calls if e["name"] in API]
    # bytes: device record -> runtime call (correlation) -> the thread's driver calls in order
    dev = {e["args"]["correlation"]: e["args"].get("bytes", 0) for e in events
           if e.get("ph") == "X" and e.get("cat") == "memcpy" and "correlation" in e.get("args", {})}
    rt = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_launch" and e["name"] in BYTES_OF),
                key=lambda e: e["ts"])
    queue = collections.defaultdict(collections.deque)
    for e in rt:
        queue[(e["tid"], BYTES_OF[e["name"]])].append(dev.get(e["args"].get("correlation"), 0))
    tids = []
    for e in calls:
        if e["tid"] not in tids:
            tids.append(e["tid"])
    sites = {}
    t0 = calls[0]["ts"]
    out = []
    for e in calls:
        api = API[e["name"]]
        key = (e["tid"], api)
        if key not in sites:
            sites[key] = len(sites)
        nbytes = 0
        for (tid, group), q in queue.items():
            if tid == e["tid"] and api in group and q:
                nbytes = q.popleft()
                break
        out.append(f"call {tids.index(e['tid'])} {sites[key]} {api} {round((e['ts'] - t0) * 1000)} "
                   f"{round(e['dur'] * 1000)} {nbytes}\n")
    with open(dst, "w") as f:
        f.write(f"# gpubpf call timeline, converted from {src.split('/')[-1]} by timeline2calls.py\n")
        f.write(f"threads {len(tids)}\n")
        for i, tid in enumerate(tids):
            f.write(f"thread {i} {names.get(tid, 'thread%d' % i)}\n")
        f.writelines(out)
    if skipped:
        print(f"timeline2calls: skipped {dict(skipped)}", file=sys.stderr)
    print(f"timeline2calls: {len(out)} calls on {len(tids)} threads, {len(sites)} call sites -> {dst}")


main()
