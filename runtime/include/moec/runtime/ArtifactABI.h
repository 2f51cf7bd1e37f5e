//===- ArtifactABI.h - the contract between model.so and the loader -*- C++ -*-===//
//
// The generated code of an artifact (codegen/lib/Emitter) exports these C
// functions; the loader (runtime/src/Model.cpp) dlopens model.so and calls them.
// Each model.so links its own static copy of the CPU (or CUDA) kernels (and hides it), so
// nothing of moec is needed at run time and the loader passes only plain
// pointers across the boundary. Bump the version on any change.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_ARTIFACTABI_H
#define MOEC_RUNTIME_ARTIFACTABI_H

#include "moec/moec.h"

#include <cstddef>
#include <cstdint>

#define MOEC_ARTIFACT_ABI_VERSION 8

// Errors: create and run return 0 on success; otherwise they write a
// NUL-terminated message (at most `error_bytes` bytes, truncated) into `error`
// and return nonzero. A CUDA artifact's message names the CUDA call and its
// reason (moec/runtime/Cuda.h).
extern "C" {
/// How one weight of the weight image is filled at load (docs/artifact.md,
/// "Weights filled at load"): the loader's reading of a manifest weight line.
/// The generated code addresses the image; weights.bin holds only the stored
/// weights.
enum moec_weight_fill_kind : int32_t {
  MOEC_FILL_STORED = 0,   ///< `count` elements at byte `source` of weights.bin
  MOEC_FILL_CONSTANT = 1, ///< every element `value`
  MOEC_FILL_NORMAL = 2,   ///< element i: `value` * the generator's normal (seed, stream, i)
};
/// The stored element type of a filled weight.
enum moec_weight_fill_dtype : int32_t {
  MOEC_FILL_F32 = 0,
  MOEC_FILL_BF16 = 1, ///< f32 rounded to nearest even
  MOEC_FILL_E4M3 = 2, ///< f32 rounded to nearest even, saturating at +-448
  /// MXFP4 codes (e2m1): f32 rounded to the nearest code, ties to even,
  /// saturating at +-6; two a byte, element 2j in the low nibble (MXFP4.h)
  MOEC_FILL_E2M1 = 3,
  MOEC_FILL_E8M0 = 4, ///< MXFP4 scales: a power of two 2^e as the byte e + 127
};
struct moec_weight_fill {
  uint64_t offset; ///< bytes into the image (256-byte aligned)
  uint64_t count;  ///< elements (MOEC_FILL_STORED: bytes; MOEC_FILL_E2M1: codes)
  uint64_t source; ///< MOEC_FILL_STORED: bytes into weights.bin
  uint64_t stream; ///< MOEC_FILL_NORMAL: the generator's stream (the weight's name, hashed)
  float value;     ///< MOEC_FILL_CONSTANT: the value; MOEC_FILL_NORMAL: the standard deviation
  int32_t kind;    ///< moec_weight_fill_kind
  int32_t dtype;   ///< moec_weight_fill_dtype (MOEC_FILL_STORED: unused)
  int32_t reserved;
  /// MOEC_FILL_NORMAL: the generator's index of element 0, a multiple of 4 (an
  /// expert-parallel rank's shard continues the whole tensor's sequence).
  uint64_t first;
};
/// The weight image of an artifact whose manifest fills weights at load.
struct moec_weight_plan {
  uint64_t image_bytes; ///< the image the generated code addresses (zeros between weights)
  uint64_t seed;        ///< the manifest's random_seed
  const moec_weight_fill *fills;
  size_t num_fills;
};

// moec_communicator (moec.h): the expert-parallel group a model runs in (an
// artifact with `expert_parallel N`: moe.sort reads its rank, moe.all_reduce
// calls its all-reduce). The loader's communicator stands behind it, so
// model.so links no communication library.

/// MOEC_ARTIFACT_ABI_VERSION of the code generator that wrote the library.
using moec_artifact_abi_version_fn = int (*)();
/// The plan the library was compiled for: moec::rt::artifact::printPlan of its
/// manifest (moec/runtime/ArtifactFormat.h), a NUL-terminated string that the
/// loader compares with the manifest it read.
using moec_artifact_plan_fn = const char *(*)();
/// Creates the model's state in `*state`: a CPU artifact's thread pool
/// (`threads` workers, 0 for the hardware's concurrency); a CUDA artifact's
/// stream, device workspace and its copy of the weights (`weights`: weights.bin
/// as mapped, `weights_bytes` long), uploaded here once. `plan` is null when
/// `weights` is the image the code addresses; else (CUDA artifacts whose
/// weights are filled at load) the image is built on the device from the
/// stored bytes in `weights` and the plan's fills. A CPU artifact is always
/// given the image (the loader builds it on the host). `comm`: the
/// expert-parallel group of an artifact with `expert_parallel N` (size N),
/// kept for the model's life; null otherwise.
using moec_artifact_create_fn = int (*)(unsigned threads, const unsigned char *weights,
                                        uint64_t weights_bytes, const moec_weight_plan *plan,
                                        const moec_communicator *comm, void **state,
                                        char *error, size_t error_bytes);
using moec_artifact_destroy_fn = void (*)(void *state);
/// Runs the function once. `weights` is weights.bin as mapped (64-byte
/// aligned base), `inputs`/`outputs` (host memory) follow the manifest's order,
/// `tokens` is the token count (0 when no dimension is dynamic) and
/// `workspace` holds manifest's workspace_bytes, 64-byte aligned (CPU target;
/// null for the CUDA target, whose workspace is on the device). `stream` is
/// null for a run the host waits for (moec_run); for moec_run_async it points
/// at the caller's cudaStream_t (CUDA target only): the run starts after the
/// work queued there so far, the stream's later work waits for the run, and
/// the call returns without waiting for the GPU.
using moec_artifact_run_fn = int (*)(void *state, const unsigned char *weights,
                                     const void *const *inputs, void *const *outputs,
                                     int64_t tokens, unsigned char *workspace,
                                     const void *stream, char *error, size_t error_bytes);
/// Empties the KV cache of sequence `sequence` (every sequence when negative)
/// of a whole model (manifest `kv_cache`); a block's library does nothing.
using moec_artifact_reset_fn = void (*)(void *state, int64_t sequence);

/// moec_generate's steps on the device (runtime/src/Generate.cpp checks the
/// arguments and builds the prefill; moec/runtime/cuda/DeviceGenerate.h runs
/// it). Host pointers throughout.
struct moec_artifact_generate_args {
  int64_t batch;          // sequences 0..batch-1 of the cache, emptied by the caller
  int64_t max_new_tokens; // >= 1
  int64_t max_tokens;     // the artifact's max tokens: the prefill's step size
  int64_t vocab;          // V of the logits [N, V]
  /// Every prompt token, packed sequence after sequence: [prefill_tokens]
  /// each; sequence s's last prompt token (position lengths[s] - 1) gives its
  /// first new token.
  int64_t prefill_tokens;
  const int64_t *prefill_ids, *prefill_positions, *prefill_sequences;
  const int64_t *lengths; // [batch]: each prompt's length
  float temperature;      // moec_sampling's (0: greedy)
  int32_t top_k;
  float top_p;
  uint64_t seed;
  int64_t *tokens;        // out: [max_new_tokens, batch], the new tokens
  double prefill_seconds; // out: the prefill, and the decode steps, queued to done
  double decode_seconds;
};
/// Optional (CUDA whole models export it): runs `args`' generation; 0 on
/// success, else the error convention above.
using moec_artifact_generate_fn = int (*)(void *state, moec_artifact_generate_args *args,
                                          char *error, size_t error_bytes);
}

#endif // MOEC_RUNTIME_ARTIFACTABI_H
