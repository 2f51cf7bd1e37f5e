// The loader trusts no file of an artifact (docs/artifact.md, "What the loader
// verifies"): each damage below, found by hand or by an attacker's edit, is a
// clear error naming the file, exit 1, no output written; none reaches a kernel.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu -o %t/mixtral
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --max-tokens=16 -o %t/mixtral-16
// RUN: moec compile %fixtures/gpt_oss/model.onnx --target=cpu -o %t/gpt-oss
// RUN: moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %fixtures/mixtral/expected.npz --scale-atol | FileCheck %s --check-prefix=GOOD
// GOOD: ok

// An edited manifest: its own hash no longer matches.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d set target cuda
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=EDITED
// EDITED: moec-run: error: {{.*}}d/manifest.txt:{{[0-9]+}}: the manifest's content does not match its manifest_hash (damaged or edited)
// RUN: not ls %t/out.npz

// Edited with the hash recomputed: model.so's own plan disagrees. A CPU
// library called a CUDA one, a smaller workspace, more tokens than planned.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d set target cuda --rehash
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: moec-run: error: {{.*}}d/model.so: was compiled for another plan than the manifest states (the manifest says 'target cuda', the library 'target cpu'); the files belong to different builds
// PLAN: moec-run: error: {{.*}}d/model.so: was compiled for another plan than the manifest states (the manifest says '{{.+}}', the library '{{.+}}'); the files belong to different builds
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d set workspace_bytes 1024 --rehash
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral-16 %t/d set max_tokens 20000 --rehash
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: not ls %t/out.npz

// max_tokens past the limit any artifact may be planned for.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d set max_tokens 100000000 --rehash
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=TOKENS
// TOKENS: moec-run: error: {{.*}}d/manifest.txt:{{[0-9]+}}: malformed 'max_tokens' entry: max_tokens 100000000

// Another model's model.so dropped in: its hash differs; with the hash
// recomputed, its plan does.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d library %t/gpt-oss
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=LIBRARY
// LIBRARY: moec-run: error: {{.*}}d/model.so: does not match the manifest's library_hash (damaged, truncated, or from another build); recompile the model
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d library %t/gpt-oss --rehash
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAN

// A truncated model.so never reaches dlopen.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d truncate-library 5000
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=LIBRARY

// A flipped weight bit: the sampled hash covers small weights whole; large
// ones are sampled, and checked whole with MOEC_VERIFY_WEIGHTS=full.
// RUN: %python %S/Inputs/damage-artifact.py %t/mixtral %t/d flip-weight 100000
// RUN: not moec-run %t/d --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// WEIGHTS: moec-run: error: {{.*}}d/weights.bin: the weights do not match the manifest's weights_sample_hash (damaged, or from another build)
// RUN: env MOEC_VERIFY_WEIGHTS=full moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %fixtures/mixtral/expected.npz --scale-atol | FileCheck %s --check-prefix=GOOD

// The generated code checks the token count against its own plan too.
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral-16/model.cpp
// CODE: if (tokens < 0 || tokens > 16)
// CODE: MOEC_EXPORT const char *moec_artifact_plan() {
// CODE-NEXT: return "moec-artifact 4\n"
