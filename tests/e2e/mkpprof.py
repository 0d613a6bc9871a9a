#!/usr/bin/env python3
"""Write a small pprof profile by hand (protobuf wire format, gzipped), for tests that
need what gpubpf never writes: absurd values, hostile names.

  mkpprof.py OUT TYPE/UNIT [TYPE/UNIT...] -- STACK=V1[,V2...] [STACK=...]

STACK is "root;caller;leaf" (function names, root first); values one per type. Names
may hold any bytes written as Python escapes (\\x1b)."""
import gzip
import sys


def varint(n):
    n &= (1 << 64) - 1  # negative int64: two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    tag = varint(num << 3 | wire)
    if wire == 0:
        return tag + varint(payload)
    return tag + varint(len(payload)) + payload


def packed(num, values):
    return field(num, 2, b"".join(varint(v) for v in values))


def main(argv):
    out = argv[1]
    sep = argv.index("--")
    types = [t.split("/") for t in argv[2:sep]]
    samples = argv[sep + 1:]
    strings = [""]
    index = {"": 0}

    def s(text):
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    msg = b""
    for typ, unit in types:
        msg += field(1, 2, field(1, 0, s(typ)) + field(2, 0, s(unit)))
    funcs = {}
    for spec in samples:
        stack, vals = spec.rsplit("=", 1)
        names = [n.encode().decode("unicode_escape") for n in stack.split(";")]
        locs = []
        for name in reversed(names):  # leaf first
            if name not in funcs:
                funcs[name] = len(funcs) + 1
            locs.append(funcs[name])
        msg += field(2, 2, packed(1, locs) + packed(2, [int(v) for v in vals.split(",")]))
    for name, fid in funcs.items():
        line = field(4, 2, field(1, 0, fid) + field(2, 0, 1))
        msg += field(4, 2, field(1, 0, fid) + field(3, 0, 0x1000 * fid) + line)
    for name, fid in funcs.items():
        msg += field(5, 2, field(1, 0, fid) + field(2, 0, s(name)) + field(3, 0, s(name)))
    for text in strings:
        msg += field(6, 2, text.encode("utf-8", "surrogateescape"))
    with gzip.open(out, "wb") as f:
        f.write(msg)


if __name__ == "__main__":
    main(sys.argv)
