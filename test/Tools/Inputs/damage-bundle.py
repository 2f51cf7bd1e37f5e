#!/usr/bin/env python3
"""Writes a damaged copy of a moec executable (moec compile --emit=exe) for the
loader's error tests: damage-bundle.py MODE IN OUT, MODE one of
  cut       1000 bytes removed before the 64-byte trailer (the parts no longer fit)
  version   the trailer's format version set to 7
  manifest  the bundled manifest's first line garbled
  weight    one bit of the bundled weights flipped (past their header)
  library   one bit of the bundled model library flipped
The trailer (runtime/include/moec/runtime/Bundle.h): magic[8], u32 version,
u32 reserved, then u64 offset/size pairs of manifest, library, weights."""
import os
import stat
import struct
import sys

mode, src, dst = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
trailer = data[-64:]
if mode == "cut":
    data = data[:-1064] + trailer
elif mode == "version":
    data[-56:-52] = struct.pack("<I", 7)
elif mode == "manifest":
    offset = struct.unpack("<Q", bytes(trailer[16:24]))[0]
    data[offset:offset + 13] = b"moec-artifaX "
elif mode in ("weight", "library"):
    pair = 48 if mode == "weight" else 32
    offset = struct.unpack("<Q", bytes(trailer[pair:pair + 8]))[0]
    data[offset + 100] ^= 0x10
else:
    sys.exit(f"unknown mode {mode}")
with open(dst, "wb") as f:
    f.write(data)
os.chmod(dst, os.stat(dst).st_mode | stat.S_IXUSR)
