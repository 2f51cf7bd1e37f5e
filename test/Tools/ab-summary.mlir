// bench/ab_summary.py: an A/B's runs (bench_moe.json each, in the order run)
// become each run's time per cell and the first label's median over the
// others'; FP8 only where a run has it; a missing run is an error naming it.
// --timelines keeps moec's timelines from a --profile file, not transformers'.

// RUN: rm -rf %t && split-file %s %t
// RUN: %python %moec_src/bench/ab_summary.py %t/new:new %t/prev:prev %t/new2:new | FileCheck %s
// CHECK: bf16: ms per run (new, prev, new); new's median / each other label's
// CHECK-NEXT: deepseek-v3 T=1 0.3000 0.2000 0.1000 new/prev 1.000
// CHECK-NEXT: deepseek-v3 T=16 1.0000 2.0000 1.0000 new/prev 0.500
// CHECK-NEXT: qwen3moe-30b-a3b T=1 0.0700 0.0800 0.0700 new/prev 0.875
// CHECK-NEXT: FP8: ms per run (new, prev, new); new's median / each other label's
// CHECK-NEXT: deepseek-v3 T=1 0.1000 0.2000 0.1000 new/prev 0.500
// CHECK-NOT: qwen3moe

// RUN: not %python %moec_src/bench/ab_summary.py %t/new:new %t/missing:prev 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: missing: no usable bench_moe.json

// RUN: %python %moec_src/bench/ab_summary.py --timelines %t/profile.txt | FileCheck %s --check-prefix=TIMELINE
// TIMELINE: == qwen3moe-30b-a3b T=1
// TIMELINE-NEXT: timeline of the last call
// TIMELINE-NEXT: 0.0 4.3 linearKernel
// TIMELINE-NEXT: span 4.3 µs
// TIMELINE-NOT: transformers

//--- new/bench_moe.json
{"rows": [{"model": "deepseek-v3", "T": 1, "moec": 0.3, "moec_fp8": 0.1},
          {"model": "deepseek-v3", "T": 16, "moec": 1.0},
          {"model": "qwen3moe-30b-a3b", "T": 1, "moec": 0.07}]}
//--- prev/bench_moe.json
{"rows": [{"model": "deepseek-v3", "T": 1, "moec": 0.2, "moec_fp8": 0.2},
          {"model": "deepseek-v3", "T": 16, "moec": 2.0},
          {"model": "qwen3moe-30b-a3b", "T": 1, "moec": 0.08}]}
//--- new2/bench_moe.json
[{"model": "deepseek-v3", "T": 1, "moec": 0.1, "moec_fp8": 0.1},
 {"model": "deepseek-v3", "T": 16, "moec": 1.0},
 {"model": "qwen3moe-30b-a3b", "T": 1, "moec": 0.07}]
//--- profile.txt
== qwen3moe-30b-a3b T=1: per-kernel GPU time over 5 calls
(a table)
timeline of the last call (µs: start, length, gap since the previous end):
     0.0      4.3           linearKernel
span 4.3 µs
== transformers grouped_mm T=1: per-kernel GPU time over 5 calls
timeline of the last call (µs: start, length, gap since the previous end):
     0.0      9.9           torchKernel
span 9.9 µs
