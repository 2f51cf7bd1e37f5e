"""MoE blocks as moe-dialect MLIR, compiled once per shape, weights filled per block.

A block is one `moe.layer` (docs/dialect.md) whose weights are named splat
constants (`arith.constant {moec.name = "gate_up"} dense<0.02>`): only their
shapes and the attributes reach the compiler, which runs with
`--weights=external` and writes no weights.bin (docs/artifact.md). The weights
are then written into each block's own copy of the artifact by name
(`write_weights`), in moe's orientation ([out, in]):

  router [E, H], router_bias [E], correction_bias [E],
  gate_up [E, 2I, H] (concatenated: rows [0, I) gate; interleaved: even rows gate),
  gate_up_bias [E, 2I], down [E, H, I], down_bias [E, H],
  shared_gate_up [2Is, H], shared_down [H, Is].

These are the names bench/make_block_mlir.py and bench/write_weights.py use.
"""
import dataclasses
import hashlib
import os
import shutil
import struct

import numpy as np

from ._compiler import CompileError, find_compiler
from ._compiler import compile as _compile

_HEADER = b"MOECWTS\0"


@dataclasses.dataclass(frozen=True)
class BlockSpec:
    """What a block computes. `routing` None means precomputed routing: the
    artifact takes `expert_ids` [T, K] (int64) and `expert_weights` [T, K]
    (float32) beside `hidden_states` [T, H], as transformers' experts modules do."""
    experts: int
    hidden: int
    inter: int
    top_k: int
    routing: str = "softmax_topk"       # softmax_topk | topk_softmax | sigmoid_group_topk | None
    normalize: bool = False
    num_groups: int = 1
    topk_groups: int = 1
    routed_scaling_factor: float = 1.0
    activation: str = "silu"            # silu | gelu | relu | identity
    alpha: float = 1.0
    beta: float = 0.0
    limit: float = float("inf")
    layout: str = "concatenated"        # concatenated | interleaved
    router_bias: bool = False
    correction_bias: bool = False
    expert_bias: bool = False           # gate_up_bias and down_bias
    shared_inter: int = 0               # a shared expert of this intermediate size (0: none)

    def weight_shapes(self):
        """{name: shape} of the block's weights, in the order of the MLIR."""
        e, h, i = self.experts, self.hidden, self.inter
        shapes = {}
        if self.routing is not None:
            shapes["router"] = (e, h)
            if self.router_bias:
                shapes["router_bias"] = (e,)
            if self.correction_bias:
                shapes["correction_bias"] = (e,)
        shapes["gate_up"] = (e, 2 * i, h)
        shapes["down"] = (e, h, i)
        if self.expert_bias:
            shapes["gate_up_bias"] = (e, 2 * i)
            shapes["down_bias"] = (e, h)
        if self.shared_inter:
            shapes["shared_gate_up"] = (2 * self.shared_inter, h)
            shapes["shared_down"] = (h, self.shared_inter)
        return shapes


