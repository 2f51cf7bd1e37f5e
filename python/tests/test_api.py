"""The package's API on CPU artifacts: compile, load, call on numpy arrays and
torch tensors, errors, whole models' forward and generate (ctest python.api)."""
import os

import numpy as np
import pytest

import moec
from moec import blocks
from conftest import fixture, needs_compiler, reference_block, softmax_topk

pytestmark = needs_compiler

try:
    import torch
except ImportError:  # the torch cases skip; the rest runs on numpy
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("art") / "mixtral.moec")
    return moec.compile(fixture("mixtral", "model.onnx"), target="cpu", output=out, max_tokens=64)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("art") / "qwen3.moec")
    return moec.compile(fixture("models", "qwen3_moe", "checkpoint"), target="cpu", output=out,
                        max_batch=2, max_seq=32, max_tokens=64)


def fixture_io(name):
    x = np.load(fixture(name, "inputs.npz"))["hidden_states"]
    expected = np.load(fixture(name, "expected.npz"))["output"]
    return x, expected


def test_compile_load_call_numpy(mixtral):
    m = moec.load(mixtral)
    assert m.target == "cpu" and m.max_tokens == 64 and not m.is_whole_model
    assert [tuple(s) for s in m.inputs] == [("hidden_states", "f32", (1, -1, 64))]
    assert m.outputs[0].name == "output" and m.outputs[0].shape == (1, -1, 64)
    x, expected = fixture_io("mixtral")
    for y in (m(x), m(hidden_states=x), m.run({"hidden_states": x})["output"]):
        assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_outputs_written_in_place(mixtral):
    m = moec.load(mixtral)
    x, expected = fixture_io("mixtral")
    out = np.full(x.shape, np.nan, np.float32)
    got = m.run({"hidden_states": x}, {"output": out})
    assert got["output"] is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_run_errors_carry_the_runtime_message(mixtral):
    m = moec.load(mixtral)
    x, _ = fixture_io("mixtral")
    with pytest.raises(moec.RunError, match="float64"):
        m(x.astype(np.float64))
    with pytest.raises(moec.RunError, match="hidden"):
        m(x[:, :, :32].copy())
    with pytest.raises(moec.RunError, match="nope"):
        m(nope=x)
    with pytest.raises(moec.RunError, match="max"):
        m(np.zeros((1, 65, 64), np.float32))
    with pytest.raises(TypeError):
        m(x, x)
    m.close()
    with pytest.raises(moec.RunError, match="closed"):
        m(x)


def test_load_errors():
    with pytest.raises(moec.RunError, match="artifact"):
        moec.load("/nonexistent/model.moec")


def test_compile_error_has_the_diagnostics(workdir):
    bad = os.path.join(workdir, "bad.mlir")
    with open(bad, "w") as f:
        f.write("func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {\n  return %y : tensor<?x4xf32>\n}\n")
    with pytest.raises(moec.CompileError) as info:
        moec.compile(bad, target="cpu", output=os.path.join(workdir, "bad.moec"))
    assert "error" in info.value.diagnostics and "%y" in info.value.diagnostics
    assert info.value.returncode != 0 and info.value.command[1] == "compile"
    assert not os.path.exists(os.path.join(workdir, "bad.moec"))
    with pytest.raises(moec.CompileError, match="target"):
        moec.compile(bad, target="tpu")
    with pytest.raises(moec.CompileError, match="(?i)unknown"):
        moec.compile(fixture("mixtral", "model.onnx"), target="cpu", no_such_flag=3,
                     output=os.path.join(workdir, "x.moec"))


def test_compiler_from_environment(monkeypatch):
    monkeypatch.setenv("MOEC_COMPILER", "/nonexistent/moec")
    with pytest.raises(moec.CompileError, match="MOEC_COMPILER"):
        moec.find_compiler()


def test_emit_exe(workdir):
    exe = moec.compile(fixture("mixtral", "model.onnx"), target="cpu", emit="exe",
                       output=os.path.join(workdir, "mixtral.exe"))
    x, expected = fixture_io("mixtral")
    np.testing.assert_allclose(moec.load(exe)(x), expected, rtol=1e-5, atol=1e-5)


def _block(rng, e=8, h=32, i=16, k=2):
    return (rng.normal(0, 0.2, (e, 2 * i, h)).astype(np.float32),
            rng.normal(0, 0.2, (e, h, i)).astype(np.float32),
            rng.normal(0, 1, (e, h)).astype(np.float32))


