//===- ArtifactFormat.h - the artifact's files, defined once ----*- C++ -*-===//
//
// The one definition of a compiled artifact's on-disk format (docs/artifact.md):
// the file names, manifest.txt's grammar and keys, and weights.bin's header.
// The compiler writes it with printManifest / writeWeightsHeader; the loader
// (runtime/src/Model.cpp) reads it with parseManifest / checkWeightsHeader.
// Neither side spells a key, a magic number or an offset of its own, so the
// two cannot drift apart. model.so's C entry points are ArtifactABI.h.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_ARTIFACTFORMAT_H
#define MOEC_RUNTIME_ARTIFACTFORMAT_H

#include "moec/runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moec::rt::artifact {

/// The files of an artifact directory (and the parts of an --emit=exe bundle).
inline constexpr const char *kManifestFile = "manifest.txt";
inline constexpr const char *kWeightsFile = "weights.bin";
inline constexpr const char *kLibraryFile = "model.so";

/// manifest.txt's first line is "moec-artifact VERSION".
inline constexpr const char *kManifestMagic = "moec-artifact";
inline constexpr int kManifestVersion = 4;

/// The largest token count an artifact may be planned for: with top-k up to 16
/// the slot count stays far below 2^31, which the kernels index in int32.
inline constexpr int64_t kMaxTokensLimit = int64_t{1} << 24;
/// The most expert-parallel ranks a manifest may name.
inline constexpr int64_t kMaxRanks = 1 << 16;

/// weights.bin: a 64-byte header, then every weight tensor at a multiple of
/// kWeightsAlignment. Header: magic (8 bytes), version (u32 at 8), reserved
/// (u32 at 12), tensor count (u64 at 16), file size in bytes (u64 at 24), zero
/// padding to 64. Little-endian, as every target moec compiles for.
inline constexpr char kWeightsMagic[8] = {'M', 'O', 'E', 'C', 'W', 'T', 'S', '\0'};
inline constexpr uint32_t kWeightsVersion = 1;
inline constexpr uint64_t kWeightsHeaderBytes = 64;
/// Weights and workspace slots start at multiples of 256 bytes: at 64, each
/// 128-byte row chunk a kernel loads straddled two of the L2's 128-byte lines
/// (ncu: the decode kernel at 72 % of DRAM bandwidth against 92 % at 128).
inline constexpr uint64_t kWeightsAlignment = 256;

/// An input or output: a dtype ("f32", "i32", "i64") and a shape whose -1
/// entry (at most one) is the token dimension.
struct TensorEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

/// A weight tensor's place in the weight image the generated code addresses:
/// weights.bin itself, or, in a manifest with `weights_image`, an image the
/// loader builds from the weights' fills. The offsets are informational for
/// the loader of a plain artifact (the generated code holds them) and read by
/// tools that fill weights.bin (bench/write_weights.py). dtype adds "bf16",
/// "f8e4m3", and MXFP4's "f4e2m1" (packed codes, MXFP4.h: a [.., K] shape
/// takes ceil(K/32)·16 bytes a row) and "f8e8m0" (scale bytes) to
/// TensorEntry's.
struct WeightEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0, bytes = 0;
  /// With `weights_image` only (a plain manifest's weights are stored at
  /// `offset` of weights.bin): stored at byte `source` of weights.bin; every
  /// element `value`; or `value` times a standard normal (WeightFill.h).
  enum class Fill { Stored, Constant, Normal } fill = Fill::Stored;
  uint64_t source = 0;
  float value = 0;
  /// `shard` after the fill (a manifest with expert_parallel N): the weight is
  /// one expert-parallel rank's slice of one stacked across the N ranks
  /// (moe.ep_shard). Rank r's stored bytes start at source + r·bytes (the
  /// file holds all N slices); its normal fill continues the generator at
  /// element r·count, as the whole tensor's would.
  bool shard = false;
};

