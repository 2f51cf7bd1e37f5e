// bench/ncu_summary.py: ncu's CSV (raw metrics, as scripts/h200-bench.sh asks
// for them) and bench_moe.py --ncu's log become one table per cell; a cell's
// kernels end with combine (templated or not); ncu's own lines are skipped;
// units convert.

// RUN: rm -rf %t && split-file %s %t
// RUN: %python %moec_src/bench/ncu_summary.py %t/ncu.csv %t/bench.log | FileCheck %s
// CHECK-LABEL: ### qwen3moe-30b-a3b 1: touched bytes 0.075 GB, 0.00 TFLOP
// CHECK: | linearKernel | 5.5 | 0.001 | 205 | 5 | 4.30 | 24.85 | 12.34 | 210 | (16, 1, 8) | (256, 1, 1) |
// CHECK: | combineKernel<float> | 4.6 | 0.000 | 0 | 0 | 0.38 | 0.09 | 6.19 | 39 | (1, 4, 1) | (128, 1, 1) |
// CHECK: kernels' sum 10.1 µs
// CHECK-LABEL: ### mixtral-8x7b 8192: touched bytes 2.819 GB, 5.77 TFLOP
// CHECK: | CUTLASS grouped GEMM (wgmma) | 1500.0 | 3.000 | 2000 | 47 | 52.36 | 89.08 | 17.17 | 168 | (132, 1, 1) | (384, 1, 1) |
// CHECK: | combineKernel | 124.6 |
// CHECK: kernels' sum 1624.6 µs

// A log with more cells than the CSV has kernel groups says so.
// RUN: cat %t/bench.log %t/extra.log > %t/more.log
// RUN: %python %moec_src/bench/ncu_summary.py %t/ncu.csv %t/more.log 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// WARN: warning: 2 kernel groups, 3 cells in the log

//--- ncu.csv
==PROF== Connected to process 4240 (/usr/bin/python3.12)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,122,560"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","4.30"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","5,472"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","210"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","24.85"
"0","1","python3","h","moec::<unnamed>::linearKernel(const float *, long)","1","13","(256, 1, 1)","(16, 1, 8)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","12.34"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","0"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","0.38"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","4.6"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","39"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","0.09"
"1","1","python3","h","void moec::<unnamed>::combineKernel<float>(const float *, const int *)","1","13","(128, 1, 1)","(1, 4, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","6.19"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","3.00"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","52.36"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.50"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","168"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","89.08"
"2","1","python3","h","void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(T1::Params)","1","13","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","17.17"
"3","1","python3","h","moec::<unnamed>::combineKernel(const float *)","1","13","(128, 1, 1)","(8192, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","124.6"
==PROF== Disconnected from process 4240

//--- bench.log
## qwen3moe-30b-a3b: module 1.2 GB bf16
ncu cell: qwen3moe-30b-a3b T=1 distinct=8 bytes=75497472 flops=75497472.0
ncu cell: mixtral-8x7b T=8192 distinct=8 bytes=2818572288 flops=5772436045824.0

//--- extra.log
ncu cell: mixtral-8x7b T=16 distinct=8 bytes=2818572288 flops=11274289152.0
