#!/usr/bin/env python3
"""Make the .npz inputs and expected outputs of test/Interpreter/model-ops.mlir.

The ops of whole models (moe.embedding, moe.rms_norm, moe.rotary, moe.attention) against numpy, never against
moec-interp. The references are written from the usual model code, not from the interpreter's loops:

* rms_norm: transformers' LlamaRMSNorm on the columns reshaped to [M, K/G, G] (Qwen3's per-head q/k norm when
  G < K), times (weight_offset + weight) (Gemma's 1 + weight);
* rotary: the "rotate half" form as transformers writes it (cos and sin of cat(freqs, freqs)) and the
  interleaved form as complex multiplication (DeepSeek's view_as_complex), on the slice [offset, offset + R) of
  every head, times YaRN's scale;
* attention: the cache-free causal forward of all the function's tokens at once: per query head, scores
  against every token of its sequence with a position in (p - window, p], a sink logit as one more column of
  the softmax that is then dropped, and key_shared appended to every key head.

The tests run the tokens in steps (a prefill of two interleaved sequences, then a decode step), so the
interpreter's KV cache must give exactly the cache-free answer.

Files: model_<config>.inputs.npz (keyed by the functions' onnx.name argument names) and
model_<config>.expected.npz.

Usage: .venv/bin/python test/Interpreter/Inputs/make_model_inputs.py     (rewrites the files beside this script)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "fixtures"))
import moe_reference as ref  # noqa: E402

MIN_MARGIN = 1e-3


def f32(rng, *shape, std=1.0):
    return (rng.standard_normal(shape) * std).astype(np.float32)


def f64(a):
    return np.asarray(a, np.float64)


def rounded(a):
    """What an op with an f32 result hands on: its f64 value rounded once."""
    return np.asarray(a, np.float64).astype(np.float32).astype(np.float64)


# --- references ---------------------------------------------------------------------------------------------


def rms_norm(x, weight, eps, offset=0.0):
    x = f64(x)
    m, k = x.shape
    g = weight.shape[0]
    groups = x.reshape(m, k // g, g)
    variance = np.mean(groups * groups, axis=-1, keepdims=True)
    return (groups / np.sqrt(variance + eps) * (offset + f64(weight))).reshape(m, k)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotary(x, positions, inv_freq, head_dim, offset=0, interleaved=False, scale=1.0):
    x = f64(x)
    n, c = x.shape
    heads = x.reshape(n, c // head_dim, head_dim).copy()
    r = 2 * inv_freq.shape[0]
    part = heads[:, :, offset:offset + r]
    freqs = f64(positions)[:, None] * f64(inv_freq)[None, :]  # [N, R/2]
    if interleaved:
        z = (part[..., 0::2] + 1j * part[..., 1::2]) * (np.exp(1j * freqs) * scale)[:, None, :]
        out = np.empty_like(part)
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
    else:
        emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]
        out = part * (np.cos(emb) * scale) + rotate_half(part) * (np.sin(emb) * scale)
    heads[:, :, offset:offset + r] = out
    return heads.reshape(n, c)


def causal_attention(q, k, v, positions, sequences, num_heads, num_kv_heads, scale, window=0, sinks=None,
                     key_shared=None):
    """All tokens at once, no cache: token i sees token j of its sequence when p_j <= p_i (and p_j > p_i - window)."""
    q, k, v = f64(q), f64(k), f64(v)
    n = q.shape[0]
    d = q.shape[1] // num_heads
    dv = v.shape[1] // num_kv_heads
    kh = k.reshape(n, num_kv_heads, -1)
    if key_shared is not None:
        kh = np.concatenate([kh, np.broadcast_to(f64(key_shared)[:, None, :], (n, num_kv_heads, key_shared.shape[1]))],
                            axis=-1)
    assert kh.shape[-1] == d
    vh = v.reshape(n, num_kv_heads, dv)
    qh = q.reshape(n, num_heads, d)
    pos, seq = np.asarray(positions), np.asarray(sequences)
    visible = (seq[:, None] == seq[None, :]) & (pos[None, :] <= pos[:, None])
    if window > 0:
        visible &= pos[None, :] > pos[:, None] - window
    out = np.zeros((n, num_heads, dv))
    group = num_heads // num_kv_heads
    for h in range(num_heads):
        scores = scale * qh[:, h, :] @ kh[:, h // group, :].T  # [N, N]
        scores = np.where(visible, scores, -np.inf)
        if sinks is not None:
            scores = np.concatenate([scores, np.full((n, 1), float(sinks[h]))], axis=1)
        scores = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p[:, :n] @ vh[:, h // group, :]
    return out.reshape(n, num_heads * dv)


# --- configurations -----------------------------------------------------------------------------------------

# Two sequences interleaved in the prefill (sequence ids 0 and 1000: the interpreter has no max_batch), then a
# decode step that continues both, in the opposite order.
PREFILL_SEQ = np.array([0, 1000, 0, 0, 1000, 0], np.int64)
PREFILL_POS = np.array([0, 0, 1, 2, 1, 3], np.int64)
DECODE_SEQ = np.array([1000, 0], np.int64)
DECODE_POS = np.array([2, 4], np.int64)


def make_embedding(rng):
    table = f32(rng, 10, 6)
    ids = np.array([3, 0, 9, 3, 7], np.int64)
    return dict(ids=ids, table=table), dict(out=table[ids])


def make_rms_norm(rng):
    x = f32(rng, 5, 12, std=2.0)
    w_group, w_row = f32(rng, 4, std=0.3), f32(rng, 12)
    grouped = rms_norm(x, w_group, 1e-5, offset=1.0)
    row = rms_norm(x, w_row, 1e-6)
    return dict(x=x, w_group=w_group, w_row=w_row), dict(grouped=grouped, row=row)


def make_rotary(rng):
    x = f32(rng, 5, 32)
    positions = np.array([0, 3, 7, 1000, 2], np.int64)
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, 6, 2) / 6)).astype(np.float32)  # R = 6 of a head of 16
    inv_freq_full = (1.0 / 500000.0 ** (np.arange(0, 16, 2) / 16)).astype(np.float32)
    outputs = dict(
        half=rotary(x, positions, inv_freq, 16, offset=4, scale=1.25),
        interleaved=rotary(x, positions, inv_freq, 16, offset=4, interleaved=True, scale=1.25),
        full=rotary(x, positions, inv_freq_full, 16))
    return dict(x=x, positions=positions, inv_freq=inv_freq, inv_freq_full=inv_freq_full), outputs


def attention_case(rng, heads, kv_heads, dk, dv, scale, window=0, sinks=False, dr=0):
    n = len(PREFILL_POS) + len(DECODE_POS)
    q = f32(rng, n, heads * (dk + dr))
    k = f32(rng, n, kv_heads * dk)
    v = f32(rng, n, kv_heads * dv)
    ks = f32(rng, n, dr) if dr else None
    s = f32(rng, heads) if sinks else None
    positions = np.concatenate([PREFILL_POS, DECODE_POS])
    sequences = np.concatenate([PREFILL_SEQ, DECODE_SEQ])
    out = causal_attention(q, k, v, positions, sequences, heads, kv_heads, scale, window, s, ks)
    p = len(PREFILL_POS)
    inputs = dict(query=q[:p], key=k[:p], value=v[:p], positions=PREFILL_POS, sequences=PREFILL_SEQ,
                  query_decode=q[p:], key_decode=k[p:], value_decode=v[p:], positions_decode=DECODE_POS,
                  sequences_decode=DECODE_SEQ)
    if dr:
        inputs.update(key_shared=ks[:p], key_shared_decode=ks[p:])
    if sinks:
        inputs.update(sinks=s)
    return inputs, dict(prefill=out[:p], decode=out[p:])


def make_attention(rng):
    return attention_case(rng, heads=4, kv_heads=2, dk=8, dv=6, scale=0.35)


def make_attention_window_sinks(rng):
    return attention_case(rng, heads=4, kv_heads=2, dk=8, dv=6, scale=0.35, window=2, sinks=True)


def make_attention_key_shared(rng):
    return attention_case(rng, heads=4, kv_heads=2, dk=6, dv=5, scale=0.3, dr=4, sinks=True, window=3)


def make_forward(rng):
    """One Qwen3-MoE-like decoder layer and the head, run as a prefill: every op rounds its f32 result once, as
    the interpreter does, so the reference rounds after each op too."""
    V, H, HQ, HKV, D, E, I, K = 32, 16, 4, 2, 4, 8, 8, 2
    ids = np.array([5, 17, 3, 31, 0, 17], np.int64)
    positions, sequences = np.array([0, 0, 1, 1, 2, 3], np.int64), np.array([0, 1, 0, 1, 0, 0], np.int64)
    w = dict(embed=f32(rng, V, H), input_norm=1.0 + f32(rng, H, std=0.1), wq=f32(rng, HQ * D, H, std=0.4),
             wk=f32(rng, HKV * D, H, std=0.4), wv=f32(rng, HKV * D, H, std=0.4), q_norm=1.0 + f32(rng, D, std=0.1),
             k_norm=1.0 + f32(rng, D, std=0.1), wo=f32(rng, H, HQ * D, std=0.4),
             post_norm=1.0 + f32(rng, H, std=0.1), router=f32(rng, E, H, std=0.5),
             gate_up=f32(rng, E, 2 * I, H, std=0.3), down=f32(rng, E, H, I, std=0.3),
             final_norm=1.0 + f32(rng, H, std=0.1), lm_head=f32(rng, V, H, std=0.4))
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, D, 2) / D)).astype(np.float32)
    x = f64(w["embed"])[ids]
    h = rounded(rms_norm(x, w["input_norm"], 1e-6))
    q = rounded(h @ f64(w["wq"]).T)
    k = rounded(h @ f64(w["wk"]).T)
    v = rounded(h @ f64(w["wv"]).T)
    q = rounded(rms_norm(q, w["q_norm"], 1e-6))
    k = rounded(rms_norm(k, w["k_norm"], 1e-6))
    q = rounded(rotary(q, positions, inv_freq, D))
    k = rounded(rotary(k, positions, inv_freq, D))
    a = rounded(causal_attention(q, k, v, positions, sequences, HQ, HKV, D ** -0.5))
    x = rounded(x + rounded(a @ f64(w["wo"]).T))
    h = rounded(rms_norm(x, w["post_norm"], 1e-6))
    moe, info = ref.mixtral(h, w["router"], w["gate_up"], w["down"], K)
    x = rounded(x + rounded(moe))
    h = rounded(rms_norm(x, w["final_norm"], 1e-6))
    logits = h @ f64(w["lm_head"]).T
    inputs = dict(input_ids=ids, positions=positions, sequences=sequences, inv_freq=inv_freq, **w)
    return inputs, dict(logits=logits), info["margin"]


# Configuration: (make, seed). attention and attention_window_sinks share their query, key and value (the same
# seed, drawn first), so that the one's expected outputs tell the other's window and sinks apart.
CONFIGS = {"embedding": (make_embedding, 7000), "rms_norm": (make_rms_norm, 7001), "rotary": (make_rotary, 7002),
           "attention": (make_attention, 7003), "attention_window_sinks": (make_attention_window_sinks, 7003),
           "attention_key_shared": (make_attention_key_shared, 7005)}


def save(name, arrays, dtype=None):
    arrays = {key: np.asarray(value).astype(dtype) if dtype and np.asarray(value).dtype.kind == "f" else value
              for key, value in arrays.items()}
    np.savez(os.path.join(HERE, name), **arrays)


def main():
    for name, (make, seed) in CONFIGS.items():
        inputs, outputs = make(np.random.default_rng(seed))
        save(f"model_{name}.inputs.npz", inputs)
        save(f"model_{name}.expected.npz", outputs, np.float32)
    for seed in range(8000, 9000):
        inputs, outputs, margin = make_forward(np.random.default_rng(seed))
        if margin >= MIN_MARGIN:
            break
    else:
        raise SystemExit(f"forward: no seed with a routing margin >= {MIN_MARGIN}")
    save("model_forward.inputs.npz", inputs)
    save("model_forward.expected.npz", outputs, np.float32)
    print(f"forward: seed {seed}, routing margin {margin:.3g}")


if __name__ == "__main__":
    main()
