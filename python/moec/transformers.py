"""Run a loaded transformers model's MoE blocks in moec.

    import moec.transformers
    moec.transformers.compile_experts(model, target="cuda")
    model.generate(...)          # attention in transformers, the MoE blocks in moec

`compile_experts` replaces each sparse-MoE block (Qwen3-MoE, Mixtral, gpt-oss,
DeepSeek-V3) by a `MoecBlock`: one `moe.layer` (router, experts and, for
DeepSeek-V3, the shared expert) built from the module's own parameters, its
routing and activation from the module's class and config. Blocks of one shape
share one compiled artifact (moec.blocks); each gets its own weights.

Importing this module also registers "moec" as an experts implementation of
transformers (`@use_experts_implementation`), so that

    model.set_experts_implementation("moec")

runs only the experts (`experts(hidden, top_k_index, top_k_weights)`) in moec,
routing staying in transformers; each experts module is compiled at its first
call. docs/python.md has the details.
"""
import os
import shutil
import tempfile

import torch

from . import blocks as _blocks
from ._model import Model

__all__ = ["MoecBlock", "block_spec", "compile_experts", "experts_spec", "prepare", "register"]

_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "relu": "relu"}


def _activation(experts, config):
    act = getattr(config, "hidden_act", None) if config is not None else None
    if act is None:
        act = getattr(getattr(experts, "config", None), "hidden_act", None)
    if act not in _ACTIVATIONS:
        raise NotImplementedError(f"{type(experts).__name__}: activation {act!r} has no moe "
                                  f"equivalent (moec takes {sorted(_ACTIVATIONS)})")
    return _ACTIVATIONS[act]


def _experts_weights(experts):
    """(layout, gate_up [E, 2I, H], down [E, H, I], biases or None, gpt-oss
    activation parameters or None) of a transformers experts module, in moe's
    orientation."""
    gate_up, down = experts.gate_up_proj, experts.down_proj
    transposed = getattr(experts, "is_transposed", False)
    concatenated = getattr(experts, "is_concatenated", True)
    if transposed:  # gpt-oss: [E, H, 2I] and [E, I, H]
        gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
    biases = None
    if getattr(experts, "has_bias", False):
        biases = {"gate_up_bias": experts.gate_up_proj_bias, "down_bias": experts.down_proj_bias}
    gated = getattr(experts, "has_gate", True)
    if not gated:
        raise NotImplementedError(f"{type(experts).__name__}: experts without a gate are not "
                                  "supported yet")
    return ("concatenated" if concatenated else "interleaved"), gate_up, down, biases


def _gpt_oss_activation(experts):
    return dict(activation="silu", alpha=float(experts.alpha), beta=1.0, limit=float(experts.limit))


def experts_spec(experts, top_k, config=None):
    """(BlockSpec, weights) of a transformers experts module with precomputed
    routing: the artifact takes hidden_states, expert_ids, expert_weights."""
    layout, gate_up, down, biases = _experts_weights(experts)
    e, two_i, h = gate_up.shape
    if type(experts).__name__ == "GptOssExperts":
        act = _gpt_oss_activation(experts)
    else:
        act = dict(activation=_activation(experts, config))
    spec = _blocks.BlockSpec(experts=e, hidden=h, inter=two_i // 2, top_k=int(top_k), routing=None,
                             layout=layout, expert_bias=biases is not None, **act)
    weights = {"gate_up": gate_up, "down": down}
    weights.update(biases or {})
    return spec, weights


