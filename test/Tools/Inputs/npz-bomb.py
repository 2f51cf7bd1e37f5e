"""Writes an .npz of one deflated f32 array [1, TOKENS, 64] of zeros:
    npz-bomb.py OUT.npz NAME TOKENS
(moec-run-numbers.mlir). Streams the zeros: nothing of the array's size is held."""
import sys
import zipfile

out, name, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, %d, 64), }" % tokens
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
    with archive.open(name + ".npy", "w") as member:
        member.write(npy)
        chunk = bytes(1 << 20)
        left = tokens * 64 * 4
        while left:
            member.write(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))
