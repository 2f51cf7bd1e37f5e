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

// A group of one (--ep-size=1, --ep 1) runs through the same path: one rank,
// the store, the handshake and the communicator; a plain load refuses it.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --ep-size=1 --target=cpu -o %t/deepseek1
// RUN: grep -c "^expert_parallel 1$" %t/deepseek1/manifest.txt
// RUN: moec-run %t/deepseek1 --ep 1 --inputs %fixtures/deepseek_v3/inputs.npz --expected-outputs %fixtures/deepseek_v3/expected.npz --scale-atol | FileCheck %s --check-prefix=DS
// RUN: not moec-run %t/deepseek1 --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAIN1
// PLAIN1: error: {{.*}}deepseek1: is compiled for 1 expert-parallel ranks; load it as one of them

// Cast experts are shared out as cast: FP8 (e4m3 codes and block scales) and
// MXFP4 (e2m1 codes and e8m0 scales) shards on N ranks give the one-device
// artifact's outputs, up to the order of the ranks' sum.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --fp8 --target=cpu -o %t/ds-fp8
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --fp8 --ep-size=2 --target=cpu -o %t/ds-fp8-ep
// RUN: grep -c "f8e4m3 .* shard" %t/ds-fp8-ep/manifest.txt | FileCheck %s --check-prefix=FP8SHARDS
// FP8SHARDS: 2
// RUN: moec-run %t/ds-fp8 --inputs %fixtures/deepseek_v3/inputs.npz --outputs %t/ds-fp8.npz
// RUN: moec-run %t/ds-fp8-ep --ep 2 --inputs %fixtures/deepseek_v3/inputs.npz --expected-outputs %t/ds-fp8.npz --rtol 1e-5 --atol 1e-6 --scale-atol | FileCheck %s --check-prefix=DS
// RUN: moec compile %fixtures/gpt_oss/model.onnx --expert-weights=mxfp4 --target=cpu -o %t/oss-mxfp4
// RUN: moec compile %fixtures/gpt_oss/model.onnx --expert-weights=mxfp4 --ep-size=2 --target=cpu -o %t/oss-mxfp4-ep
// RUN: grep -c "f4e2m1 .* shard" %t/oss-mxfp4-ep/manifest.txt | FileCheck %s --check-prefix=FP8SHARDS
// RUN: moec-run %t/oss-mxfp4 --inputs %fixtures/gpt_oss/inputs.npz --outputs %t/oss-mxfp4.npz
// RUN: moec-run %t/oss-mxfp4-ep --ep 2 --inputs %fixtures/gpt_oss/inputs.npz --expected-outputs %t/oss-mxfp4.npz --rtol 1e-5 --atol 1e-6 --scale-atol | FileCheck %s --check-prefix=GPTOSS

// Every rank refuses a group of another size, and the status says so.
// RUN: not moec-run %t/deepseek --ep 3 --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: error: {{.*}}deepseek: is compiled for 4 expert-parallel ranks, but the group has 3

// A launcher's rank whose peers never start ends within MOEC_DIST_TIMEOUT (rank 0
// serves the store on the port given: one of the shell's pid, so that two runs
// of this test at once do not meet).
// RUN: env MOEC_DIST_TIMEOUT=1 WORLD_SIZE=4 RANK=0 MASTER_ADDR=127.0.0.1 not bash -c 'MASTER_PORT=$((20000 + $$ %% 40000)) exec "$0" "$@"' moec-run %t/deepseek --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: rank 0 of 4: handshake of rank 0 of 4: 1 of 4 processes joined within 1 s; rank(s) 1, 2, 3 missing

// Ranks that load different artifacts are refused at start, each naming both.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --ep-size=2 --target=cpu -o %t/deepseek2
// RUN: not bash -c 'export MOEC_DIST_TIMEOUT=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ %% 40000)); RANK=1 "$0" "$1" --inputs "$3" & RANK=0 "$0" "$2" --inputs "$3"; s=$?; wait; exit $s' moec-run %t/gpt_oss %t/deepseek2 %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=MISMATCH
// MISMATCH-DAG: error: rank 0 of 2: handshake of rank 0 of 2: rank 1 ({{.*}}) runs artifact 'manifest {{[0-9a-f]+}}', rank 0 ({{.*}}) runs 'manifest {{[0-9a-f]+}}'
// MISMATCH-DAG: error: rank 1 of 2: handshake

// A rank that fails (here every rank: inputs it cannot read) ends the group
// with its error, and no output is written.
// RUN: not moec-run %t/deepseek --ep 4 --inputs %t/absent.npz --outputs %t/none.npz 2>&1 | FileCheck %s --check-prefix=FAILS
// FAILS: error: {{.*}}absent.npz
// RUN: not ls %t/none.npz

// Without a group, the artifact is refused.
// RUN: not moec-run %t/deepseek --inputs %fixtures/deepseek_v3/inputs.npz 2>&1 | FileCheck %s --check-prefix=PLAIN
// PLAIN: error: {{.*}}deepseek: is compiled for 4 expert-parallel ranks; load it as one of them (moec_load_expert_parallel)
