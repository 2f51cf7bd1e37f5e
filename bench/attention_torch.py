#!/usr/bin/env python3
"""torch's scaled_dot_product_attention beside moec's attention kernels.

Reads the table that moec-bench-attention wrote (RESULTS.tsv), times torch's
SDPA on the same shapes the same way (bf16, one call per layer for as many
layers as moec's case had, captured in one CUDA graph and replayed, the time
over the calls) and prints both with the ratio torch time / moec time (above
1: moec faster). Decode: q [B, H, 1, D] against K, V [B, Hkv, L, D] (GQA by
enable_gqa); prefill: is_causal over [B, H, T, D]. SDPA has no sinks and no
sliding window, so gpt-oss's rows compare moec's attention with sinks to
torch's without, and moec's windowed layers have no torch row. The backend
is FlashAttention where torch takes the shape (the printed name says which
ran otherwise).

    python3 bench/attention_torch.py RESULTS.tsv [OUT.txt]
"""

import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {  # heads, kv heads, query/key dim, value dim
    "qwen3": (32, 4, 128, 128),
    "mixtral": (32, 8, 128, 128),
    "gpt-oss": (64, 8, 64, 64),
    "deepseek-v3": (128, 128, 192, 128),
}
BACKENDS = [
    ("flash", SDPBackend.FLASH_ATTENTION),
    ("cudnn", SDPBackend.CUDNN_ATTENTION),
    ("efficient", SDPBackend.EFFICIENT_ATTENTION),
]


def layers_for(slot_bytes):
    return min(max(int(256e6 / slot_bytes) + 1, 1), 32)


def time_torch(name, kind, batch, tokens, length):
    heads, kv_heads, dq, dv = SHAPES[name]
    # moec's slot: keys (kv_heads * key dim + shared) and values, bf16.
    key_columns = kv_heads * 128 + 64 if name == "deepseek-v3" else kv_heads * dq
    layers = layers_for(batch * length * (key_columns + kv_heads * dv) * 2)
    dev = torch.device("cuda")
    q = torch.randn(batch, heads, tokens, dq, device=dev, dtype=torch.bfloat16) * 0.5
    ks = [torch.rand(batch, kv_heads, length, dq, device=dev, dtype=torch.bfloat16) * 2 - 1
          for _ in range(layers)]
    vs = [torch.rand(batch, kv_heads, length, dv, device=dev, dtype=torch.bfloat16) * 2 - 1
          for _ in range(layers)]
    causal = kind == "prefill"
    for backend_name, backend in BACKENDS:
        try:
            with sdpa_kernel(backend):
                def step():
                    for k, v in zip(ks, vs):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                       enable_gqa=heads != kv_heads)
                step()
                torch.cuda.synchronize()
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    step()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step()
        except RuntimeError as error:
            print(f"  ({name} {kind}: {backend_name} refused: {str(error).splitlines()[0][:100]})")
            continue
        for _ in range(3):
            graph.replay()
        repeats = 5 if causal else 20
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            graph.replay()
        stop.record()
        stop.synchronize()
        us = start.elapsed_time(stop) * 1e3 / (repeats * layers)
        del graph, ks, vs, q
        torch.cuda.empty_cache()
        return us, backend_name
    return None, None


def main():
    # SDPA warns of every backend it passes over; the table says which ran.
    warnings.filterwarnings("ignore", category=UserWarning)
    rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
    out = open(sys.argv[2], "w") if len(sys.argv) > 2 else None

    def say(text):
        print(text, flush=True)
        if out:
            out.write(text + "\n")

    say(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    say("| case | shape | cache | batch | tokens | length | moec us | moec | torch us | torch | "
        "torch backend | torch / moec time |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, name, dtype, batch, tokens, length, us, metric in rows:
        batch, tokens, length, us, metric = int(batch), int(tokens), int(length), float(us), float(metric)
        unit = "TB/s" if kind == "decode" else "TFLOP/s"
        torch_us, backend = None, None
        if name in SHAPES and dtype == "bf16":
            torch_us, backend = time_torch(name, kind, batch, tokens, length)
        if torch_us:
            torch_metric = metric * us / torch_us
            say(f"| {kind} | {name} | {dtype} | {batch} | {tokens} | {length} | {us:.1f} | "
                f"{metric:.2f} {unit} | {torch_us:.1f} | {torch_metric:.2f} {unit} | {backend} | "
                f"{torch_us / us:.2f} |")
        else:
            say(f"| {kind} | {name} | {dtype} | {batch} | {tokens} | {length} | {us:.1f} | "
                f"{metric:.2f} {unit} | - | - | - | - |")


if __name__ == "__main__":
    main()
