"""moec.transformers on tiny random models of the four families, on the CPU
(ctest python.transformers): each swapped block computes what the module did,
and model.generate's greedy tokens are the unswapped model's, in f32; the same
through transformers' experts interface (set_experts_implementation("moec"))."""
import copy

import pytest

from conftest import fixture, needs_compiler

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import moec.transformers  # noqa: E402  (registers "moec" as an experts implementation)

pytestmark = needs_compiler

FAMILIES = ["qwen3_moe", "mixtral", "gpt_oss", "deepseek_v3"]


def load(family, dtype=torch.float32):
    path = fixture("models", family, "checkpoint")
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()


def prompts(model, batch=2, length=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, model.config.vocab_size, (batch, length), generator=g)


def moe_blocks(model):
    return [(n, m) for n, m in model.named_modules() if type(m).__name__ in moec.transformers._BLOCKS]


@pytest.mark.parametrize("family", FAMILIES)
def test_compile_experts_same_tokens(family, cache):
    model = load(family)
    ids = prompts(model)
    originals = {n: copy.deepcopy(m) for n, m in moe_blocks(model)}
    assert originals, family
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=16, do_sample=False)
        assert moec.transformers.compile_experts(model, target="cpu", cache=cache) is model
        swapped = dict(model.named_modules())
        x = torch.randn(3, 5, model.config.hidden_size, generator=torch.Generator().manual_seed(1))
        for name, original in originals.items():
            block = swapped[name]
            assert isinstance(block, moec.transformers.MoecBlock)
            want, got = original(x), block(x)
            if isinstance(want, tuple):  # gpt-oss: (output, router scores)
                want, got = want[0], got[0]
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        got = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, expected), (family, expected.tolist(), got.tolist())


@pytest.mark.parametrize("family", FAMILIES)
def test_experts_implementation_same_tokens(family, cache, monkeypatch):
    monkeypatch.setenv("MOEC_CACHE_DIR", cache)
    model = load(family)
    ids = prompts(model, seed=3)
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=16, do_sample=False)
        model.set_experts_implementation("moec")
        assert model.config._experts_implementation == "moec"
        got = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, expected), (family, expected.tolist(), got.tolist())
    compiled = [m for m in model.modules() if getattr(m, "_moec", None) is not None]
    assert compiled and all(m._moec.target == "cpu" for m in compiled)


def test_bf16_model_within_the_bf16_spread(cache):
    """A bf16 model on the CPU: moec computes the block in f32 from the bf16
    weights; the result is within bf16's rounding of transformers' bf16 one."""
    model = load("qwen3_moe", torch.bfloat16)
    name, original = moe_blocks(model)[0]
    original = copy.deepcopy(original)
    x = torch.randn(4, 6, model.config.hidden_size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        exact = original.float()(x.bfloat16().float())
        moec.transformers.compile_experts(model, target="cpu", cache=cache)
        got = model.get_submodule(name)(x.bfloat16())
    assert got.dtype == torch.bfloat16
    err = (got.float() - exact).abs().max() / exact.abs().max()
    assert err < 2e-2, err


def test_model_without_moe_blocks():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match="no sparse-MoE block"):
        moec.transformers.compile_experts(model, target="cpu")


def test_unknown_activation_is_refused():
    model = load("mixtral")
    _, block = moe_blocks(model)[0]
    block.experts.config.hidden_act = "gelu_new"
    with pytest.raises(NotImplementedError, match="gelu_new"):
        moec.transformers.block_spec(block)
