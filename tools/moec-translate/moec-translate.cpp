//===- moec-translate.cpp - moec's translations -----------------------------===//
//
// An mlir-translate for moec: `--import-onnx model.onnx -o model.mlir` reads an
// ONNX model into the onnx and moe dialects; `--emit-cpp` / `--emit-cuda
// grouped.mlir` print a module in the grouped phase as the CPU or CUDA target's
// source (what `moec compile --target=...` compiles into model.so), with
// --max-tokens, --weights=external, --expert-weights=bf16 and
// --expert-outputs=bf16 as in moec compile.
//
//===----------------------------------------------------------------------===//

#include "moec/Codegen/Translation.h"
#include "moec/Frontends/ONNX/Import.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  moec::onnx::registerImportONNXTranslation();
  moec::codegen::registerEmitTranslations();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "moec translation driver\n"));
}
