// The fixtures through the textual path: moec-translate prints the imported
// module (weights as dense_resource blobs in dialect_resources), moec-interp
// parses it back and runs it. The ctest interp.fixture.* tests import the
// .onnx directly; this checks that nothing is lost in between.

// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx -o %t.mixtral.mlir
// RUN: moec-interp %t.mixtral.mlir --inputs %fixtures/mixtral/inputs.npz --expected-outputs %fixtures/mixtral/expected.npz --scale-atol | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/deepseek_v3/model.onnx -o %t.deepseek.mlir
// RUN: moec-interp %t.deepseek.mlir --inputs %fixtures/deepseek_v3/inputs.npz --expected-outputs %fixtures/deepseek_v3/expected.npz --scale-atol | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/gpt_oss/model.onnx -o %t.gpt-oss.mlir
// RUN: moec-interp %t.gpt-oss.mlir --inputs %fixtures/gpt_oss/inputs.npz --expected-outputs %fixtures/gpt_oss/expected.npz --scale-atol | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/ort-moe/model.onnx -o %t.ort-moe.mlir
// RUN: moec-interp %t.ort-moe.mlir --inputs %fixtures/ort-moe/inputs.npz --expected-outputs %fixtures/ort-moe/expected.npz --scale-atol | FileCheck %s

// CHECK: output [{{.*}}]: max abs err {{.*}}: ok
