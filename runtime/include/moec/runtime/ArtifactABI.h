//===- ArtifactABI.h - the contract between model.so and the loader -*- C++ -*-===//
//
// The generated code of an artifact (codegen/lib/EmitCpp) exports these C
// functions; the loader (runtime/src/Model.cpp) dlopens model.so and calls them.
// Each model.so links its own static copy of the CPU kernels (and hides it), so
// nothing of moec is needed at run time and the loader passes only plain
// pointers across the boundary. Bump the version on any change.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_ARTIFACTABI_H
#define MOEC_RUNTIME_ARTIFACTABI_H

#include <cstdint>

#define MOEC_ARTIFACT_ABI_VERSION 1

extern "C" {
/// MOEC_ARTIFACT_ABI_VERSION of the code generator that wrote the library.
using moec_artifact_abi_version_fn = int (*)();
/// Creates the model's state (its thread pool: `threads` workers, 0 for the
/// hardware's concurrency); null on failure.
using moec_artifact_create_fn = void *(*)(unsigned threads);
using moec_artifact_destroy_fn = void (*)(void *state);
/// Runs the function once. `weights` is weights.bin as mapped (64-byte
/// aligned base), `inputs`/`outputs` follow the manifest's order, `tokens` is
/// the token count (0 when no dimension is dynamic) and `workspace` holds
/// manifest's workspace_bytes, 64-byte aligned. Returns 0.
using moec_artifact_run_fn = int (*)(void *state, const unsigned char *weights,
                                     const void *const *inputs, void *const *outputs,
                                     int64_t tokens, unsigned char *workspace);
}

#endif // MOEC_RUNTIME_ARTIFACTABI_H
