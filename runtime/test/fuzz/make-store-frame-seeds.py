#!/usr/bin/env python3
"""Writes the seed corpus of moec-fuzz-store-frame (docs/fuzzing.md): frames of
the TCP store (runtime/src/dist/StoreFrame.h) as the ranks send them, a few
back to back, and broken variants (truncated, wrong shape, unknown version,
not a frame). Usage: make-store-frame-seeds.py [OUT_DIR]"""
import hashlib
import os
import struct
import sys


def frame(op, strings, timeout=0, number=0, version=1):
    body = b"".join(struct.pack("<I", len(s)) + s for s in strings)
    return b"MoSt" + struct.pack("<BBHIIq", op, version, len(strings), len(body), timeout,
                                 number) + body


SET, GET, ADD, OK, TIMEOUT, ERROR = 1, 2, 3, 16, 17, 18
seeds = [
    frame(SET, [b"moec/host-communicator/0/address/1", b"127.0.0.1 40001"]),
    frame(GET, [b"moec/barrier/0/1", b"moec/abort"], timeout=2000),
    frame(ADD, [b"moec/handshake/0/joined"], number=1),
    frame(OK, [b"artifact=sha\nep_size=2\nrank=0\nworld_size=2\nhost=h\npid=1\n"]),
    frame(OK, []),
    frame(TIMEOUT, []),
    frame(ERROR, [b"store server: bad magic"]),
    frame(SET, [b"k", b"v"]) + frame(GET, [b"k"]) + frame(ADD, [b"n"], number=-5),
    frame(SET, [b"k", bytes(range(256))]),
    frame(SET, [b"k", b"v"])[:20],
    frame(SET, [b"k"]),
    frame(SET, [b"k", b"v"], version=2),
    b"GET / HTTP/1.1\r\n\r\n",
]
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                         "store-frame-corpus")
os.makedirs(out, exist_ok=True)
for seed in seeds:
    with open(os.path.join(out, hashlib.sha1(seed).hexdigest()), "wb") as f:
        f.write(seed)
print(f"{len(seeds)} seeds in {out}")
