//===- MoEDialect.h - the moe dialect and its attributes -------*- C++ -*-===//

#ifndef MOEC_DIALECT_MOE_MOEDIALECT_H
#define MOEC_DIALECT_MOE_MOEDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "llvm/ADT/StringRef.h"

#include <limits>

#include "moec/Dialect/MoE/MoEDialect.h.inc"
#include "moec/Dialect/MoE/MoEEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "moec/Dialect/MoE/MoEAttrs.h.inc"

namespace moec::moe {
/// FP8 block-scale granularity: activations carry one scale per row per 128
/// columns, weights one per 128x128 block (docs/dialect.md, "FP8").
inline constexpr int64_t kScaleBlock = 128;
/// Largest finite f8E4M3FN value.
inline constexpr double kE4M3Max = 448.0;
/// MXFP4 (docs/dialect.md, "MXFP4 layout"): one f8E8M0FNU scale per 32
/// consecutive f4E2M1FN weights along K; the largest e2m1 value; the e8m0
/// exponent bias (a scale byte s means 2^(s - 127)).
inline constexpr int64_t kMXBlock = 32;
inline constexpr double kE2M1Max = 6.0;
inline constexpr int kE8M0Bias = 127;
/// The stream plan (docs/dialect.md, "Stream plan"): `moe.stream = 1 : i64`
/// puts an op on the side stream; `moe.stream_input_view` marks a view of an
/// input that the side branch reads, defined before either stream runs.
inline constexpr llvm::StringLiteral kStreamAttr = "moe.stream";
inline constexpr llvm::StringLiteral kStreamInputViewAttr = "moe.stream_input_view";
/// moe-plan-kv-cache: a whole model's function carries its KV cache's size,
/// `{max_batch = B : i64, max_seq = S : i64}`; moe-cast-model-bf16 adds the
/// type its rows are stored in, `element_type = bf16` (or f32; absent: f32).
inline constexpr llvm::StringLiteral kKVCacheElementType = "element_type";
inline constexpr llvm::StringLiteral kKVCacheAttr = "moe.kv_cache";
} // namespace moec::moe

#endif // MOEC_DIALECT_MOE_MOEDIALECT_H
