"""moec.compile(): drives the `moec` compiler executable."""
import os
import shutil
import subprocess
import tempfile


class CompileError(RuntimeError):
    """`moec compile` failed. `diagnostics` holds the compiler's messages (its
    stderr), `command` the command line and `returncode` its exit status."""

    def __init__(self, message, diagnostics="", command=None, returncode=None):
        super().__init__(message + (("\n" + diagnostics.rstrip()) if diagnostics else ""))
        self.diagnostics = diagnostics
        self.command = command
        self.returncode = returncode


def find_compiler():
    """The `moec` executable: $MOEC_COMPILER, else `moec` on PATH, else the
    build tree of the repository this package was built from (build/bin/moec,
    or $MOEC_BUILD_DIR/bin/moec)."""
    env = os.environ.get("MOEC_COMPILER")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise CompileError(f"$MOEC_COMPILER is '{env}', which is not an executable")
        return env
    found = shutil.which("moec")
    if found:
        return found
    candidates = []
    if os.environ.get("MOEC_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["MOEC_BUILD_DIR"], "bin", "moec"))
    try:
        from ._build_info import SOURCE_ROOT
        candidates.append(os.path.join(SOURCE_ROOT, "build", "bin", "moec"))
    except ImportError:
        pass
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise CompileError(
        "cannot find the moec compiler: set $MOEC_COMPILER, put `moec` on PATH, or build "
        "the repository (scripts/build.sh); looked at " + (", ".join(candidates) or "PATH"))


def _flag(key, value):
    name = "--" + key.replace("_", "-")
    if value is True:
        return [name]
    if value is False or value is None:
        return []
    return [f"{name}={value}"]


def compile(model, target, fp8=False, output=None, **options):
    """Compiles `model` (an .onnx or .mlir file, or a Hugging Face checkpoint
    directory) for `target` ("cpu" or "cuda") into an artifact directory and
    returns its path. Every other keyword is a flag of `moec compile`, with
    dashes for underscores: max_tokens=1024 -> --max-tokens=1024,
    expert_weights="bf16" -> --expert-weights=bf16, max_batch=4, max_seq=256,
    emit="exe" (then `output` is a file). True gives a bare flag, False or None
    none. `output` defaults to a new directory under the system's temporary
    directory (the caller owns it). Raises CompileError with the compiler's
    diagnostics."""
    if target not in ("cpu", "cuda"):
        raise CompileError(f"target must be 'cpu' or 'cuda', not {target!r}")
    model = os.fspath(model)
    if not os.path.exists(model):
        raise CompileError(f"no such model: {model}")
    if output is None:
        base = os.path.splitext(os.path.basename(os.path.normpath(model)))[0] or "model"
        output = os.path.join(tempfile.mkdtemp(prefix="moec-"), base + ".moec")
    output = os.fspath(output)
    command = [find_compiler(), "compile", model, f"--target={target}", "-o", output]
    if fp8:
        command.append("--fp8")
    for key, value in options.items():
        command += _flag(key, value)
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise CompileError(f"cannot run {command[0]}: {e}", command=command) from None
    if done.returncode != 0:
        raise CompileError(f"moec compile {os.path.basename(model)} --target={target} failed "
                           f"(exit {done.returncode})", done.stderr or done.stdout,
                           command, done.returncode)
    return output
