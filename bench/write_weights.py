#!/usr/bin/env python3
"""Fill an artifact's weights.bin in the layout its manifest gives (numpy or torch tensors).

`moec compile X --target=cpu|cuda --weights=external -o DIR` writes manifest.txt
and model.so but no weights.bin: the manifest's `weights weights.bin BYTES` and
`weight NAME DTYPE SHAPE OFFSET BYTES` lines are the layout (docs/artifact.md).
This writes the file: the 64-byte header (magic "MOECWTS\\0", version 1, tensor
count, file size), each tensor at its offset, zeros between.

    python3 bench/write_weights.py DIR --splat router=0.01 --splat 0.02   # constants (tests)
    from write_weights import write_weights
    write_weights(DIR, {"router": r, "gate_up": gu, "down": d})         # or a list, manifest order

Tensors are given by name or in manifest order, each of the manifest's shape, in moe's
orientation ([out, in]; gate/up concatenated [E, 2I, H], rows [0, I) gate), and
converted to the manifest's dtype (bf16: rounded to nearest even). torch tensors are accepted (moved to the host).
"""
import argparse
import os
import struct
import sys

STRUCT = {"f32": "<f", "i32": "<i", "i64": "<q"}


def read_layout(artifact):
    """(total bytes, [(name, dtype, shape, offset, bytes)]) from DIR/manifest.txt."""
    total, weights = None, []
    with open(os.path.join(artifact, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "weights":
                total = int(parts[2])
            elif parts[0] == "weight":
                name, dtype, shape, offset, size = parts[1:6]
                shape = tuple(int(s) for s in shape.strip("[]").split(",") if s)
                weights.append((name, dtype, shape, int(offset), int(size)))
    if total is None:
        raise ValueError(f"{artifact}/manifest.txt has no 'weights' line")
    return total, weights


class Splat:
    """Every element `value` (no array is built: the --splat path needs no numpy)."""

    def __init__(self, value):
        self.value = value


def bf16_bits(value):
    """An f32's bf16 bits, rounded to nearest even (moec's --expert-weights=bf16)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF):
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _write(f, t, name, dtype, shape, size):
    if isinstance(t, Splat):
        one = (struct.pack("<H", bf16_bits(t.value)) if dtype == "bf16"
               else struct.pack(STRUCT[dtype], t.value))
        chunk = one * (1 << 20)
        left = size
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
        return
    import numpy as np
    if dtype == "bf16":  # bf16 bits as uint16, rounded to nearest even
        if hasattr(t, "detach"):
            import torch
            t = t.detach().to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy()
            a = t.view(np.uint16)
        else:
            bits = np.ascontiguousarray(np.asarray(t, dtype=np.float32)).view(np.uint32)
            nan = (bits & 0x7F800000) == 0x7F800000
            nan &= (bits & 0x7FFFFF) != 0
            rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16)
            a = np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)
        if a.shape != shape or a.nbytes != size:
            raise ValueError(f"weight {name}: manifest {dtype} {list(shape)}, given "
                             f"{list(a.shape)}")
        a.tofile(f)
        return
    if dtype == "f8e4m3":  # e4m3 codes, given as torch.float8_e4m3fn or uint8
        if hasattr(t, "detach"):
            import torch
            t = t.detach().contiguous().view(torch.uint8).cpu().numpy()
        a = np.ascontiguousarray(np.asarray(t, dtype=np.uint8))
        if a.shape != shape or a.nbytes != size:
            raise ValueError(f"weight {name}: manifest {dtype} {list(shape)}, given "
                             f"{list(a.shape)}")
        a.tofile(f)
        return
    if dtype in ("f4e2m1", "f8e8m0"):  # MXFP4 codes (packed rows) and scale bytes, as uint8
        if hasattr(t, "detach"):
            t = t.detach().contiguous().cpu().numpy()
        a = np.ascontiguousarray(np.asarray(t, dtype=np.uint8))
        if a.nbytes != size:
            raise ValueError(f"weight {name}: manifest {dtype} {list(shape)} ({size} bytes), "
                             f"given {a.nbytes} bytes")
        a.tofile(f)
        return
    npdtype = {"f32": np.float32, "i32": np.int32, "i64": np.int64}[dtype]
    if hasattr(t, "detach"):  # torch
        import torch
        # converted (and made contiguous) where it lives, then copied to the host
        t = t.detach().to({"f32": torch.float32, "i32": torch.int32,
                           "i64": torch.int64}[dtype]).contiguous().cpu().numpy()
    a = np.ascontiguousarray(np.asarray(t, dtype=npdtype))
    if a.shape != shape or a.nbytes != size:
        raise ValueError(f"weight {name}: manifest {dtype} {list(shape)}, given "
                         f"{a.dtype} {list(a.shape)}")
    a.tofile(f)


def quantize_e4m3_blocks(w, chunk_bytes=1 << 30):
    """moe-quantize-experts-fp8's cast of w [E, N, K] (torch): per 128x128 block,
    scale = amax / 448 (1 for an all-zero block), q = e4m3(w / scale), nearest
    even. Returns (q as torch.float8_e4m3fn, scales [E, ceil(N/128), ceil(K/128)] f32)."""
    import torch
    e, n, k = w.shape
    nb, kb = -(-n // 128), -(-k // 128)
    # A few experts at a time: the f32 temporaries of all of DeepSeek-V3's gate/up
    # at once (3 x 30 GB) stayed in torch's cache and starved the FP8 artifact's
    # own allocation on the H200.
    chunk = max(1, chunk_bytes // (nb * kb * 128 * 128 * 4))
    qs, ss = [], []
    for e0 in range(0, e, chunk):
        part = w[e0:e0 + chunk]
        padded = torch.zeros(part.shape[0], nb * 128, kb * 128, dtype=torch.float32, device=w.device)
        padded[:, :n, :k] = part.float()
        blocks = padded.view(part.shape[0], nb, 128, kb, 128)
        amax = blocks.abs().amax(dim=(2, 4))
        scales = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
        q = (blocks / scales[:, :, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        qs.append(q.view(part.shape[0], nb * 128, kb * 128)[:, :n, :k].contiguous())
        ss.append(scales)
        del padded, blocks, q
    return torch.cat(qs), torch.cat(ss).contiguous()


def fp8_expert_weights(artifact, tensors):
    """`tensors` (by name) with the e4m3 experts of an artifact compiled with
    --fp8 put in: moe-quantize-experts-fp8 names the cast of weight NAME
    NAME.e4m3 and its block scales NAME.e4m3_scales (bench/make_block_mlir.py
    names every weight); NAME itself is then no longer in the artifact."""
    _, layout = read_layout(artifact)
    out = dict(tensors)
    for name, dtype, _, _, _ in layout:
        if dtype != "f8e4m3":
            continue
        if not name.endswith(".e4m3") or name[:-len(".e4m3")] not in tensors:
            raise ValueError(f"{artifact}: e4m3 weight {name} is not NAME.e4m3 of a given NAME")
        source = name[:-len(".e4m3")]
        out[name], out[source + ".e4m3_scales"] = quantize_e4m3_blocks(tensors[source])
        del out[source]
    return out


E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def quantize_mxfp4(w, chunk_bytes=1 << 30):
    """moe-quantize-experts-mxfp4's cast of w [E, N, K] (torch; moec/runtime/MXFP4.h):
    per 32 values along K, the scale byte s of f32(amax / 6) rounded up to a power of
    two, each value's code the nearest e2m1 of value / 2^(s - 127), ties to even,
    saturating at 6 (all codes of a block with s = 0 are signed zeros). Returns (codes
    packed as MXFP4.h stores them, uint8 [E, N, ceil(K/32) * 16]; scales uint8
    [E, N, ceil(K/32)])."""
    import torch
    e, n, k = w.shape
    kb = -(-k // 32)
    chunk = max(1, chunk_bytes // (n * kb * 32 * 4 * 4))
    codes, scales = [], []
    for e0 in range(0, e, chunk):
        part = w[e0:e0 + chunk]
        x = torch.zeros(part.shape[0], n, kb * 32, dtype=torch.float32, device=w.device)
        x[:, :, :k] = part.float()
        x = x.view(part.shape[0], n, kb, 32)
        d = (x.abs().amax(dim=-1) / 6.0).contiguous()
        s = ((d.view(torch.int32).long() + 0x7FFFFF) & 0x7F800000) >> 23
        s = s.clamp(max=255)
        # value / 2^(s - 127), exact in f32 (a power of two; codes of s = 0 are zero)
        m = (x.abs() * torch.exp2((127 - s).float())[..., None]).masked_fill((s == 0)[..., None], 0)
        mag = ((m > 0.25).int() + (m >= 0.75).int() + (m > 1.25).int() + (m >= 1.75).int() +
               (m > 2.5).int() + (m >= 3.5).int() + (m > 5.0).int())
        code = (mag | (torch.signbit(x).int() << 3)).to(torch.uint8).view(part.shape[0], n, kb * 16, 2)
        codes.append((code[..., 0] | (code[..., 1] << 4)).contiguous())
        scales.append(s.to(torch.uint8))
        del x, m, mag, code
    return torch.cat(codes), torch.cat(scales).contiguous()


def dequantize_mxfp4_into(out, codes, scales, chunk_bytes=1 << 30):
    """out [E, N, K] (torch, any float dtype, a view is fine) = the values of MXFP4
    `codes` and `scales` (quantize_mxfp4's), a few experts at a time."""
    import torch
    e, n, k = out.shape
    kb = scales.shape[-1]
    table = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), device=codes.device)
    chunk = max(1, chunk_bytes // (n * kb * 32 * 4 * 3))
    for e0 in range(0, e, chunk):
        c = codes[e0:e0 + chunk].long()
        nibbles = torch.stack([c & 0xF, c >> 4], dim=-1).view(c.shape[0], n, kb, 32)
        scale = torch.exp2(scales[e0:e0 + chunk].float() - 127)
        values = table[nibbles] * scale[..., None]
        out[e0:e0 + chunk].copy_(values.view(c.shape[0], n, kb * 32)[:, :, :k])
        del c, nibbles, values


def mxfp4_expert_weights(artifact, tensors):
    """`tensors` (by name) with the MXFP4 experts of an artifact compiled with
    --expert-weights=mxfp4 put in: moe-quantize-experts-mxfp4 names the cast of
    weight NAME NAME.e2m1 and its scales NAME.e8m0_scales; NAME itself is then no
    longer in the artifact. Also {NAME: (codes, scales)} of each cast weight."""
    _, layout = read_layout(artifact)
    out, cast = dict(tensors), {}
    for name, dtype, _, _, _ in layout:
        if dtype != "f4e2m1":
            continue
        if not name.endswith(".e2m1") or name[:-len(".e2m1")] not in tensors:
            raise ValueError(f"{artifact}: e2m1 weight {name} is not NAME.e2m1 of a given NAME")
        source = name[:-len(".e2m1")]
        cast[source] = quantize_mxfp4(tensors[source])
        out[name], out[source + ".e8m0_scales"] = cast[source]
        del out[source]
    return out, cast


def write_weights(artifact, tensors):
    """Write DIR/weights.bin from `tensors`: a list in manifest order or a dict keyed
    by the manifest's weight names; returns its path."""
    total, layout = read_layout(artifact)
    if isinstance(tensors, dict):
        names = [w[0] for w in layout]
        if sorted(tensors) != sorted(names):
            raise ValueError(f"the manifest lays out {names}, given {sorted(tensors)}")
        tensors = [tensors[n] for n in names]
    if len(tensors) != len(layout):
        raise ValueError(f"the manifest lays out {len(layout)} weights, {len(tensors)} given")
    path = os.path.join(artifact, "weights.bin")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"MOECWTS\0" + struct.pack("<IIQQ", 1, 0, len(layout), total) + bytes(32))
        at = 64
        for (name, dtype, shape, offset, size), t in zip(layout, tensors):
            f.write(bytes(offset - at))
            _write(f, t, name, dtype, shape, size)
            at = offset + size
        f.write(bytes(total - at))
    os.replace(tmp, path)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("artifact")
    p.add_argument("--splat", action="append", required=True, metavar="[NAME=]V",
                   help="every element of weight NAME (of every other weight without NAME=) is V")
    a = p.parse_args()
    _, layout = read_layout(a.artifact)
    every, named = None, {}
    for item in a.splat:
        if "=" in item:
            name, value = item.split("=", 1)
            named[name] = float(value)
        else:
            every = float(item)
    values = [named.get(w[0], every) for w in layout]
    if None in values:
        p.error("no value for " + ", ".join(w[0] for w, v in zip(layout, values) if v is None))
    write_weights(a.artifact, [Splat(v) for v in values])


if __name__ == "__main__":
    sys.exit(main())
