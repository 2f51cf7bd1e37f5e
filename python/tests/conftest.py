"""Shared fixtures of the package's tests (docs/python.md, "Tests")."""
import os
import shutil

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "test", "fixtures")


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def have_compiler():
    import moec
    try:
        moec.find_compiler()
        return True
    except moec.CompileError:
        return False


needs_compiler = pytest.mark.skipif(not have_compiler(), reason="no moec compiler "
                                    "($MOEC_COMPILER, PATH or the repository's build/)")


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    """A compile cache of the session's own, unless $MOEC_CACHE_DIR names one
    (the GPU machine's prebuilt shapes)."""
    return os.environ.get("MOEC_CACHE_DIR") or str(tmp_path_factory.mktemp("moec-cache"))


def reference_block(x, gate_up, down, ids, weights):
    """float64 SwiGLU experts with the given routing: out[t] = sum_k w[t,k] *
    down[e] @ (silu(g) * u), (g, u) = gate_up[e] @ x[t] (gate rows first)."""
    out = np.zeros((x.shape[0], down.shape[1]))
    half = gate_up.shape[1] // 2
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = ids[t, k]
            if not 0 <= e < gate_up.shape[0]:
                continue
            gu = gate_up[e].astype(np.float64) @ x[t].astype(np.float64)
            g, u = gu[:half], gu[half:]
            out[t] += weights[t, k] * (down[e].astype(np.float64) @ (g / (1 + np.exp(-g)) * u))
    return out


def softmax_topk(x, router, k, normalize):
    logits = x.astype(np.float64) @ router.astype(np.float64).T
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, ids, -1)
    if normalize:
        w = w / w.sum(-1, keepdims=True)
    return ids, w


@pytest.fixture
def workdir(tmp_path):
    yield str(tmp_path)
    shutil.rmtree(str(tmp_path), ignore_errors=True)
