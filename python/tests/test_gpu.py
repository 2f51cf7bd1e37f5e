"""The package on a CUDA GPU (ctest python.gpu, label gpu; skipped without a
GPU): a CUDA artifact on torch CUDA tensors, queued on torch's current stream;
compile_experts and the experts interface on CUDA models.

Where there is no compiler (the GPU machine), the shapes come compiled from
$MOEC_CACHE_DIR: `python/tests/test_gpu.py --prepare CACHE` writes them on a
machine with moec and nvcc (bench/python_swap.sh prepare does)."""
import copy
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from conftest import fixture, reference_block, softmax_topk  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import moec  # noqa: E402
import moec.transformers  # noqa: E402
from moec import blocks  # noqa: E402

FAMILIES = ["qwen3_moe", "mixtral", "gpt_oss", "deepseek_v3"]
BLOCK = blocks.BlockSpec(experts=8, hidden=64, inter=32, top_k=2, normalize=True)
MAX_TOKENS = 256


def load(family, dtype=torch.float32, device="cpu"):
    path = fixture("models", family, "checkpoint")
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()


def prepare(cache):
    """Every CUDA shape these tests load, compiled into `cache`."""
    blocks.compile_block(BLOCK, "cuda", cache=cache, max_tokens=MAX_TOKENS)
    for family in FAMILIES:
        for dtype in (torch.float32, torch.bfloat16):
            moec.transformers.prepare(load(family, dtype), "cuda", cache=cache,
                                      max_tokens=MAX_TOKENS)
        moec.transformers.prepare(load(family), "cuda", cache=cache, experts_interface=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--prepare"]:
    prepare(sys.argv[2])
    sys.exit(0)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(scope="module")
def gpu_cache(tmp_path_factory):
    return os.environ.get("MOEC_CACHE_DIR") or str(tmp_path_factory.mktemp("cache"))


def test_cuda_block_on_torch_stream(gpu_cache, tmp_path):
    rng = np.random.default_rng(5)
    gate_up = rng.normal(0, 0.2, (8, 64, 64)).astype(np.float32)
    down = rng.normal(0, 0.2, (8, 64, 32)).astype(np.float32)
    router = rng.normal(0, 1, (8, 64)).astype(np.float32)
    art = blocks.compile_block(BLOCK, "cuda", cache=gpu_cache, max_tokens=MAX_TOKENS)
    m = moec.load(blocks.instantiate(art, {"router": router, "gate_up": gate_up, "down": down},
                                     str(tmp_path / "block")))
    assert m.target == "cuda"
    x = rng.normal(0, 1, (37, 64)).astype(np.float32)
    ids, w = softmax_topk(x, router, 2, True)
    expected = reference_block(x, gate_up, down, ids, w)
    # numpy in, numpy out (host memory, moec_run)
    np.testing.assert_allclose(m(x), expected, rtol=1e-4, atol=1e-4)
    # torch CUDA tensors on a side stream: the run waits for the stream's work
    # (a sleep, then the copy that fills x) and the stream's later work waits
    # for the run.
    stream = torch.cuda.Stream()
    xd = torch.zeros(37, 64, device="cuda")
    host = torch.from_numpy(x).pin_memory()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)
        xd.copy_(host, non_blocking=True)
        y = m(xd)
        z = y * 2
    assert isinstance(y, torch.Tensor) and y.device.type == "cuda"
    stream.synchronize()
    np.testing.assert_allclose(z.cpu().numpy() / 2, expected, rtol=1e-4, atol=1e-4)
    # preallocated output: written in place
    out = torch.full((37, 64), float("nan"), device="cuda")
    m.run({"hidden_states": xd}, {"output": out})
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_experts_cuda_f32_same_tokens(family, gpu_cache):
    model = load(family, device="cuda")
    ids = torch.randint(1, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    ids = ids.cuda()
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=16, do_sample=False)
        moec.transformers.compile_experts(model, target="cuda", cache=gpu_cache,
                                          max_tokens=MAX_TOKENS)
        got = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, expected), (family, expected.tolist(), got.tolist())


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_experts_cuda_bf16_within_spread(family, gpu_cache):
    model = load(family, torch.bfloat16, device="cuda")
    blocks_ = [(n, m) for n, m in model.named_modules()
               if type(m).__name__ in moec.transformers._BLOCKS]
    name, original = blocks_[-1]
    original = copy.deepcopy(original).float()
    x = torch.randn(2, 9, model.config.hidden_size, device="cuda")
    with torch.no_grad():
        exact = original(x.bfloat16().float())
        moec.transformers.compile_experts(model, target="cuda", cache=gpu_cache,
                                          max_tokens=MAX_TOKENS)
        got = model.get_submodule(name)(x.bfloat16())
    if isinstance(exact, tuple):
        exact, got = exact[0], got[0]
    err = ((got.float() - exact).abs().max() / exact.abs().max()).item()
    assert err < 3e-2, err
    ids = torch.randint(1, model.config.vocab_size, (2, 7), device="cuda")
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape == (2, 15)


@pytest.mark.parametrize("family", FAMILIES)
def test_experts_interface_cuda(family, gpu_cache, monkeypatch):
    monkeypatch.setenv("MOEC_CACHE_DIR", gpu_cache)
    model = load(family, device="cuda")
    ids = torch.randint(1, model.config.vocab_size, (2, 7), device="cuda")
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=16, do_sample=False)
        model.set_experts_implementation("moec")
        got = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, expected), (family, expected.tolist(), got.tolist())