def block_spec(block):
    """(BlockSpec, weights, returns_tuple) of a sparse-MoE block of Qwen3-MoE,
    Mixtral, gpt-oss or DeepSeek-V3: its router, experts and shared expert as
    one moe.layer. Raises NotImplementedError for another class."""
    name = type(block).__name__
    experts = block.experts
    config = getattr(experts, "config", None) or getattr(block, "config", None)
    layout, gate_up, down, biases = _experts_weights(experts)
    e, two_i, h = gate_up.shape
    weights = {"gate_up": gate_up, "down": down}
    weights.update(biases or {})
    common = dict(experts=e, hidden=h, inter=two_i // 2, layout=layout,
                  expert_bias=biases is not None)
    if name in ("Qwen3MoeSparseMoeBlock", "MixtralSparseMoeBlock"):
        gate = block.gate
        normalize = bool(getattr(gate, "norm_topk_prob", True)) if name.startswith("Qwen3") else True
        spec = _blocks.BlockSpec(top_k=gate.top_k, routing="softmax_topk", normalize=normalize,
                                 activation=_activation(experts, config), **common)
        weights["router"] = gate.weight
        return spec, weights, False
    if name == "GptOssMLP":
        router = block.router
        spec = _blocks.BlockSpec(top_k=router.top_k, routing="topk_softmax", router_bias=True,
                                 **_gpt_oss_activation(experts), **common)
        weights["router"] = router.weight
        weights["router_bias"] = router.bias
        return spec, weights, True
    if name == "DeepseekV3MoE":
        gate, shared = block.gate, block.shared_experts
        spec = _blocks.BlockSpec(
            top_k=gate.top_k, routing="sigmoid_group_topk", normalize=bool(gate.norm_topk_prob),
            num_groups=int(gate.num_group), topk_groups=int(gate.topk_group),
            routed_scaling_factor=float(gate.routed_scaling_factor), correction_bias=True,
            activation=_activation(experts, config), shared_inter=shared.gate_proj.weight.shape[0],
            **common)
        weights["router"] = gate.weight
        weights["correction_bias"] = gate.e_score_correction_bias
        weights["shared_gate_up"] = torch.cat([shared.gate_proj.weight, shared.up_proj.weight])
        weights["shared_down"] = shared.down_proj.weight
        return spec, weights, False
    raise NotImplementedError(f"{name} is not a sparse-MoE block moec knows (Qwen3-MoE, Mixtral, "
                              "gpt-oss, DeepSeek-V3)")


_BLOCKS = ("Qwen3MoeSparseMoeBlock", "MixtralSparseMoeBlock", "GptOssMLP", "DeepseekV3MoE")


def _default_target(module):
    for p in module.parameters():
        return "cuda" if p.is_cuda else "cpu"
    return "cpu"


def _compile_options(target, dtype, expert_weights, options):
    opts = dict(options)
    if target == "cuda" and expert_weights is None and dtype in (torch.bfloat16, torch.float16):
        expert_weights = "bf16"  # the tensor cores; an f32 model keeps f32 experts
    if expert_weights is not None:
        opts["expert_weights"] = expert_weights
    return opts


def _load_block(spec, weights, target, cache, workdir, label, options):
    art = _blocks.compile_block(spec, target, cache=cache, **options)
    keep = workdir is not None
    root = workdir or tempfile.mkdtemp(prefix="moec-block-")
    directory = os.path.join(root, label) if keep else root
    with torch.no_grad():
        _blocks.instantiate(art, weights, directory)
    try:
        return Model(directory)
    finally:
        if not keep:
            # The runtime holds what it needs: weights.bin mapped (or on the
            # GPU) and model.so open. The files need not stay on disk.
            shutil.rmtree(root, ignore_errors=True)


class MoecBlock(torch.nn.Module):
    """A sparse-MoE block run by a moec artifact: hidden_states [..., H] in,
    the block's output out (float32 inside moec; the caller's dtype outside).
    gpt-oss's block returns (output, None) where transformers' returns the
    router scores beside it."""

    def __init__(self, model, spec, returns_tuple=False, source=""):
        super().__init__()
        self.moec = model
        self.spec = spec
        self.returns_tuple = returns_tuple
        self.source = source

    def forward(self, hidden_states):
        shape, dtype = hidden_states.shape, hidden_states.dtype
        x = hidden_states.reshape(-1, shape[-1])
        if x.dtype != torch.float32:
            x = x.float()
        y = self.moec.run({"hidden_states": x})["output"]
        y = y.to(dtype).reshape(shape)
        return (y, None) if self.returns_tuple else y

    def extra_repr(self):
        return f"{self.source} -> {self.moec.path} ({self.moec.target})"


