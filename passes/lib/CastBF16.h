//===- CastBF16.h - the bf16 storage rules, on any op's body ----*- C++ -*-===//
//
// The rules of moe-cast-experts-bf16 (CastExpertsBF16.cpp states them), shared
// with moe-cast-model-bf16, which also stores a whole model's embedding table
// as bf16.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_PASSES_CASTBF16_H
#define MOEC_PASSES_CASTBF16_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

namespace moec {

struct BF16Cast {
  /// The experts' results that only moe.combine reads rounded to bf16 too.
  bool outputs = false;
  /// moe.embedding's f32 constant tables stored as bf16 (the rows they give
  /// stay f32).
  bool embeddingTables = false;
  /// The pass the errors name.
  llvm::StringRef pass = "moe-cast-experts-bf16";
};

/// Stores as bf16 what the rules say under `root`: weights become bf16
/// constants, rows bf16 types. Fails, with an error on the op, where a grouped
/// matmul's weights cannot be bf16 (found before anything changes) or a
/// constant's bytes cannot be read.
mlir::LogicalResult castToBF16(mlir::Operation *root, const BF16Cast &options);

} // namespace moec

#endif // MOEC_PASSES_CASTBF16_H
