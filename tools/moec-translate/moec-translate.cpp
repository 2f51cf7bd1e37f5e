//===- moec-translate.cpp - moec's translations -----------------------------===//
//
// An mlir-translate for moec: `--import-onnx model.onnx -o model.mlir` reads an
// ONNX model into the onnx and moe dialects.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/ONNX/Import.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  moec::onnx::registerImportONNXTranslation();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "moec translation driver\n"));
}