def _float(x):
    """An MLIR float literal (always with a '.' or an exponent after one)."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{x} has no MLIR float literal here")
    return "%.17e" % x


def _tensor(*dims):
    return "tensor<" + "x".join(str(d) for d in dims) + "xf32>"


def block_mlir(spec, name="block"):
    """The moe-dialect text of `spec` with splat weights (shapes only)."""
    s = spec
    shapes = s.weight_shapes()
    operands = []
    role = {"router": "router_weight", "router_bias": "router_bias",
            "correction_bias": "correction_bias", "gate_up": "gate_up", "down": "down",
            "gate_up_bias": "gate_up_bias", "down_bias": "down_bias",
            "shared_gate_up": "shared_gate_up", "shared_down": "shared_down"}
    args = [f'%hidden_states: {_tensor("?", s.hidden)} {{onnx.name = "hidden_states"}}']
    if s.routing is None:
        args.append(f'%expert_ids: tensor<?x{s.top_k}xi64> {{onnx.name = "expert_ids"}}')
        args.append(f'%expert_weights: {_tensor("?", s.top_k)} {{onnx.name = "expert_weights"}}')
        operands.append(f"expert_ids(%expert_ids : tensor<?x{s.top_k}xi64>)")
        operands.append(f"expert_weights(%expert_weights : {_tensor('?', s.top_k)})")
    for n, shape in shapes.items():
        operands.append(f"{role[n]}(%{n} : {_tensor(*shape)})")
    attrs = []
    if s.routing is None:
        attrs.append(f"routing = #moe.routing<softmax_topk>, top_k = {s.top_k} : i64")
    else:
        attrs.append(f"routing = #moe.routing<{s.routing}>, top_k = {s.top_k} : i64")
        if s.normalize:
            attrs.append("normalize = true")
        if s.routing == "sigmoid_group_topk":
            attrs.append(f"num_groups = {s.num_groups} : i64, topk_groups = {s.topk_groups} : i64")
        if s.routed_scaling_factor != 1.0:
            attrs.append(f"routed_scaling_factor = {_float(s.routed_scaling_factor)} : f64")
    act = [s.activation]
    if s.alpha != 1.0:
        act.append(f"alpha = {_float(s.alpha)}")
    if s.beta != 0.0:
        act.append(f"beta = {_float(s.beta)}")
    if s.limit != float("inf"):
        act.append(f"limit = {_float(s.limit)}")
    attrs.append(f"activation = #moe.activation<{', '.join(act)}>")
    attrs.append(f"gate_up_layout = #moe.gate_up_layout<{s.layout}>")
    lines = [f"// Written by moec.blocks: {s}",
             f"func.func @{name}({', '.join(args)})",
             f'    -> ({_tensor("?", s.hidden)} {{onnx.name = "output"}}) {{']
    for i, (n, shape) in enumerate(shapes.items()):
        lines.append(f'  %{n} = arith.constant {{moec.name = "{n}"}} '
                     f"dense<{0.01 * (i + 1):.2f}> : {_tensor(*shape)}")
    lines.append(f"  %out = moe.layer %hidden_states : {_tensor('?', s.hidden)}")
    lines += [f"           {o}" for o in operands]
    lines.append(f"           {{{', '.join(attrs)}}} -> {_tensor('?', s.hidden)}")
    lines.append(f"  return %out : {_tensor('?', s.hidden)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def cache_dir():
    """Where compiled block shapes are kept: $MOEC_CACHE_DIR, else
    ~/.cache/moec (XDG_CACHE_HOME honoured)."""
    if os.environ.get("MOEC_CACHE_DIR"):
        return os.environ["MOEC_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "moec")


def compile_block(spec, target, cache=None, **options):
    """The artifact (without weights.bin) of `spec` for `target`, compiled once
    and kept under `cache` (cache_dir()) by a hash of its MLIR and options: a
    later call with the same shape finds it there, compiled again only when
    the compiler found now is another build (a stamp beside it records which
    compiled it); where there is no compiler (a cache carried to a GPU
    machine) what the cache holds is used."""
    text = block_mlir(spec)
    options = {k: v for k, v in options.items() if v is not None}
    key = hashlib.sha256(repr((text, target, sorted(options.items()))).encode()).hexdigest()[:24]
    root = os.path.join(cache or cache_dir(), "blocks")
    out = os.path.join(root, key + ".moec")
    stamp = os.path.join(root, key + ".compiler")
    try:
        compiler = find_compiler()
        info = os.stat(compiler)
        identity = f"{os.path.realpath(compiler)} {info.st_size} {info.st_mtime_ns}\n"
    except CompileError:
        compiler = identity = None  # no compiler here: what the cache holds is what runs
    if os.path.isfile(os.path.join(out, "manifest.txt")):
        if identity is None:
            return out
        try:
            with open(stamp) as f:
                if f.read() == identity:
                    return out
        except OSError:
            pass
        # compiled by another build of moec: compile again
    elif compiler is None:
        find_compiler()  # raises: nothing cached, nothing to compile with
    os.makedirs(root, exist_ok=True)
    source = os.path.join(root, key + ".mlir")
    with open(source + ".tmp", "w") as f:
        f.write(text)
    os.replace(source + ".tmp", source)
    _compile(source, target=target, output=out, weights="external", **options)
    with open(stamp + ".tmp", "w") as f:
        f.write(identity)
    os.replace(stamp + ".tmp", stamp)
    return out


def read_layout(artifact):
    """(total bytes, [(name, dtype, shape, offset, bytes)]) of `artifact`'s
    weights.bin, from its manifest."""
    total, layout = None, []
    with open(os.path.join(artifact, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if parts[0] == "weights":
                total = int(parts[2])
            elif parts[0] == "weight":
                name, dtype, shape, offset, size = parts[1:6]
                shape = tuple(int(d) for d in shape.strip("[]").split(",") if d)
                layout.append((name, dtype, shape, int(offset), int(size)))
    if total is None:
        raise ValueError(f"{artifact}/manifest.txt has no 'weights' line")
    return total, layout


def _host_bytes(t, dtype, name, shape):
    """The bytes of tensor `t` (numpy or torch) as manifest dtype `dtype`."""
    if hasattr(t, "detach"):  # torch: converted where it lives, then to the host
        import torch
        t = t.detach()
        if tuple(t.shape) != shape:
            raise ValueError(f"weight {name}: the artifact lays out {list(shape)}, "
                             f"given {list(t.shape)}")
        if dtype == "bf16":
            return t.to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy()
        if dtype == "f32":
            return t.to(torch.float32).contiguous().cpu().numpy()
        raise ValueError(f"weight {name}: dtype {dtype} is not written by moec.blocks")
    a = np.asarray(t)
    if a.shape != shape:
        raise ValueError(f"weight {name}: the artifact lays out {list(shape)}, given {list(a.shape)}")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "f32":
        return a
    if dtype == "bf16":  # rounded to nearest even, as moec's --expert-weights=bf16
        bits = a.view(np.uint32).astype(np.uint64)
        nan = np.isnan(a)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)
    raise ValueError(f"weight {name}: dtype {dtype} is not written by moec.blocks")


def write_weights(artifact, tensors, path=None):
    """Writes `artifact`'s weights.bin (or `path`) from `tensors`, a dict keyed
    by the manifest's weight names (numpy arrays or torch tensors of the
    manifest's shapes, in moe's orientation)."""
    total, layout = read_layout(artifact)
    names = [w[0] for w in layout]
    if sorted(tensors) != sorted(names):
        raise ValueError(f"{artifact} lays out {names}, given {sorted(tensors)}")
    path = path or os.path.join(artifact, "weights.bin")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_HEADER + struct.pack("<IIQQ", 1, 0, len(layout), total) + bytes(32))
        for name, dtype, shape, offset, size in layout:
            data = _host_bytes(tensors[name], dtype, name, shape)
            if data.nbytes != size:
                raise ValueError(f"weight {name}: {data.nbytes} bytes, the manifest says {size}")
            f.seek(offset)
            f.write(memoryview(data).cast("B"))
        f.truncate(total)
    os.replace(tmp, path)
    return path


def instantiate(artifact, tensors, directory):
    """A loadable copy of the shape `artifact` in `directory` with `tensors`
    as its weights: manifest.txt copied, model.so hard-linked where the file
    system allows (one library in memory for all blocks of a shape), weights.bin
    written."""
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(os.path.join(artifact, "manifest.txt"), os.path.join(directory, "manifest.txt"))
    lib = os.path.join(directory, "model.so")
    if os.path.lexists(lib):
        os.remove(lib)
    try:
        os.link(os.path.join(artifact, "model.so"), lib)
    except OSError:
        shutil.copyfile(os.path.join(artifact, "model.so"), lib)
    write_weights(directory, tensors)
    return directory
