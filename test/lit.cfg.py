# lit configuration for moec's pass and tool tests.
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "moec"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moec_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "fixtures"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# The compilers `moec compile --target` uses (a sanitizer build sets them:
# docs/fuzzing.md); lit passes ASAN_OPTIONS and UBSAN_OPTIONS itself.
llvm_config.with_system_environment(["MOEC_CXX", "MOEC_NVCC"])
llvm_config.add_tool_substitutions(["moec", "moec-opt", "moec-translate", "moec-interp", "moec-run"], [config.moec_tools_dir])
# The end-to-end fixtures (model.onnx, inputs.npz, expected.npz per model).
# The source tree (bench/ scripts).
config.substitutions.append(("%moec_src", config.moec_src_root))
config.substitutions.append(("%fixtures", os.path.join(config.moec_src_root, "test", "fixtures")))
# The tools' directory, for scripts that take it (test/Codegen/check-planned-ir.sh).
config.substitutions.append(("%moec_tools_dir", config.moec_tools_dir))
config.excludes += ["Inputs", "Regressions"]


def gpu_present():
    """A GPU test runs only where the CUDA build is on and a device answers."""
    smi = shutil.which("nvidia-smi")
    if not config.moec_enable_cuda or smi is None:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# moec was built with CUDA (nvcc found): --target=cuda can compile, no GPU needed.
if config.moec_enable_cuda:
    config.available_features.add("cuda-build")

if gpu_present():
    config.available_features.add("cuda")
