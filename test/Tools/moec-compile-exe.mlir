// `moec compile --emit=exe -o FILE`: one executable, moec-run with the artifact
// appended (runtime/include/moec/runtime/Bundle.h). It takes moec-run's flags
// without ARTIFACT, moec-run (and moec_load) take it as an ARTIFACT, and a
// damaged one is refused with the reason and no output file.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=exe -o %t/mixtral
// RUN: %t/mixtral --inputs %fixtures/mixtral/inputs.npz --outputs %t/out.npz --expected-outputs %fixtures/mixtral/expected.npz --rtol 1e-5 --atol 1e-6 --scale-atol | FileCheck %s --check-prefix=OUTPUT
// RUN: ls %t/out.npz
// RUN: moec-run %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %t/out.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=OUTPUT
// OUTPUT: output [1, 7, 64]: {{.*}}: ok
// RUN: %t/mixtral --help | FileCheck %s --check-prefix=USAGE
// USAGE: usage: mixtral --inputs IN.npz [--outputs OUT.npz]
// An earlier moec executable may be overwritten.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=exe -o %t/mixtral
// RUN: %t/mixtral --inputs %fixtures/mixtral/inputs.npz --expected-outputs %t/out.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=OUTPUT

// RUN: not %t/mixtral %t/mixtral --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=POSITIONAL
// POSITIONAL: mixtral: error: this executable carries its model; unexpected argument '{{.*}}mixtral'

// Cut 1000 bytes out of the middle, trailer kept: the parts no longer fit.
// RUN: %python %S/Inputs/damage-bundle.py cut %t/mixtral %t/cut
// RUN: not %t/cut --inputs %fixtures/mixtral/inputs.npz --outputs %t/cut.npz 2>&1 | FileCheck %s --check-prefix=CUT
// CUT: cut: error: {{.*}}cut: the bundled {{.*}} lies outside the file's {{[0-9]+}} bytes (truncated?)
// RUN: not ls %t/cut.npz
// RUN: not moec-run %t/cut --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=CUT-LOAD
// CUT-LOAD: moec-run: error: {{.*}}cut: the bundled {{.*}} lies outside the file's

// Another bundle format version in the trailer.
// RUN: %python %S/Inputs/damage-bundle.py version %t/mixtral %t/version
// RUN: not %t/version --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=VERSION
// VERSION: error: {{.*}}version: bundle format version 7 is not supported (this runtime reads version 1)

// A damaged bundled manifest names itself.
// RUN: %python %S/Inputs/damage-bundle.py manifest %t/mixtral %t/manifest
// RUN: not %t/manifest --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=MANIFEST
// MANIFEST: error: {{.*}}manifest (bundled manifest):1: not a moec artifact manifest

// Damaged bundled weights or model library: their hashes say so.
// RUN: %python %S/Inputs/damage-bundle.py weight %t/mixtral %t/weight
// RUN: not %t/weight --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=WEIGHT
// WEIGHT: error: {{.*}}weight: the weights do not match the manifest's weights_sample_hash
// RUN: %python %S/Inputs/damage-bundle.py library %t/mixtral %t/library
// RUN: not %t/library --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=LIB
// LIB: error: {{.*}}library (bundled model library): does not match the manifest's library_hash

// A file that is neither an artifact directory nor a moec executable.
// RUN: not moec-run %fixtures/mixtral/inputs.npz --inputs %fixtures/mixtral/inputs.npz 2>&1 | FileCheck %s --check-prefix=NEITHER
// NEITHER: moec-run: error: {{.*}}inputs.npz: neither an artifact directory nor an executable written by `moec compile --emit=exe`

// The driver's checks: --emit needs --target, knows two kinds, needs the
// weights, and overwrites only an earlier moec executable.
// RUN: not moec compile %fixtures/mixtral/model.onnx --emit=exe -o %t/x 2>&1 | FileCheck %s --check-prefix=NO-TARGET
// NO-TARGET: moec: --emit needs --target
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=elf -o %t/x 2>&1 | FileCheck %s --check-prefix=KIND
// KIND: moec: unknown --emit='elf' (artifact, exe, mlir)
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=exe --weights=external -o %t/x 2>&1 | FileCheck %s --check-prefix=EXTERNAL
// EXTERNAL: moec: --emit=exe needs the weights (drop --weights=external)
// RUN: echo keep > %t/precious
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=exe -o %t/precious 2>&1 | FileCheck %s --check-prefix=PRECIOUS
// PRECIOUS: error: '{{.*}}precious' exists and is not an executable written by moec compile --emit=exe; not overwriting it
// RUN: FileCheck %s --check-prefix=KEPT < %t/precious
// KEPT: keep
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --emit=exe 2>&1 | FileCheck %s --check-prefix=NO-OUTPUT
// NO-OUTPUT: moec: --target=cpu --emit=exe writes an executable; name it with -o FILE
