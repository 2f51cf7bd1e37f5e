#!/usr/bin/env python3
"""Make the .npz inputs and expected outputs of the interpreter's lit tests (test/Interpreter/*.mlir).

Expected outputs come from numpy, never from moec-interp: the float64 references of
scripts/fixtures/moe_reference.py (written from the model specs, independently of moec) where one fits, and
`moe_layer` below, a direct numpy transcription of docs/dialect.md, for the configurations that file lacks
(GELU with a gated shared expert and its sigmoid gate). Each configuration's inputs are drawn until the routing
margin (gap between the last chosen and the first rejected selection score, and between kept and dropped
groups) is at least 1e-3, so f32 rounding of the logits cannot flip a choice.

Files: <config>.inputs.npz (keyed by the functions' onnx.name argument names) and <config>.expected.npz (key
"out"), plus bad-*.npz for the error tests.

Usage: .venv/bin/python test/Interpreter/Inputs/make_inputs.py     (rewrites the files beside this script)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "fixtures"))
import moe_reference as ref  # noqa: E402

T, H, E, I, K = 6, 16, 8, 8, 2
MIN_MARGIN = 1e-3


def erf(x):
    from math import erf as scalar_erf
    return np.vectorize(scalar_erf)(x)


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def qwen2_gelu_shared(x, logits, gate_up, down, shared_gate_up, shared_down, shared_gate, top_k):
    """softmax_topk without renormalisation, GELU-GLU experts (concatenated), plus the shared expert scaled by
    sigmoid(shared_gate · x): docs/dialect.md's moe.layer, in float64."""
    p = ref.softmax(logits)
    w, idx = ref.topk(p, top_k)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(top_k):
            e = idx[t, k]
            gu = gate_up[e] @ x[t]
            half = gu.shape[0] // 2
            out[t] += w[t, k] * (down[e] @ (gelu(gu[:half]) * gu[half:]))
    sgu = x @ shared_gate_up.T
    half = sgu.shape[1] // 2
    shared = (gelu(sgu[:, :half]) * sgu[:, half:]) @ shared_down.T
    gate = ref.sigmoid(x @ shared_gate.T)
    return out + gate * shared, ref.selection_margin(p, top_k)


def f32(rng, *shape, std=1.0):
    return (rng.standard_normal(shape) * std).astype(np.float32)


def make_mixtral(rng):
    x, wr = f32(rng, T, H), f32(rng, E, H, std=0.5)
    gu, d = f32(rng, E, 2 * I, H, std=0.3), f32(rng, E, H, I, std=0.3)
    out, info = ref.mixtral(x, wr, gu, d, K)
    return dict(x=x, router_weight=wr, gate_up=gu, down=d), out, info["margin"]


def make_gpt_oss(rng):
    x, wr, br = f32(rng, T, H), f32(rng, E, H, std=0.5), f32(rng, E, std=0.5)
    # moe_reference takes gpt-oss's [in, out] orientation; the dialect's weights are [out, in].
    gu_in_out, gub = f32(rng, E, H, 2 * I, std=0.8), f32(rng, E, 2 * I, std=0.5)
    d_in_out, db = f32(rng, E, I, H, std=0.3), f32(rng, E, H, std=0.5)
    out, info = ref.gpt_oss(x, wr, br, gu_in_out, gub, d_in_out, db, K, alpha=1.702, limit=7.0)
    assert info["gate_clamped"] > 0 and info["up_clamped"] > 0, "the clamps must be exercised"
    inputs = dict(x=x, router_weight=wr, router_bias=br, gate_up=np.ascontiguousarray(gu_in_out.transpose(0, 2, 1)),
                  gate_up_bias=gub, down=np.ascontiguousarray(d_in_out.transpose(0, 2, 1)), down_bias=db)
    return inputs, out, info["margin"]


def make_deepseek(rng):
    x, wr, bias = f32(rng, T, H), f32(rng, E, H, std=0.5), f32(rng, E, std=0.3)
    gu, d = f32(rng, E, 2 * I, H, std=0.3), f32(rng, E, H, I, std=0.3)
    sg, su, sd = f32(rng, I, H, std=0.3), f32(rng, I, H, std=0.3), f32(rng, H, I, std=0.3)
    out, info = ref.deepseek_v3(x, wr, bias, gu, d, sg, su, sd, top_k=3, n_group=4, topk_group=2,
                                routed_scaling_factor=2.5)
    assert info["tokens_changed_with_zero_fill_instead_of_neg_inf"] + info["tokens_changed_without_group_limit"] > 0, \
        "the group limit must matter"
    inputs = dict(x=x, router_weight=wr, correction_bias=bias, gate_up=gu, down=d,
                  shared_gate_up=np.concatenate([sg, su]), shared_down=sd)
    return inputs, out, min(info["margin"], info["group_margin"])


