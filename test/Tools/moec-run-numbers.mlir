// Every number moec-run and moec-interp read from their flags is parsed
// strictly (the whole text, no overflow, a sane range), and an .npz input is
// checked against the model before it is inflated: a bad one is an error
// naming the flag or the array, exit status 2, and no output file.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu -o %t/mixtral
// RUN: cp %fixtures/mixtral/inputs.npz %t/in.npz

// --bench: a count in [1, 10^7]. strtol saturated 99999999999999999999 to
// LONG_MAX, and moec-run ran until it was killed.
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --outputs %t/out.npz --bench 99999999999999999999 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: moec-run: error: --bench: not a positive count: '99999999999999999999' (a whole number in [1, 10000000])
// RUN: not ls %t/out.npz
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench=10000001 2>&1 | FileCheck %s --check-prefix=OVER
// OVER: moec-run: error: --bench: not a positive count: '10000001'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench 1e3 2>&1 | FileCheck %s --check-prefix=FLOAT
// FLOAT: moec-run: error: --bench: not a positive count: '1e3'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: moec-run: error: --bench: not a positive count: '-1'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench=+3 2>&1 | FileCheck %s --check-prefix=PLUS
// PLUS: moec-run: error: --bench: not a positive count: '+3'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench=' 3' 2>&1 | FileCheck %s --check-prefix=SPACE
// SPACE: moec-run: error: --bench: not a positive count: ' 3'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --bench=3x 2>&1 | FileCheck %s --check-prefix=SUFFIX
// SUFFIX: moec-run: error: --bench: not a positive count: '3x'
// RUN: moec-run %t/mixtral --inputs %t/in.npz --bench 2 | FileCheck %s --check-prefix=TWO
// TWO: bench: 2 runs, 7 tokens

// --rtol, --atol: finite and non-negative.
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --expected-outputs %fixtures/mixtral/expected.npz --rtol 1e999 2>&1 | FileCheck %s --check-prefix=RTOL
// RTOL: moec-run: error: --rtol: not a non-negative number: '1e999'
// RUN: not moec-run %t/mixtral --inputs %t/in.npz --expected-outputs %fixtures/mixtral/expected.npz --atol nan 2>&1 | FileCheck %s --check-prefix=ATOL
// ATOL: moec-run: error: --atol: not a non-negative number: 'nan'
// RUN: not moec-interp %fixtures/mixtral/model.onnx --inputs %t/in.npz --expected-outputs %fixtures/mixtral/expected.npz --rtol=nan 2>&1 | FileCheck %s --check-prefix=INTERP-RTOL
// INTERP-RTOL: moec-interp: error: --rtol: not a finite non-negative number: nan
// RUN: not moec-interp %fixtures/mixtral/model.onnx --inputs %t/in.npz --expected-outputs %fixtures/mixtral/expected.npz --atol=-1 2>&1 | FileCheck %s --check-prefix=INTERP-ATOL
// INTERP-ATOL: moec-interp: error: --atol: not a finite non-negative number: -1
// RUN: not moec-interp %fixtures/mixtral/model.onnx --inputs %t/in.npz --atol=inf 2>&1 | FileCheck %s --check-prefix=INTERP-INF
// INTERP-INF: moec-interp: error: --atol: not a finite non-negative number: inf

// A deflated hidden_states whose header declares [1, 131072, 64] f32 (32 MiB,
// 32 KiB on disk): more than the input can hold at the artifact's 8192 tokens,
// refused from its header before 32 MiB are allocated or inflated. So is an
// array that names no input but is larger than any input.
// RUN: %python %S/Inputs/npz-bomb.py %t/bomb.npz hidden_states 131072
// RUN: not moec-run %t/mixtral --inputs %t/bomb.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=BOMB
// BOMB: moec-run: error: {{.*}}bomb.npz: member 'hidden_states.npy': its header declares f32 [1, 131072, 64] (33554432 bytes), more than the 4194304 bytes accepted for it
// RUN: not ls %t/out.npz
// RUN: %python %S/Inputs/npz-bomb.py %t/other.npz not_an_input 131072
// RUN: not moec-run %t/mixtral --inputs %t/other.npz --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: moec-run: error: {{.*}}other.npz: member 'not_an_input.npy': its header declares f32 [1, 131072, 64] (33554432 bytes), more than the 4194304 bytes accepted for it
// RUN: not ls %t/out.npz
