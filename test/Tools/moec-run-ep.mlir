// moec-run of one artifact for every expert-parallel rank (moec compile
// --ep-size=N): --ep N starts N processes, one a rank, that meet through a TCP
// store on the loopback and all-reduce over TCP; rank 0 writes and compares.
// Against onnxruntime's outputs, with a shared expert (DeepSeek-V3, counted
// once: on rank 0) and with biases (gpt-oss). Then the faults: a group of
// another size, a rank that never comes, a rank that fails, a plain run.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --ep-size=4 --target=cpu -o %t/deepseek
// RUN: moec compile %fixtures/gpt_oss/model.onnx --ep-size=2 --target=cpu -o %t/gpt_oss

// RUN: moec-run %t/deepseek --ep 4 --inputs %fixtures/deepseek_v3/inputs.npz --outputs %t/ds.npz --expected-outputs %fixtures/deepseek_v3/expected.npz --scale-atol | FileCheck %s --check-prefix=DS
// DS: output [1, 7, 64]: {{.*}}: ok
// DS-NOT: output
// RUN: moec-run %t/gpt_oss --ep=2 --inputs %fixtures/gpt_oss/inputs.npz --expected-outputs %fixtures/gpt_oss/expected.npz --scale-atol | FileCheck %s --check-prefix=GPTOSS
// GPTOSS: output [1, 7, 64]: {{.*}}: ok

// Every rank refuses a group of another size, and the status says so.
// RUN: not moec-run %t/deepseek --ep 3 --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: error: {{.*}}deepseek: is compiled for 4 expert-parallel ranks, but the group has 3

// A launcher's rank whose peers never start ends within MOEC_DIST_TIMEOUT (rank 0
// serves the store on the port given: one no other test uses).
// RUN: env MOEC_DIST_TIMEOUT=1 WORLD_SIZE=4 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 not moec-run %t/deepseek --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: rank 0 of 4: handshake of rank 0 of 4: 1 of 4 processes joined within 1 s; rank(s) 1, 2, 3 missing

// A rank that fails (here every rank: inputs it cannot read) ends the group
// with its error, and no output is written.
// RUN: not moec-run %t/deepseek --ep 4 --inputs %t/absent.npz --outputs %t/none.npz 2>&1 | FileCheck %s --check-prefix=FAILS
// FAILS: error: {{.*}}absent.npz
// RUN: not ls %t/none.npz

// Without a group, the artifact is refused.
// RUN: not moec-run %t/deepseek --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAIN
// PLAIN: error: {{.*}}deepseek: is compiled for 4 expert-parallel ranks; load it as one of them (moec_load_expert_parallel)
