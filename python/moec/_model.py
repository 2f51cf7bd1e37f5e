"""moec.load() and Model: a compiled artifact called on numpy arrays or torch tensors."""
import os

import numpy as np

from . import _moec
from ._moec import RunError

_NUMPY = {"f32": np.float32, "i32": np.int32, "i64": np.int64}


def _torch():
    import torch
    return torch


def _is_torch(x):
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "__dlpack__")


def _torch_dtype(name):
    torch = _torch()
    return {"f32": torch.float32, "i32": torch.int32, "i64": torch.int64}[name]


class TensorSpec(tuple):
    """(name, dtype, shape) of an artifact's input or output; -1 in shape is the
    token dimension."""

    __slots__ = ()

    def __new__(cls, name, dtype, shape):
        return super().__new__(cls, (name, dtype, tuple(shape)))

    name = property(lambda self: self[0])
    dtype = property(lambda self: self[1])
    shape = property(lambda self: self[2])

    def __repr__(self):
        return f"TensorSpec(name={self.name!r}, dtype={self.dtype!r}, shape={self.shape})"


class Model:
    """A loaded artifact (`moec.load`). Call it on numpy arrays or torch tensors:

        out = m(hidden_states=x)     # by the graph's input names
        out = m(x)                   # or in input order
    It returns arrays of the caller's framework (numpy in, numpy out; torch in,
    torch out on the inputs' device): one output as itself, several as a tuple.
    A CUDA artifact called on CUDA tensors runs on torch's current stream
    (moec_run_async): nothing waits for the GPU, as with a torch module.
    """

    def __init__(self, path, group=None):
        self.path = os.fspath(path)
        self.group = group
        self._m = _moec.Model(self.path, group._g if group is not None else None)
        self.inputs = [TensorSpec(*s) for s in self._m.inputs]
        self.outputs = [TensorSpec(*s) for s in self._m.outputs]
        self.last_stats = None

    # -- what the manifest declares --------------------------------------
    @property
    def target(self):
        """"cpu" or "cuda"."""
        return self._m.target

    @property
    def max_tokens(self):
        return self._m.max_tokens

    @property
    def max_batch(self):
        """The KV cache's sequences (a whole model), 0 for a block."""
        return self._m.max_batch

    @property
    def max_seq(self):
        return self._m.max_seq

    @property
    def vocab_size(self):
        return self._m.vocab_size

    @property
    def is_whole_model(self):
        return self._m.max_batch > 0

    def close(self):
        """Frees the model now (otherwise when it is collected)."""
        self._m.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        kind = "whole model" if not self._m.closed and self.is_whole_model else "block"
        return f"moec.Model({self.path!r}, target={self._m.target if not self._m.closed else '?'}, {kind})"

    # -- running ------------------------------------------------------------
    def _named_inputs(self, args, kwargs):
        if args and kwargs:
            raise TypeError("give the inputs either by position or by name, not both")
        if args:
            if len(args) != len(self.inputs):
                raise TypeError(f"{self.path} takes {len(self.inputs)} inputs "
                                f"({', '.join(s.name for s in self.inputs)}), {len(args)} given")
            return dict(zip((s.name for s in self.inputs), args))
        return dict(kwargs)

    def _tokens(self, named):
        """T, the token dimension, from the first input that has one."""
        for spec in self.inputs:
            if spec.name in named and -1 in spec.shape:
                x = named[spec.name]
                axis = spec.shape.index(-1)
                if len(x.shape) == len(spec.shape):
                    return int(x.shape[axis])
        return None

    def __call__(self, *args, **kwargs):
        named = self._named_inputs(args, kwargs)
        outs = self.run(named)
        values = [outs[s.name] for s in self.outputs]
        return values[0] if len(values) == 1 else tuple(values)

    def run(self, inputs, outputs=None):
        """Runs on `inputs` (a dict name -> array); writes into `outputs` (a dict
        name -> preallocated array) when given, else allocates them. Returns the
        dict of outputs."""
        if not inputs:
            raise RunError(f"{self.path}: no inputs given")
        known = [s.name for s in self.inputs]
        for name in inputs:
            if name not in known:
                raise RunError(f"{self.path}: unknown input '{name}' (it takes "
                               f"{', '.join(known)})")
        values = list(inputs.values())
        use_torch = any(_is_torch(v) for v in values)
        stream = None
        device = None
        if use_torch:
            torch = _torch()
            converted = {}
            for name, v in inputs.items():
                if not _is_torch(v):
                    v = torch.from_numpy(np.ascontiguousarray(v))
                converted[name] = v.detach().contiguous()
            inputs = converted
            device = next(iter(inputs.values())).device
            for name, v in inputs.items():
                if v.device != device:
                    raise RunError(f"input '{name}' is on {v.device}, others on {device}")
            if device.type == "cuda":
                if self.target != "cuda":
                    raise RunError(f"the inputs are on {device}, but {self.path} is a CPU "
                                   "artifact (move them to the host, or compile for cuda)")
                stream = torch.cuda.current_stream(device).cuda_stream
        else:
            inputs = {name: np.ascontiguousarray(v) for name, v in inputs.items()}
        if outputs is None:
            # T from the inputs; when none gives it (a rank that differs), the
            # runtime's check of the inputs says what is wrong.
            tokens = self._tokens(inputs) or 0
            outputs = {}
            for spec in self.outputs:
                shape = tuple(tokens if d == -1 else d for d in spec.shape)
                if use_torch:
                    outputs[spec.name] = _torch().empty(shape, dtype=_torch_dtype(spec.dtype),
                                                        device=device)
                else:
                    outputs[spec.name] = np.empty(shape, dtype=_NUMPY[spec.dtype])
        self._m.run(list(inputs.items()), list(outputs.items()), stream)
        return outputs

    # -- whole models -------------------------------------------------------
    def _require_whole_model(self, what):
        if not self.is_whole_model:
            raise RunError(f"{what} needs a whole model (compiled from a checkpoint); "
                           f"{self.path} is a block")

    @staticmethod
    def _host_ids(x, what):
        if x is None:
            return None, None
        if _is_torch(x):
            return x.detach().to("cpu", _torch().int64).contiguous().numpy(), x.device
        a = np.asarray(x)
        if a.dtype.kind not in "iu":
            raise RunError(f"{what} must hold integers, not {a.dtype}")
        return np.ascontiguousarray(a, dtype=np.int64), None

    def forward(self, input_ids):
        """The whole model's forward without a cache (moec_forward): logits
        [batch, length, vocab] (float32) of input_ids [batch, length]."""
        self._require_whole_model("forward")
        ids, device = self._host_ids(input_ids, "input_ids")
        if ids.ndim == 1:
            ids = ids[None]
        logits = np.empty((ids.shape[0], ids.shape[1], self.vocab_size), np.float32)
        self._m.forward(ids, logits)
        if device is not None:
            return _torch().from_numpy(logits).to(device)
        return logits

    def generate(self, input_ids, max_new_tokens=16, attention_mask=None, temperature=0.0,
                 top_k=0, top_p=1.0, seed=0):
        """`max_new_tokens` tokens after each prompt of input_ids [batch, length]
        (moec_generate): the prompts as given followed by the new tokens,
        [batch, length + max_new_tokens], as transformers' generate returns them.
        attention_mask marks each prompt's tokens with 1 and its padding (left or
        right) with 0. Greedy when temperature is 0; otherwise sampled within
        top_k (0: all) and top_p from `seed`. The prefill's and decode's tokens
        and seconds are in `last_stats`."""
        self._require_whole_model("generate")
        ids, device = self._host_ids(input_ids, "input_ids")
        if ids.ndim == 1:
            ids = ids[None]
        mask, _ = self._host_ids(attention_mask, "attention_mask")
        if mask is not None and mask.ndim == 1:
            mask = mask[None]
        if max_new_tokens < 0:
            raise RunError("max_new_tokens must be >= 0")
        sequences = np.empty((ids.shape[0], ids.shape[1] + max_new_tokens), np.int64)
        self.last_stats = self._m.generate(ids, mask, int(max_new_tokens), float(temperature),
                                           int(top_k), float(top_p), int(seed), sequences)
        if device is not None:
            return _torch().from_numpy(sequences).to(device)
        return sequences

    def reset(self, sequence=-1):
        """Empties one sequence of the KV cache, or all (-1)."""
        self._m.reset(int(sequence))