def compile_experts(model, target=None, *, expert_weights=None, cache=None, workdir=None,
                    **options):
    """Replaces every sparse-MoE block of `model` (Qwen3-MoE, Mixtral, gpt-oss,
    DeepSeek-V3; any module of those classes) by a MoecBlock running a moec
    artifact built from the block's parameters, and returns the model.

    target: "cpu" or "cuda" (default: where the model's parameters are).
    expert_weights: "bf16" stores the experts in bf16 (CUDA: tensor cores);
    default bf16 for a CUDA target when the experts are bf16 or f16, else f32.
    cache: where compiled shapes are kept (moec.blocks.cache_dir()).
    workdir: keep each block's artifact directory there (default: a temporary
    one, removed once loaded). Other keywords are flags of `moec compile`
    (max_tokens=2048, expert_outputs="bf16", ...). The replaced modules are
    dropped, so their parameters are freed unless referenced elsewhere. An
    unsupported block raises before any block is replaced."""
    names = [n for n, m in model.named_modules() if type(m).__name__ in _BLOCKS]
    if not names:
        raise ValueError(f"{type(model).__name__} has no sparse-MoE block moec knows "
                         f"({', '.join(_BLOCKS)})")
    target = target or _default_target(model)
    for name in names:  # refuses an unsupported block before anything changes
        block_spec(model.get_submodule(name))
    for index, name in enumerate(names):
        block = model.get_submodule(name)
        spec, weights, returns_tuple = block_spec(block)
        opts = _compile_options(target, block.experts.gate_up_proj.dtype, expert_weights, options)
        label = f"{index:03d}-{name.replace('.', '_')}"
        moec_model = _load_block(spec, weights, target, cache, workdir, label, opts)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, MoecBlock(moec_model, spec, returns_tuple, type(block).__name__))
        del block, weights
        if target == "cuda" and torch.cuda.is_available():
            # The replaced block's parameters go back to the driver, where the
            # next block's upload (cudaMalloc) finds them.
            torch.cuda.empty_cache()
    return model


def prepare(model, target, *, expert_weights=None, cache=None, experts_interface=False,
            **options):
    """Compiles the block shapes `compile_experts(model, target, ...)` (or,
    with experts_interface=True, set_experts_implementation("moec")) will
    need into `cache`, without loading anything: the model may be on the meta
    device, and the cache can then travel to a machine without the compiler
    (a GPU machine; $MOEC_CACHE_DIR there). Returns the artifacts' paths."""
    found = [m for _, m in model.named_modules() if type(m).__name__ in _BLOCKS]
    if not found:
        raise ValueError(f"{type(model).__name__} has no sparse-MoE block moec knows")
    paths = []
    for block in found:
        if experts_interface:
            top_k = (block.router if hasattr(block, "router") else block.gate).top_k
            spec, _ = experts_spec(block.experts, top_k, getattr(block.experts, "config", None))
            opts = _compile_options(target, block.experts.gate_up_proj.dtype, None, {})
        else:
            spec, _, _ = block_spec(block)
            opts = _compile_options(target, block.experts.gate_up_proj.dtype, expert_weights,
                                    options)
        path = _blocks.compile_block(spec, target, cache=cache, **opts)
        if path not in paths:
            paths.append(path)
    return paths


# -- transformers' experts interface -------------------------------------------

def moec_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """The "moec" experts implementation: `self` is a transformers experts
    module, compiled at its first call (target: where hidden_states are)."""
    state = getattr(self, "_moec", None)
    if state is None:
        target = "cuda" if hidden_states.is_cuda else "cpu"
        spec, weights = experts_spec(self, top_k_index.shape[-1], getattr(self, "config", None))
        opts = _compile_options(target, self.gate_up_proj.dtype, None, {})
        state = self._moec = _load_block(spec, weights, target, None, None, "experts", opts)
    x = hidden_states if hidden_states.dtype == torch.float32 else hidden_states.float()
    ids = top_k_index if top_k_index.dtype == torch.int64 else top_k_index.to(torch.int64)
    w = top_k_weights if top_k_weights.dtype == torch.float32 else top_k_weights.float()
    y = state.run({"hidden_states": x, "expert_ids": ids, "expert_weights": w})["output"]
    return y.to(hidden_states.dtype)


def register():
    """Registers "moec" in transformers' experts interface (done at import):
    model.set_experts_implementation("moec") then runs the experts in moec."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    ALL_EXPERTS_FUNCTIONS.register("moec", moec_experts_forward)


try:
    register()
except ImportError:  # a transformers without the experts interface
    pass