def make_separate(rng):
    """onnxruntime's SwiGLU with fc3 (swiglu_fusion 0): gate and up apart, with biases and clamps."""
    x, logits = f32(rng, T, H), f32(rng, T, E, std=1.5)
    fc1, fc1b, fc3, fc3b = f32(rng, E, I, H, std=0.8), f32(rng, E, I), f32(rng, E, I, H, std=0.8), f32(rng, E, I)
    fc2, fc2b = f32(rng, E, H, I, std=0.3), f32(rng, E, H)
    out, info = ref.ort_moe(x, logits, fc1, fc1b, fc2, fc2b, K, 1, "swiglu", swiglu_fusion=0, swiglu_limit=3.0,
                            alpha=1.5, beta=0.5, fc3_w=fc3, fc3_b=fc3b)
    inputs = dict(x=x, router_logits=logits, gate=fc1, gate_bias=fc1b, up=fc3, up_bias=fc3b, down=fc2,
                  down_bias=fc2b)
    return inputs, out, info["margin"]


def make_relu_f16(rng):
    """Ungated ReLU experts in f16: moe.layer rounds once, so the f64 reference rounded to f16 is the answer
    up to one f16 rounding step."""
    h = lambda *s, std=1.0: (rng.standard_normal(s) * std).astype(np.float16)
    x, logits = h(T, H), h(T, E, std=1.5)
    fc1, fc1b, fc2, fc2b = h(E, I, H, std=0.5), h(E, I), h(E, H, I, std=0.5), h(E, H)
    out, info = ref.ort_moe(x, logits, fc1, fc1b, fc2, fc2b, K, 0, "relu")
    inputs = dict(x=x, router_logits=logits, up=fc1, up_bias=fc1b, down=fc2, down_bias=fc2b)
    return inputs, out.astype(np.float16), info["margin"]


def make_qwen2(rng):
    x, logits = f32(rng, T, H), f32(rng, T, E, std=1.5)
    gu, d = f32(rng, E, 2 * I, H, std=0.3), f32(rng, E, H, I, std=0.3)
    sgu, sd, sg = f32(rng, 2 * 12, H, std=0.3), f32(rng, H, 12, std=0.3), f32(rng, 1, H, std=0.3)
    f64 = lambda a: a.astype(np.float64)
    out, margin = qwen2_gelu_shared(f64(x), f64(logits), f64(gu), f64(d), f64(sgu), f64(sd), f64(sg), 3)
    inputs = dict(x=x, router_logits=logits, gate_up=gu, down=d, shared_gate_up=sgu, shared_down=sd,
                  shared_gate=sg)
    return inputs, out, margin


CONFIGS = {"mixtral": make_mixtral, "gpt_oss": make_gpt_oss, "deepseek": make_deepseek,
           "separate": make_separate, "relu_f16": make_relu_f16, "qwen2": make_qwen2}


def save(name, **arrays):
    np.savez(os.path.join(HERE, name), **arrays)


def main():
    for index, (name, make) in enumerate(CONFIGS.items()):
        for seed in range(1000 * (index + 1), 1000 * (index + 2)):
            try:
                inputs, out, margin = make(np.random.default_rng(seed))
            except AssertionError:
                continue
            if margin >= MIN_MARGIN:
                break
        else:
            raise SystemExit(f"{name}: no seed with a routing margin >= {MIN_MARGIN}")
        dtype = inputs["x"].dtype
        save(f"{name}.inputs.npz", **inputs)
        save(f"{name}.expected.npz", out=np.asarray(out).astype(dtype))
        print(f"{name}: seed {seed}, routing margin {margin:.3g}")

    # Error tests (errors.mlir): @two_args takes x: tensor<?x4xf32> and ids: tensor<2x3xi32>.
    x = np.ones((5, 4), np.float32)
    ids = np.zeros((2, 3), np.int64)
    save("bad-missing.npz", x=x)
    save("bad-unknown.npz", x=x, ids=ids, idz=ids)
    save("bad-rank.npz", x=np.ones((5, 4, 1), np.float32), ids=ids)
    save("bad-static-dim.npz", x=x, ids=np.zeros((3, 3), np.int64))
    save("bad-float-for-int.npz", x=x, ids=np.zeros((2, 3), np.float32))
    save("bad-int-for-float.npz", x=np.ones((5, 4), np.int64), ids=ids)
    save("bad-int-range.npz", x=x, ids=np.array([[0, 1, 2], [3, 4, 1 << 40]], np.int64))
    save("good-f64-and-i64.npz", x=np.full((5, 4), 0.1, np.float64), ids=ids + 1)
    # An ONNX model with an op the interpreter lacks: the error names the node.
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="my_einsum", equation="ij,jk->ik")
    vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 2])
    graph = helper.make_graph([node], "einsum", [vi("a"), vi("b")], [vi("y")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10),
              os.path.join(HERE, "einsum.onnx"))
    save("einsum.npz", a=np.eye(2, dtype=np.float32), b=np.eye(2, dtype=np.float32))
    # rounding.mlir: numpy has no bf16, so bf16 arguments take f32 arrays.
    save("bf16-from-f32.npz", x=np.array([1.0, 257.0, 259.0, 1e-3], np.float32))


if __name__ == "__main__":
    main()
