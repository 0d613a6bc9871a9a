"""gpubpf's own cost over a recording, for make bench's own-cost rows (bench.py,
bench_cuda.py): `gpubpf record -p` of a running workload for SECS, its CPU time and peak
RSS read from its own rusage (os.wait4 of it: RUSAGE_CHILDREN's ru_maxrss is the largest of
every child the script has waited for, the Python step's and the replays' 85 MiB)."""
import os
import subprocess
import sys
import time


def own_cost(gpubpf, workload, secs, out, settle=0.0):
    """Start WORKLOAD, let it run SETTLE s, record it for SECS: gpubpf's CPU in % of one
    core over the recording's wall time, its peak RSS in MiB, and that wall time."""
    wl = subprocess.Popen(workload, stdout=subprocess.DEVNULL)
    time.sleep(settle)
    t0 = time.monotonic()
    rec = subprocess.Popen([gpubpf, "record", "-p", str(wl.pid), "-d", str(secs), "-o", out],
                           stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(rec.pid, 0)
    elapsed = time.monotonic() - t0
    wl.kill()
    wl.wait()
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"gpubpf record -p exited {os.waitstatus_to_exitcode(status)}")
    if os.path.exists(out):
        os.unlink(out)
    return 100 * (ru.ru_utime + ru.ru_stime) / elapsed, ru.ru_maxrss / 1024, elapsed
