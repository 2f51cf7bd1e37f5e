// bench/bench_table.py: several bench_moe.json runs become one table. Rows keep
// the files' model order, sorted by T within a model; a (model, T) measured
// twice keeps the later run's row. The events table sets moec's host time
// against the fastest CUDA-event median of every configuration, eager or
// compiled. A file that is not a bench_moe.json is an error naming it.

// RUN: rm -rf %t && split-file %s %t
// RUN: %python %moec_src/bench/bench_table.py %t/run1.json %t/run2.json -o %t/out
// RUN: FileCheck %s < %t/out/bench_moe.md
// CHECK: | model | T | hit | eager |
// CHECK: | qwen3moe-30b-a3b | 1 | 8 | 2.000 |
// CHECK-NEXT: | qwen3moe-30b-a3b | 8192 | 128 | 60.000 |
// CHECK-NEXT: | mixtral-8x7b | 8192 | 8 | 13.000 |
// CHECK: | model | T | grouped_mm+CG (events) | grouped_mm+MA (events) | moec (host) | moec / best events |
// CHECK-NEXT: |---|---|---|---|---|---|
// CHECK-NEXT: | qwen3moe-30b-a3b | 1 | 0.160 |  | 0.080 | 0.50x (grouped_mm+CG) |
// CHECK-NEXT: | qwen3moe-30b-a3b | 8192 |  | 1.600 | 1.440 | 0.90x (grouped_mm+MA) |
// CHECK-NEXT: | mixtral-8x7b | 8192 |  | 9.500 | 9.300 | 0.98x (grouped_mm+MA) |
// CHECK: | model | T | grouped_mm+CG | grouped_mm+MA | moec | moec / best of all |
// CHECK: | qwen3moe-30b-a3b | 8192 |  | 1.900 | 1.440 | 0.76x (grouped_mm+MA) |
// moec against each cell's fastest configuration in alternating rounds, where
// a run measured that; only those rows.
// CHECK: timed again in alternating rounds
// CHECK: | model | T | configuration | its ms | moec ms | moec / best (interleaved) | its SM clock | moec's SM clock |
// CHECK-NEXT: |---|---|---|---|---|---|---|---|
// CHECK-NEXT: | mixtral-8x7b | 8192 | grouped_mm+MA | 9.800 | 9.100 | 0.93x | 1500 (1485), 700 W, power-cap | 1485 (1470), 700 W, power-cap |
// CHECK-EMPTY:
// The SM clocks of the timed loops, where a run recorded them (bench/gpu_clocks.py);
// rows without them are left out.
// CHECK: SM clock while each timed loop ran
// CHECK: | model | T | grouped_mm+MA | moec |
// CHECK-NEXT: |---|---|---|---|
// CHECK-NEXT: | mixtral-8x7b | 8192 | 1830 (1755), 655 W | 1755 (1650), 690 W, power-cap |
// RUN: %python -c "import json,sys; print(json.load(open(sys.argv[1]))['meta']['merged_from'])" %t/out/bench_moe.json | FileCheck %s --check-prefix=META
// META: ['run1.json', 'run2.json']

// RUN: not %python %moec_src/bench/bench_table.py %t/run1.json %t/bad.json -o %t/bad 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: bench_table.py: {{.*}}bad.json: not a bench_moe.json
// RUN: not %python %moec_src/bench/bench_table.py %t/missing.json -o %t/bad 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: bench_table.py: {{.*}}missing.json: not a bench_moe.json

//--- run1.json
{"meta": {"transformers": "5.17.0", "torch": "2.11", "gpu": "H200"},
 "rows": [
  {"model": "qwen3moe-30b-a3b", "T": 1, "distinct": 8, "bytes_GB": 0.0755, "flops": 7.5e7,
   "eager": 2.0, "grouped_mm": 0.7, "grouped_mm_events": 0.5, "moec": 0.08, "moec_blocking": 0.08,
   "best": 0.7, "best_impl": "grouped_mm", "ratio": 0.114, "grouped_mm+CG": 0.23,
   "grouped_mm+CG_events": 0.16, "best_all": 0.23, "best_all_impl": "grouped_mm+CG",
   "ratio_all": 0.348, "check": "ok", "moec_rel_err": 2.3e-3, "moec_max_abs": 7.8e-4},
  {"model": "qwen3moe-30b-a3b", "T": 8192, "distinct": 128, "bytes_GB": 1.208, "flops": 6.18e11,
   "eager": 99.0, "moec": 9.9, "check": "ok", "moec_rel_err": 1e-3, "moec_max_abs": 1e-3}]}
//--- run2.json
{"meta": {"transformers": "5.17.0", "torch": "2.11", "gpu": "H200"},
 "rows": [
  {"model": "qwen3moe-30b-a3b", "T": 8192, "distinct": 128, "bytes_GB": 1.208, "flops": 6.18e11,
   "eager": 60.0, "grouped_mm": 4.1, "grouped_mm_events": 3.5, "moec": 1.44, "moec_blocking": 1.45,
   "best": 4.1, "best_impl": "grouped_mm", "ratio": 0.341, "grouped_mm+MA": 1.9,
   "grouped_mm+MA_events": 1.6, "best_all": 1.9, "best_all_impl": "grouped_mm+MA",
   "ratio_all": 0.758, "check": "ok", "moec_rel_err": 2.3e-3, "moec_max_abs": 2.7e-3},
  {"model": "mixtral-8x7b", "T": 8192, "distinct": 8, "bytes_GB": 2.819, "flops": 5.77e12,
   "eager": 13.0, "grouped_mm": 13.3, "grouped_mm_events": 13.4, "moec": 9.3, "moec_blocking": 9.7,
   "best": 13.0, "best_impl": "eager", "ratio": 0.715, "grouped_mm+MA": 9.9,
   "grouped_mm+MA_events": 9.5, "best_all": 9.9, "best_all_impl": "grouped_mm+MA",
   "ratio_all": 0.939, "check": "ok", "moec_rel_err": 2.3e-3, "moec_max_abs": 3.6e-2,
   "grouped_mm+MA_sm": {"mhz": 1830, "mhz_min": 1755, "watts": 655.4, "samples": 90, "throttle": []},
   "moec_sm": {"mhz": 1755, "mhz_min": 1650, "watts": 690.2, "samples": 80, "throttle": ["power-cap"]},
   "il_config": "grouped_mm+MA", "il_rounds": 8, "il_best": 9.8, "il_moec": 9.1, "il_ratio": 0.93,
   "il_best_sm": {"mhz": 1500, "mhz_min": 1485, "watts": 700.1, "samples": 40, "throttle": ["power-cap"]},
   "il_moec_sm": {"mhz": 1485, "mhz_min": 1470, "watts": 699.9, "samples": 40, "throttle": ["power-cap"]}}]}
//--- bad.json
{"rows": "not a list of rows"}
