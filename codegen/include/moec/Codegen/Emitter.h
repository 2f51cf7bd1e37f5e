//===- Emitter.h - grouped phase → C++ or CUDA C++ source ------*- C++ -*-===//
//
// The printing half of code generation: a module in the grouped (or fp8)
// phase becomes one C++ translation unit that calls the runtime's kernels op
// by op (the CPU printer: moec/runtime/cpu/MoEKernels.h; the CUDA printer:
// moec/runtime/cuda/MoEKernels.h on one stream), together with what the
// artifact writer needs to lay out weights.bin and the manifest: the placed
// weight constants, the inputs and outputs, the workspace size. Nothing here
// writes a file or runs a compiler (ArtifactWriter.h, Toolchain.h do), so the
// printers also serve as translations (Translation.h: moec-translate
// --emit-cpp / --emit-cuda).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_EMITTER_H
#define MOEC_CODEGEN_EMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moec::codegen {

enum class Target { CPU, CUDA };

/// One dimension: `size`, or `size · T` when it scales with the token count.
struct Dim {
  int64_t size = 1;
  bool perToken = false;
};

/// A tensor of the function's signature, as the manifest declares it.
struct TensorDecl {
  std::string name;
  mlir::Type elementType;
  llvm::SmallVector<Dim> dims;
};

/// A weight constant placed in weights.bin.
struct WeightEntry {
  std::string name;
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  uint64_t offset = 0;
  /// The constant's bytes, held by the module (not copied: weights can be
  /// gigabytes), or `expanded` for a splat.
  llvm::ArrayRef<char> bytes;
  std::shared_ptr<std::vector<char>> expanded;
  /// The size in weights.bin; `bytes` is empty for external weights.
  uint64_t size = 0;
  /// In a module whose weights are filled at load (moec.random_seed): stored
  /// (`bytes`), every element `value` (a splat), or `value` times a normal
  /// (moec.random_normal); `bytes` is empty for the latter two.
  enum class Fill { Stored, Constant, Normal } fill = Fill::Stored;
  float value = 0;
  /// moe.ep_shard of the constant: `size` is one rank's slice, `bytes` every
  /// rank's (epSize slices, rank after rank); the loader picks the rank's.
  bool shard = false;
};

/// What the printers need to know beyond the module.
struct EmitterOptions {
  /// Upper bound of the dynamic token count; buffers are planned for it.
  int64_t maxTokens = 8192;
  /// Plan weights.bin's layout without reading any constant's bytes (splats
  /// are not expanded): the weights are filled in elsewhere.
  bool externalWeights = false;
};

/// A printed module: the source and the layout the artifact writer records.
struct EmittedModule {
  std::string source;
  std::vector<WeightEntry> weights;
  std::vector<TensorDecl> inputs, outputs;
  uint64_t workspaceBytes = 0;
  /// The size of weights.bin, header included.
  uint64_t weightsBytes = 0;
  /// A whole model's KV cache (moe.kv_cache), 0 for a block.
  int64_t maxBatch = 0, maxSeq = 0;
  /// The module's moec.random_seed: its weights are filled at load.
  std::optional<uint64_t> randomSeed;
  /// The expert-parallel ranks one program serves (moe.ep_shard, moe.sort and
  /// moe.combine with ep_size, moe.all_reduce); 0: a single-device program.
  int64_t epSize = 0;
};

/// Prints the module's one function for `target`. Problems are reported as
/// diagnostics at the op at fault ("cannot generate code for ...").
mlir::FailureOr<EmittedModule> emitModule(mlir::ModuleOp module, Target target,
                                          const EmitterOptions &options);

/// A manifest shape: `-1` for the token dimension T, `?` for a multiple of it.
std::string shapeText(llvm::ArrayRef<Dim> dims);

/// The manifest's name of an element type (f32, bf16, i32, i64, f8e4m3).
std::string manifestDType(mlir::Type type);

} // namespace moec::codegen

#endif // MOEC_CODEGEN_EMITTER_H