struct Manifest {
  /// "cpu" or "cuda".
  std::string target;
  std::string library = kLibraryFile, weightsFile = kWeightsFile;
  uint64_t weightsBytes = 0;
  /// CPU: the host workspace a run needs; CUDA: the device workspace, without
  /// CUB's sort workspace (sized when the model is created).
  uint64_t workspaceBytes = 0;
  int64_t maxTokens = 0;
  /// weights.bin is laid out but not written (moec compile --weights=external).
  bool externalWeights = false;
  /// `weights_image BYTES`: the weights are filled at load (moec compile
  /// --random-weights) into an image of this size, which the generated code
  /// addresses; weights.bin holds only the stored ones. 0: weights.bin is the
  /// image.
  uint64_t imageBytes = 0;
  /// `expert_parallel N`: one artifact for N expert-parallel ranks (moec compile
  /// --ep-size=N); each rank's loader gives its rank, and the weights marked
  /// `shard` resolve to that rank's slice. 0: a single-device artifact.
  int64_t epSize = 0;
  /// `random_seed SEED`: the generator's key, present with normal fills.
  bool hasRandomSeed = false;
  uint64_t randomSeed = 0;
  /// A whole model's KV cache (`kv_cache MAX_BATCH MAX_SEQ`; 0 for a block):
  /// the sequences a run may name and the positions each may hold. Such an
  /// artifact takes input_ids, positions and sequences and returns logits.
  int64_t maxBatch = 0, maxSeq = 0;
  std::vector<TensorEntry> inputs, outputs;
  std::vector<WeightEntry> weights;
  /// Content hashes (contentHash, as 16 hex digits) written at compile time:
  /// model.so's whole file, weights.bin's sample (weightsSampleHash) and whole
  /// file. The weights' are empty with externalWeights (filled elsewhere).
  std::string libraryHash, weightsSampleHash, weightsHash;
};

/// manifest.txt's text for `manifest`: its entries, the hashes, and last a
/// `manifest_hash` line, the hash of every byte before it.
std::string printManifest(const Manifest &manifest);

/// The plan model.so is compiled for: the manifest's entries without comments
/// or hashes (target, files, sizes, max tokens, the tensor and weight tables).
/// model.so returns it from moec_artifact_plan (ArtifactABI.h), and the loader
/// refuses a manifest whose plan differs.
std::string printPlan(const Manifest &manifest);

/// Parses manifest text; `path` names it in errors ("PATH:LINE: why"). Checks
/// the grammar, every number's range, the dtypes and shapes, that the named
/// files lie inside the artifact, and the manifest_hash line; fills `manifest`
/// only on success.
Status parseManifest(std::string_view text, const std::string &path, Manifest &manifest);

/// A 64-bit content hash (four interleaved multiply-xorshift lanes over 8-byte
/// words, then the tail and the length): a check against damage, not against
/// an attacker, at memory speed.
uint64_t contentHash(const void *data, uint64_t bytes);
/// The hash of weights.bin at a cost independent of its size: its length, its
/// first and last 64 KiB and 64 blocks of 4 KiB spread evenly between.
uint64_t weightsSampleHash(const unsigned char *data, uint64_t bytes);
/// 16 lowercase hex digits.
std::string hashText(uint64_t hash);

/// weights.bin's header for `tensorCount` tensors in a file of `fileBytes`.
void writeWeightsHeader(uint64_t tensorCount, uint64_t fileBytes,
                        char out[kWeightsHeaderBytes]);

/// Checks the header at the start of a weights file of `fileBytes` bytes
/// (at least kWeightsHeaderBytes) against the format and the manifest's size.
Status checkWeightsHeader(const unsigned char *header, uint64_t fileBytes,
                          const std::string &path);

/// Bytes per element of a weight dtype (f32 4, bf16 2, f8e4m3 1, f8e8m0 1,
/// i32 4, i64 8), 0 for f4e2m1 (not a whole byte) and an unknown one.
int weightDTypeBytes(std::string_view dtype);

/// "[1,-1,64]" (the manifest's shape spelling) and its inverse.
std::string printShape(const std::vector<int64_t> &shape);
bool parseShape(std::string_view text, std::vector<int64_t> &shape);

} // namespace moec::rt::artifact

#endif // MOEC_RUNTIME_ARTIFACTFORMAT_H
