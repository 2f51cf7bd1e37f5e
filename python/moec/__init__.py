"""moec: compile Mixture-of-Experts blocks and models ahead of time and run them
on numpy arrays and torch tensors (docs/python.md).

    import moec
    path = moec.compile("block.mlir", target="cpu")
    m = moec.load(path)
    y = m(hidden_states=x)

    import moec.transformers
    moec.transformers.compile_experts(model, target="cuda")   # a loaded HF model
"""
from ._compiler import CompileError, compile, find_compiler
from ._model import ExpertParallelGroup, Model, RunError, TensorSpec, load

__all__ = ["CompileError", "ExpertParallelGroup", "Model", "RunError", "TensorSpec", "compile",
           "find_compiler", "load"]
__version__ = "0.1.0"