def test_blocks_of_one_plan_keep_their_own_code(cache, workdir):
    """Two blocks whose artifacts have the same tensor tables but different
    code (normalised routing or not), loaded side by side: each runs its own."""
    rng = np.random.default_rng(1)
    gate_up, down, router = _block(rng)
    x = rng.normal(0, 1, (5, 32)).astype(np.float32)
    models = {}
    for normalize in (True, False):
        spec = blocks.BlockSpec(experts=8, hidden=32, inter=16, top_k=2, normalize=normalize)
        art = blocks.compile_block(spec, "cpu", cache=cache, max_tokens=16)
        d = blocks.instantiate(art, {"router": router, "gate_up": gate_up, "down": down},
                               os.path.join(workdir, str(normalize)))
        models[normalize] = moec.load(d)
    for normalize, m in models.items():
        ids, w = softmax_topk(x, router, 2, normalize)
        np.testing.assert_allclose(m(x), reference_block(x, gate_up, down, ids, w), rtol=1e-4, atol=1e-5)


def test_precomputed_routing_block(cache, workdir):
    rng = np.random.default_rng(2)
    gate_up, down, _ = _block(rng)
    spec = blocks.BlockSpec(experts=8, hidden=32, inter=16, top_k=2, routing=None)
    art = blocks.compile_block(spec, "cpu", cache=cache, max_tokens=16)
    m = moec.load(blocks.instantiate(art, {"gate_up": gate_up, "down": down}, workdir))
    assert [s.name for s in m.inputs] == ["hidden_states", "expert_ids", "expert_weights"]
    x = rng.normal(0, 1, (6, 32)).astype(np.float32)
    ids = np.array([[0, 3], [7, 1], [2, 2], [-1, 4], [8, 5], [6, 0]], np.int64)  # -1, 8: sentinels
    w = rng.uniform(0.1, 1, (6, 2)).astype(np.float32)
    y = m(hidden_states=x, expert_ids=ids, expert_weights=w)
    np.testing.assert_allclose(y, reference_block(x, gate_up, down, ids, w), rtol=1e-4, atol=1e-5)


def test_write_weights_checks_names_and_shapes(cache, workdir):
    spec = blocks.BlockSpec(experts=4, hidden=16, inter=8, top_k=1)
    art = blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8)
    good = {"router": np.zeros((4, 16)), "gate_up": np.zeros((4, 16, 16)), "down": np.zeros((4, 16, 8))}
    with pytest.raises(ValueError, match="lays out"):
        blocks.instantiate(art, {"router": good["router"]}, workdir)
    with pytest.raises(ValueError, match="lays out"):
        blocks.instantiate(art, dict(good, down=np.zeros((4, 8, 16))), workdir)
    # the compiled shape is reused, not compiled again
    assert blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8) == art


def test_block_cache_follows_the_compiler(cache, monkeypatch):
    spec = blocks.BlockSpec(experts=4, hidden=16, inter=8, top_k=2)
    art = blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8)
    manifest = os.path.join(art, "manifest.txt")
    stamp = art[:-len(".moec")] + ".compiler"
    before = os.stat(manifest).st_mtime_ns
    assert blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8) == art
    assert os.stat(manifest).st_mtime_ns == before
    with open(stamp, "w") as f:  # compiled by another build of moec
        f.write("another moec\n")
    assert blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8) == art
    assert os.stat(manifest).st_mtime_ns != before
    # no compiler (a GPU machine with a carried cache): the cached shape is used
    monkeypatch.setenv("MOEC_COMPILER", "/nonexistent/moec")
    assert blocks.compile_block(spec, "cpu", cache=cache, max_tokens=8) == art
    with pytest.raises(moec.CompileError, match="MOEC_COMPILER"):
        blocks.compile_block(spec, "cpu", cache=cache, max_tokens=9)


def test_whole_model_generate_and_forward(whole):
    m = moec.load(whole)
    assert m.is_whole_model and m.max_batch == 2 and m.max_seq == 32 and m.vocab_size == 128
    d = fixture("models", "qwen3_moe")
    prompt = np.load(os.path.join(d, "prompt.npz"))
    expected = np.load(os.path.join(d, "generate.npz"))["sequences"]
    got = m.generate(prompt["input_ids"], max_new_tokens=16)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)
    assert m.last_stats["decode_tokens"] == 2 * 15 and m.last_stats["prefill_tokens"] == 14
    ragged = np.load(os.path.join(d, "prompt_ragged.npz"))
    np.testing.assert_array_equal(
        m.generate(ragged["input_ids"], max_new_tokens=16, attention_mask=ragged["attention_mask"]),
        np.load(os.path.join(d, "generate_ragged.npz"))["sequences"])
    logits = m.forward(prompt["input_ids"])
    np.testing.assert_allclose(logits, np.load(os.path.join(d, "logits.npz"))["logits"],
                               rtol=1e-4, atol=1e-4)
    sampled = m.generate(prompt["input_ids"], max_new_tokens=8, temperature=0.8, top_k=20,
                         top_p=0.9, seed=7)
    again = m.generate(prompt["input_ids"], max_new_tokens=8, temperature=0.8, top_k=20,
                       top_p=0.9, seed=7)
    np.testing.assert_array_equal(sampled, again)
    with pytest.raises(moec.RunError, match="max"):
        m.generate(np.zeros((3, 4), np.int64), max_new_tokens=2)


