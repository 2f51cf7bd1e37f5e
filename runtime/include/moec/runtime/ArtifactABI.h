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

#include <cstddef>
#include <cstdint>

#define MOEC_ARTIFACT_ABI_VERSION 6

// Errors: create and run return 0 on success; otherwise they write a
// NUL-terminated message (at most `error_bytes` bytes, truncated) into `error`
// and return nonzero. A CUDA artifact's message names the CUDA call and its
// reason (moec/runtime/Cuda.h).
extern "C" {
/// MOEC_ARTIFACT_ABI_VERSION of the code generator that wrote the library.
using moec_artifact_abi_version_fn = int (*)();
/// The plan the library was compiled for: moec::rt::artifact::printPlan of its
/// manifest (moec/runtime/ArtifactFormat.h), a NUL-terminated string that the
/// loader compares with the manifest it read.
using moec_artifact_plan_fn = const char *(*)();
/// Creates the model's state in `*state`: a CPU artifact's thread pool
/// (`threads` workers, 0 for the hardware's concurrency); a CUDA artifact's
/// stream, device workspace and its copy of the weights (`weights`: weights.bin
/// as mapped, `weights_bytes` long), uploaded here once.
using moec_artifact_create_fn = int (*)(unsigned threads, const unsigned char *weights,
                                        uint64_t weights_bytes, void **state, char *error,
                                        size_t error_bytes);
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
