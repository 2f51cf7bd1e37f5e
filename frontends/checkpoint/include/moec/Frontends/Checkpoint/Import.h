//===- Import.h - a Hugging Face checkpoint as a whole-model program -*- C++ -*-===//
//
// Reads a checkpoint directory (config.json + safetensors, Checkpoint in
// SafeTensors.h) of a supported family (Config.h) and builds the model's step
// program directly in the moe dialect (docs/dialect.md, "Whole models"):
//
//   func @forward(input_ids, positions, sequences: tensor<?xi64>) -> logits
//
// with moe.embedding, moe.rms_norm, moe.linear, moe.rotary, moe.attention,
// moe.layer and arith.addf. Expert weights are merged into moe.layer's layout
// here, once (per-expert v4 tensors stacked, v5's fused gate_up_proj as it
// is, gpt-oss's [E, in, out] transposed). Only the tensors the model needs
// are read. An FP8 checkpoint (quantization_config fp8: F8_E4M3 weights with
// their weight_scale_inv blocks) keeps its routed experts e4m3 with their
// 128x128 block scales; its other FP8 weights are dequantised once, to f32.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_IMPORT_H
#define MOEC_FRONTENDS_CHECKPOINT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace moec::checkpoint {

/// Whether `path` is a directory holding config.json (a checkpoint).
bool isCheckpointDirectory(llvm::StringRef path);

struct ImportOptions {
  /// A random model (`moec compile --random-weights[=SEED]`): only
  /// config.json is read (safetensors, if any, are ignored), and every weight
  /// is a placeholder splat (never materialised) that the artifact fills at
  /// load: a normal of the config's initializer_range (default 0.02) for
  /// matrices, embeddings, routers and experts, ones for RMSNorm weights,
  /// zeros for biases, sinks and e_score_correction_bias; the computed
  /// constants (rotary frequencies) are real. The module carries
  /// moec.random_seed = SEED (moec/Dialect/Utils/ConstantData.h).
  std::optional<uint64_t> randomSeed;
};

/// The model's step program, or null after an error diagnostic that names the
/// file, tensor or key at fault.
mlir::OwningOpRef<mlir::ModuleOp> importCheckpoint(llvm::StringRef dir,
                                                   mlir::MLIRContext &context,
                                                   const ImportOptions &options = {});

} // namespace moec::checkpoint

#endif // MOEC_FRONTENDS_CHECKPOINT_IMPORT_H
