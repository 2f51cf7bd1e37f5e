//===- ONNXImportFuzzer.cpp - libFuzzer target for the ONNX importer -------===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// For any input the importer must return a module or report an error; a
// module it returns must verify.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/ONNX/Import.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context;
  // Errors are the expected outcome for most inputs; keep them quiet.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  auto buffer = llvm::MemoryBuffer::getMemBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx",
      /*RequiresNullTerminator=*/false);
  // A folder that does not exist: external-data references cannot reach real files.
  mlir::OwningOpRef<mlir::ModuleOp> module =
      moec::onnx::importModel(*buffer, "/nonexistent-moec-fuzz/fuzz.onnx", context);
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort();
  return 0;
}
