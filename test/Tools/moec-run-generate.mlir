// moec-run --generate on a whole model: sampling and prompt masks.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/models/mixtral/checkpoint --target=cpu --max-batch=2 --max-seq=32 -o %t/art

// Greedy is the default; sampling from the top 1 token is greedy too.
// RUN: moec-run %t/art --inputs %fixtures/models/mixtral/prompt.npz --generate 16 --temperature 1 --top-k 1 --expected-outputs %fixtures/models/mixtral/generate.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=TOP1
// TOP1: sequences [2, 23]: {{.*}}: ok

// A hot sampler leaves the greedy path (exit 1: a mismatch), and the same
// seed draws the same tokens again.
// RUN: not moec-run %t/art --inputs %fixtures/models/mixtral/prompt.npz --generate 16 --temperature 50 --seed 7 --outputs %t/hot.npz --expected-outputs %fixtures/models/mixtral/generate.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=HOT
// HOT: sequences [2, 23]: {{.*}}MISMATCH
// RUN: moec-run %t/art --inputs %fixtures/models/mixtral/prompt.npz --generate 16 --temperature 50 --seed 7 --expected-outputs %t/hot.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=SEED
// SEED: sequences [2, 23]: {{.*}}: ok
// Nucleus sampling with a tiny top-p keeps only the top token: greedy again.
// RUN: moec-run %t/art --inputs %fixtures/models/mixtral/prompt.npz --generate 16 --temperature 1 --top-p 0.000001 --expected-outputs %fixtures/models/mixtral/generate.npz --rtol 0 --atol 0 | FileCheck %s --check-prefix=TOP1

// A mask whose ones are not contiguous is refused, with nothing written.
// RUN: not moec-run %t/art --inputs %S/Inputs/gapped-mask.npz --generate 4 --outputs %t/gapped.npz 2>&1 | FileCheck %s --check-prefix=MASK
// MASK: attention_mask of sequence 0 must be 0/1 with its ones contiguous (left or right padding)
// RUN: not ls %t/gapped.npz

// Sampling flags on a block are an error.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cpu -o %t/block
// RUN: not moec-run %t/block --inputs %fixtures/mixtral/inputs.npz --generate 4 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: --generate and sampling need a whole model