def load(path, group=None):
    """Loads a compiled artifact (a directory `moec compile --target=... -o DIR`
    wrote, or an `--emit=exe` file). Raises moec.RunError when the runtime
    refuses it. An artifact of `moec.compile(..., ep_size=N)` is loaded by every
    process of an N-rank job with its ExpertParallelGroup (`group`)."""
    return Model(path, group)


class ExpertParallelGroup:
    """This process as one rank of an expert-parallel job, from the launcher's
    environment (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, or
    mpirun's): rank 0 serves a TCP store, every rank connects to it and to the
    others. Pass it to moec.load; every rank loads the same artifact and calls
    the model on the same inputs, and each gets the whole result. A rank that
    dies or never comes ends the others with moec.RunError within
    MOEC_DIST_TIMEOUT seconds (300 by default). CPU artifacts for now.

        group = moec.ExpertParallelGroup()     # under torchrun --nproc-per-node N
        m = moec.load(path, group=group)       # path: moec.compile(..., ep_size=N)
    """

    def __init__(self):
        self._g = _moec.Group()

    rank = property(lambda self: self._g.rank)
    size = property(lambda self: self._g.size)

    def abort(self, why):
        """Ends the other ranks' waits with `why` (this rank failed)."""
        self._g.abort(str(why))
