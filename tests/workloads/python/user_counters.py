"""The calling thread's instructions and cycles in user mode, from the CPU's own counters
(perf_event_open through ctypes, no perf tool): how much of its own code a thread ran, and
how long that took it, whatever a probe's trap made it wait in the kernel. A probe hit
leaves the instructions a step runs as they were (the probed instruction is stepped once
either way) and costs the cycles that the job's own code spends refilling its caches and
predictors after the trap, which no clock of gpubpf's sees (docs/DESIGN.md): so
instructions a step alone against under gpubpf say whether the instruction count is a
clock of the job's progress that a probe does not slow, and cycles a step the user-side
cost of a hit.

  c = UserCounters()            # opened on the calling thread; c.why says why not
  a = c.read(); ...; b = c.read()
  c.fields(a, b, n, "step")     # "user_instr_per_step=X user_cycles_per_step=Y"
                                # or "user_instr_per_step=none(ENOENT)"

Where the machine has no such counters (a virtual machine without a virtual PMU: the
development VM) the open fails with ENOENT and the fields say so."""
import ctypes
import errno
import os
import platform
import struct

_NR = {"x86_64": 298, "aarch64": 241}.get(platform.machine())
HARDWARE = ((0, 1), (0, 0))  # (PERF_TYPE_HARDWARE, INSTRUCTIONS), (PERF_TYPE_HARDWARE, CPU_CYCLES)
SOFTWARE = ((1, 1), (1, 0))  # (PERF_TYPE_SOFTWARE, TASK_CLOCK), (PERF_TYPE_SOFTWARE, CPU_CLOCK): a check of
#                              this code where the machine has no hardware counters (tests/e2e/79)
_EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 5, 1 << 6
_ENABLED_RUNNING = 1 | 2  # PERF_FORMAT_TOTAL_TIME_ENABLED | _RUNNING: scaled where multiplexed
_CLOEXEC = 8


def _attr(kind, config):
    """A struct perf_event_attr of PERF_ATTR_SIZE_VER5 (112 bytes): counting, user mode only."""
    a = struct.pack("=IIQQQQQ", kind, 112, config, 0, 0, _ENABLED_RUNNING, _EXCLUDE_KERNEL | _EXCLUDE_HV)
    return a + bytes(112 - len(a))


class UserCounters:
    def __init__(self, events=HARDWARE):
        self.fds, self.why = [], None
        if _NR is None:
            self.why = "no syscall number for " + platform.machine()
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        for kind, config in events:
            buf = ctypes.create_string_buffer(_attr(kind, config), 112)
            fd = libc.syscall(ctypes.c_long(_NR), buf, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                              ctypes.c_ulong(_CLOEXEC))
            if fd < 0:
                self.why = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
                self.close()
                return
            self.fds.append(fd)

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def read(self):
        """(instructions, cycles) so far, scaled to the time each counted; None without counters."""
        if not self.fds:
            return None
        out = []
        for fd in self.fds:
            v, enabled, running = struct.unpack("=QQQ", os.read(fd, 24))
            out.append(v * enabled / running if running else 0.0)
        return tuple(out)

    def fields(self, a, b, n, unit):
        """The counts from A to B per N UNITs, as the workloads print them."""
        if a is None or b is None or n <= 0:
            return "user_instr_per_%s=none(%s)" % (unit, self.why or "no count")
        return "user_instr_per_%s=%.0f user_cycles_per_%s=%.0f" % (unit, (b[0] - a[0]) / n, unit, (b[1] - a[1]) / n)
