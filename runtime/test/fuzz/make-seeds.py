#!/usr/bin/env python3
"""Writes the seed corpora of the manifest and bundle fuzzers (docs/fuzzing.md).

    runtime/test/fuzz/make-seeds.py ARTIFACT...

ARTIFACT: folders written by `moec compile ... -o ARTIFACT`; their manifest.txt
files are the valid manifest seeds, and edits of them the broken ones. The
bundle seeds are tiny synthetic bundles (Bundle.h: weights at offset 0, which
is page-aligned, then the manifest, a stand-in model.so and the trailer) and
broken variants of them; a real --emit=exe file is megabytes.
"""
import hashlib
import importlib.util
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
# moec::rt::artifact::contentHash, as the loader's tests compute it.
_spec = importlib.util.spec_from_file_location(
    "damage_artifact", os.path.join(here, "../../../test/Tools/Inputs/damage-artifact.py"))
_damage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_damage)


def rehash(text):
    """`text` with its manifest_hash line recomputed (or added)."""
    lines = [l for l in text.splitlines(keepends=True) if not l.startswith("manifest_hash ")]
    body = "".join(lines)
    return body + f"manifest_hash {_damage.content_hash(body.encode()):016x}\n"


def save(folder, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def manifest_edits(text):
    """The manifest, and edits of it, each also with its hash recomputed so that
    the checks past the hash line are reached."""
    for edit in raw_edits(text):
        yield edit
        yield rehash(edit)


def raw_edits(text):
    lines = text.splitlines(keepends=True)
    yield text
    yield text.replace("target cpu", "target cuda").replace("target cuda", "target gpu9")
    yield text.replace("max_tokens 8192", "max_tokens 100000000")
    yield text.replace("max_tokens 8192", "max_tokens -1")
    yield text.replace("workspace_bytes", "workspace_bytes 99999999999999999999 #")
    yield text.replace("library model.so", "library ../model.so")
    yield text.replace("[1,-1,64]", "[1,-1,-1]")
    yield text.replace("[1,-1,64]", "[9223372036854775807,-1,64]")
    yield "".join(lines[: len(lines) // 2])
    yield "".join(l for l in lines if not l.startswith("weights "))
    yield text + text
    yield text.replace("\n", "\r\n")
    # Weights filled at load (--random-weights): each new field broken.
    if "weights_image" in text:
        yield text.replace(" normal ", " gaussian ", 1)
        yield text.replace(" normal ", " constant ", 1)
        yield text.replace(" constant 0x1p+0", " constant nan", 1)
        yield text.replace(" stored ", " stored 9", 1)
        yield "".join(l for l in lines if not l.startswith("random_seed "))
        yield "".join(l for l in lines if not l.startswith("weights_image "))
        yield "".join(l.rsplit(" ", 2)[0] + "\n" if l.startswith("weight ") else l for l in lines)


def small_manifest(weights_bytes):
    return rehash(
        "moec-artifact 4\ntarget cpu\nlibrary model.so\n"
        f"weights weights.bin {weights_bytes}\nworkspace_bytes 4096\nmax_tokens 16\n"
        "input x f32 [-1,4]\noutput y f32 [-1,4]\nweight w f32 [4,4] 256 64\n"
        "library_hash 0123456789abcdef\nweights_sample_hash -\nweights_hash -\n"
    ).encode()


def small_random_manifest(weights_bytes):
    return rehash(
        "moec-artifact 4\ntarget cpu\nlibrary model.so\n"
        f"weights weights.bin {weights_bytes}\nweights_image 1024\nrandom_seed 7\n"
        "workspace_bytes 4096\nmax_tokens 16\n"
        "input x f32 [-1,4]\noutput y f32 [-1,4]\nweight w f32 [4,4] 256 64 normal 0x1p-6\n"
        "weight b f32 [4] 512 16 constant 0x0p+0\nweight r f32 [4] 768 16 stored 256\n"
        "library_hash 0123456789abcdef\nweights_sample_hash -\nweights_hash -\n"
    ).encode()


def bundle(manifest, weights_bytes=320, version=1, library=b"\x7fELF stand-in"):
    header = b"MOECWTS\0" + struct.pack("<IIQQ", 1, 0, 1, weights_bytes)
    weights = header.ljust(weights_bytes, b"\0")
    manifest_at, library_at = len(weights), len(weights) + len(manifest)
    trailer = b"MOECBNDL" + struct.pack(
        "<II6Q", version, 0, manifest_at, len(manifest), library_at, len(library),
        0, len(weights))
    return weights + manifest + library + trailer


def main():
    for artifact in sys.argv[1:]:
        with open(os.path.join(artifact, "manifest.txt")) as f:
            for text in manifest_edits(f.read()):
                save(os.path.join(here, "manifest-corpus"), text.encode())
    out = os.path.join(here, "bundle-corpus")
    good = bundle(small_manifest(320))
    save(out, good)
    save(out, bundle(small_manifest(320), version=2))
    save(out, bundle(small_manifest(640)))            # manifest and file disagree
    save(out, bundle(small_random_manifest(320)))     # weights filled at load
    save(out, bundle(small_random_manifest(256)))     # a stored weight outside the file
    save(out, bundle(b"moec-artifact 4\ntarget gpu9\n"))
    save(out, good[:-100] + good[-64:])                # a part cut out
    save(out, good[1:])                                # offsets off by one
    save(out, b"\0" * 100 + good[-64:])                # trailer only
    save(out, good[:-1])                               # no trailer


if __name__ == "__main__":
    main()
