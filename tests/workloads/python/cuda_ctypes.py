"""Calls cudaLaunchKernel and cudaMemcpy in libcudart through ctypes from known Python
functions (launch_site, copy_site under train_step). Without a GPU the calls fail fast
(cudaErrorInsufficientDriver), but they are made, and traced, all the same.

usage: cuda_ctypes.py LIBCUDART SECONDS"""
import ctypes
import sys
import time


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcudart.so")
lib.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                 ctypes.c_void_p]
lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
SRC = ctypes.create_string_buffer(4096)
DST = ctypes.create_string_buffer(4096)
calls = {"launch": 0, "copy": 0}


def launch_site():
    args = (ctypes.c_void_p * 1)()
    lib.cudaLaunchKernel(ctypes.cast(lib.cudaLaunchKernel, ctypes.c_void_p), Dim3(1, 1, 1), Dim3(32, 1, 1), args, 0,
                         None)
    calls["launch"] += 1


def copy_site():
    lib.cudaMemcpy(DST, SRC, 4096, 1)  # cudaMemcpyHostToDevice
    calls["copy"] += 1


def train_step():
    launch_site()
    copy_site()


def main():
    end = time.monotonic() + float(sys.argv[2] if len(sys.argv) > 2 else 2)
    while time.monotonic() < end:
        train_step()
        time.sleep(0.001)
    print(f"cuda_ctypes.py: launches={calls['launch']} copies={calls['copy']}", flush=True)


if __name__ == "__main__":
    main()
