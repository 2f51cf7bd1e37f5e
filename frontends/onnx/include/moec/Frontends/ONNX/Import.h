//===- Import.h - ONNX models into MLIR ------------------------*- C++ -*-===//

#ifndef MOEC_FRONTENDS_ONNX_IMPORT_H
#define MOEC_FRONTENDS_ONNX_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/MemoryBuffer.h"

namespace moec::onnx {

/// Imports the ONNX model in `buffer` (read from `path`; external data files
/// are found beside it) into a module holding one func.func for the main
/// graph. Default-domain operators become ops of the `onnx` dialect;
/// onnxruntime's com.microsoft.MoE and QMoE become `moe.layer`. Large
/// initializers become dense_resource blobs that point into the loaded file or
/// a mapped external-data file, so weights are not copied twice. Every error
/// is a diagnostic naming the file, the node or tensor, and the reason; the
/// result is then null.
mlir::OwningOpRef<mlir::ModuleOp> importModel(const llvm::MemoryBuffer &buffer,
                                              llvm::StringRef path,
                                              mlir::MLIRContext &context);

/// Registers the `--import-onnx` translation for mlir-translate style tools.
void registerImportONNXTranslation();

} // namespace moec::onnx

#endif // MOEC_FRONTENDS_ONNX_IMPORT_H