def test_generate_needs_a_whole_model(mixtral):
    with pytest.raises(moec.RunError, match="whole model"):
        moec.load(mixtral).generate(np.zeros((1, 3), np.int64), max_new_tokens=2)


@needs_torch
def test_torch_tensors_in_and_out(mixtral):
    m = moec.load(mixtral)
    x, expected = fixture_io("mixtral")
    t = torch.from_numpy(x)
    y = m(t)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.device.type == "cpu"
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)
    out = torch.full(t.shape, float("nan"))
    ptr = out.data_ptr()
    m.run({"hidden_states": t}, {"output": out})  # written where it is: zero copy
    assert out.data_ptr() == ptr
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(moec.RunError, match="bfloat16"):
        m(t.to(torch.bfloat16))
    # A strided view is made contiguous before it reaches moec.
    wide = torch.zeros(1, x.shape[1], 128)
    wide[:, :, ::2] = t
    np.testing.assert_allclose(m(wide[:, :, ::2]).numpy(), expected, rtol=1e-5, atol=1e-5)


@needs_torch
def test_whole_model_generate_on_torch(whole):
    m = moec.load(whole)
    d = fixture("models", "qwen3_moe")
    prompt = np.load(os.path.join(d, "prompt.npz"))["input_ids"]
    got = m.generate(torch.from_numpy(prompt), max_new_tokens=16)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), np.load(os.path.join(d, "generate.npz"))["sequences"])


_EP_RANK = r"""
import sys
import numpy as np
import moec
path, inputs, out = sys.argv[1:4]
group = moec.ExpertParallelGroup()
m = moec.load(path, group=group)
assert m.group is group and group.size == 2
y = m(np.load(inputs)["hidden_states"])
np.save(out + f".{group.rank}.npy", y)
"""


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(script, args, ranks, extra_env=None):
    import subprocess
    import sys
    env = dict(os.environ, WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), MOEC_DIST_TIMEOUT="20", **(extra_env or {}))
    procs = [subprocess.Popen([sys.executable, "-c", script, *args], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    return [(p.wait(timeout=120), p.stderr.read()) for p in procs]


def test_expert_parallel_group(tmp_path):
    """Two processes, as torchrun starts them, load one artifact of ep_size=2
    with an ExpertParallelGroup: both get onnxruntime's output, the same bits."""
    art = moec.compile(fixture("deepseek_v3", "model.onnx"), target="cpu", ep_size=2,
                       output=str(tmp_path / "ds.moec"))
    with pytest.raises(moec.RunError, match="load it as one of them"):
        moec.load(art)
    out = str(tmp_path / "y")
    results = _run_ranks(_EP_RANK, [art, fixture("deepseek_v3", "inputs.npz"), out], 2)
    assert all(code == 0 for code, _ in results), results
    y0, y1 = np.load(out + ".0.npy"), np.load(out + ".1.npy")
    assert np.array_equal(y0, y1)
    expected = np.load(fixture("deepseek_v3", "expected.npz"))["output"]
    np.testing.assert_allclose(y0, expected, rtol=1e-5, atol=1e-5)


def test_expert_parallel_group_missing_rank(tmp_path):
    """A rank whose peer never starts gets moec.RunError within the timeout: the
    group is formed when the first artifact loads (its target picks the
    communicator), and the handshake names the missing rank."""
    art = moec.compile(fixture("deepseek_v3", "model.onnx"), target="cpu", ep_size=2,
                       output=str(tmp_path / "ds.moec"))
    script = "import moec, sys\ngroup = moec.ExpertParallelGroup()\ntry:\n" \
             "    moec.load(sys.argv[1], group=group)\nexcept moec.RunError as e:\n" \
             "    print(e)\n    raise SystemExit(3)\n"
    import subprocess
    import sys
    env = dict(os.environ, WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), MOEC_DIST_TIMEOUT="1")
    done = subprocess.run([sys.executable, "-c", script, art], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "rank(s) 1 missing (not started, or failed)" in done.stdout, done.stdout
