#!/usr/bin/env python3
"""Writes a damaged copy of a moec artifact directory for the loader's tests:

  damage-artifact.py IN OUT set KEY VALUE [--rehash]   a manifest entry's value
  damage-artifact.py IN OUT library OTHER [--rehash]   another artifact's model.so
  damage-artifact.py IN OUT truncate-library BYTES     model.so cut to BYTES
  damage-artifact.py IN OUT flip-weight OFFSET         one bit of weights.bin

--rehash rewrites the hashes the edit invalidates (library_hash, manifest_hash),
as someone editing on purpose would, so that the loader's deeper checks (the
plan model.so was compiled for) are what must refuse it. The hash is
moec::rt::artifact::contentHash (runtime/src/ArtifactFormat.cpp)."""
import shutil
import struct
import sys

M = (1 << 64) - 1
K = 0x9E3779B97F4A7C15


def mix(h):
    h ^= h >> 31
    h = (h * 0xBF58476D1CE4E5B9) & M
    return h ^ (h >> 29)


def content_hash(data):
    lanes = [0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89]
    blocks = len(data) // 32
    words = struct.unpack_from(f"<{blocks * 4}Q", data)
    for j in range(0, len(words), 4):
        for lane in range(4):
            x = ((lanes[lane] ^ words[j + lane]) * K) & M
            lanes[lane] = x ^ (x >> 32)
    h = (len(data) * K) & M
    for lane in lanes:
        h = mix(h ^ mix(lane))
    for c in data[blocks * 32:]:
        h = ((h ^ c) * K) & M
    return mix(h)


def write_manifest(path, lines, rehash):
    if rehash:
        lines = [line for line in lines if not line.startswith("manifest_hash ")]
        text = "".join(lines)
        lines.append(f"manifest_hash {content_hash(text.encode()):016x}\n")
    open(path, "w").write("".join(lines))


def main():
    src, dst, mode, *args = sys.argv[1:]
    rehash = "--rehash" in args
    args = [a for a in args if a != "--rehash"]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    manifest = f"{dst}/manifest.txt"
    lines = open(manifest).readlines()
    if mode == "set":
        key, value = args
        lines = [f"{key} {value}\n" if line.split(" ")[0] == key else line for line in lines]
        write_manifest(manifest, lines, rehash)
    elif mode == "library":
        shutil.copyfile(f"{args[0]}/model.so", f"{dst}/model.so")
        if rehash:
            digest = content_hash(open(f"{dst}/model.so", "rb").read())
            lines = [f"library_hash {digest:016x}\n" if line.startswith("library_hash ") else line
                     for line in lines]
            write_manifest(manifest, lines, True)
    elif mode == "truncate-library":
        data = open(f"{dst}/model.so", "rb").read()[: int(args[0])]
        open(f"{dst}/model.so", "wb").write(data)
    elif mode == "flip-weight":
        data = bytearray(open(f"{dst}/weights.bin", "rb").read())
        data[int(args[0])] ^= 0x10
        open(f"{dst}/weights.bin", "wb").write(data)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
