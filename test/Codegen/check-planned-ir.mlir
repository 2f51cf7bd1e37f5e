// check-planned-ir.sh, the script of the `e2e.planned.*` ctests (which run
// every fixture's planned CPU, bf16, MXFP4 and FP8 IR in the interpreter),
// can fail: at the bf16 plans' 1e-2, the CUDA MXFP4 plan against
// transformers' fp32 outputs (MXFP4's own error, about 0.2 relative) is a
// mismatch, and the same plan against the interpreter's output of its cast
// passes.

// RUN: not %S/check-planned-ir.sh %moec_tools_dir cuda 1e-2 %fixtures/deepseek_v3/model.onnx %fixtures/deepseek_v3/inputs.npz %fixtures/deepseek_v3/expected.npz --expert-weights=mxfp4 --expert-outputs=bf16 | FileCheck %s --check-prefix=MISMATCH
// MISMATCH: output [1, 7, 64]: {{.*}}MISMATCH
// RUN: env MOEC_CAST_FLAGS=--expert-weights=mxfp4 %S/check-planned-ir.sh %moec_tools_dir cuda 1e-2 %fixtures/deepseek_v3/model.onnx %fixtures/deepseek_v3/inputs.npz cast --expert-weights=mxfp4 --expert-outputs=bf16 | FileCheck %s --check-prefix=CAST
// CAST: output [1, 7, 64]: {{.*}}: ok
