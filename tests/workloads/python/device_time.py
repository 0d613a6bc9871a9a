"""Launches through ctypes from known Python functions (launch_site under train_step),
with the injection library's synthetic CUPTI (tests/workloads/inject/libproducer.so):
the device time of each launch must sit under the same Python frames as the launch.

usage: device_time.py LIBPRODUCER REPEAT"""
import ctypes
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
REPEAT = int(sys.argv[2]) if len(sys.argv) > 2 else 50


def launch_site():
    lib.producer_launch()


def train_step():
    launch_site()


def main():
    if lib.producer_start() != 0:
        sys.exit("device_time.py: no gpubpf session attached")
    time.sleep(1.2)  # gpubpf writes its settings into the library first
    for _ in range(REPEAT):
        train_step()
    lib.producer_deliver()
    print(f"device_time.py: launches={REPEAT} kernel_ns={1000 * REPEAT}", flush=True)
    time.sleep(1.5)  # symbolized while it lives


if __name__ == "__main__":
    main()
