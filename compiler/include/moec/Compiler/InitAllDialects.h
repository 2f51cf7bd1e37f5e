//===- InitAllDialects.h - the dialects moec's tools read -------*- C++ -*-===//
//
// One list of the dialects every moec tool registers: moe and onnx, and the
// upstream dialects the pipeline is built from (func, arith, tensor) or that
// hand-written expert loops use (linalg, math, scf; moe-raise-expert-loops).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_COMPILER_INITALLDIALECTS_H
#define MOEC_COMPILER_INITALLDIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace moec {

/// Adds moe, onnx, func, arith, tensor, linalg, math and scf to `registry`.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace moec

#endif // MOEC_COMPILER_INITALLDIALECTS_H
