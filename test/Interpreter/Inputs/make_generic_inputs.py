"""Inputs and float64 expectations of test/Interpreter/generic-ops.mlir."""
import pathlib
import sys

import numpy as np

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
x = rng.standard_normal((3, 4)).astype(np.float32)
w = rng.standard_normal(4).astype(np.float32)
xd, wd = x.astype(np.float64), w.astype(np.float64)
m = (xd * xd).mean(axis=1, keepdims=True)
z = xd / np.sqrt(m + np.float64(np.float32(1e-5))) * (1 + wd)
y = np.maximum(1 / (1 + np.exp(-z)), 0.25)
np.savez(out / "generic.inputs.npz", x=x, w=w)
np.savez(out / "generic.expected.npz", y=y, s=xd.sum(axis=1, keepdims=True), m=m,
         x_max=xd.max(axis=1, keepdims=True))
