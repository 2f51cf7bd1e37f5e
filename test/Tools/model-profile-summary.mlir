// bench/model_profile.py summary: ncu's raw CSV of one generation cut into steps
// at each embedding kernel (load-time fills before the first are no step);
// kernels grouped by name, largest first, with their DRAM traffic as a share of
// the 4.25 TB/s copy rate when the log has it, and none when it has not; the
// templated and anonymous-namespace names shortened.

// RUN: rm -rf %t && split-file %s %t
// RUN: %python %moec_src/bench/model_profile.py summary %t/bytes.csv --step 0 | FileCheck %s --check-prefix=PREFILL
// PREFILL: 2 steps; step 0: 3 kernels, 70.0 µs in all (kernels one at a time, no gaps), 170.0 MB of DRAM traffic, 57 % of copy over the step
// PREFILL: | `groupedMatmulFP8Kernel<8, 6, 1>` | 2 | 60.0 | 30.00 | 85.7 % | 170.0 | 67 |
// PREFILL: | `embeddingKernel<unsigned short>` | 1 | 10.0 | 10.00 | 14.3 % | 0.0 | — |
// RUN: %python %moec_src/bench/model_profile.py summary %t/bytes.csv | FileCheck %s --check-prefix=DECODE
// DECODE: step 1: 2 kernels, 14.0 µs
// DECODE: | `rmsNormBlockKernel<4>` | 1 | 4.0 | 4.00 | 28.6 % | 4.2 | 25 |
// DECODE: kernels under 5 µs: 1 of 2, 4.0 µs
// RUN: %python %moec_src/bench/model_profile.py summary %t/time.csv | FileCheck %s --check-prefix=TIME
// TIME: step 0: 2 kernels, 15.0 µs in all (kernels one at a time, no gaps)
// TIME-EMPTY:
// TIME-NEXT: | kernel | launches | total µs | mean µs | share |
// TIME: | `detail::linearFewRowsKernel<1, float, float, 1>` | 1 | 5.0 | 5.00 | 33.3 % |
// RUN: not %python %moec_src/bench/model_profile.py summary %t/none.csv 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: no embedding kernel in the log

//--- bytes.csv
==PROF== Connected to process 1 (python3)
"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"
"","","byte","byte","ns"
"0","void moec::rt::cuda::(anonymous namespace)::fillKernel<1, 1>(unsigned char *, unsigned long)","0","1,000,000","500"
"1","void moec::rt::cuda::(anonymous namespace)::embeddingKernel<unsigned short>(const long *, long)","0","0","10,000"
"2","void moec::rt::cuda::(anonymous namespace)::groupedMatmulFP8Kernel<8, 6, 1>(const unsigned char *)","80,000,000","5,000,000","30,000"
"3","void moec::rt::cuda::(anonymous namespace)::groupedMatmulFP8Kernel<8, 6, 1>(const unsigned char *)","80,000,000","5,000,000","30,000"
"4","void moec::rt::cuda::(anonymous namespace)::embeddingKernel<unsigned short>(const long *, long)","0","0","10,000"
"5","void moec::rt::cuda::(anonymous namespace)::rmsNormBlockKernel<4>(const float *)","4,000,000","250,000","4,000"

//--- time.csv
"ID","Kernel Name","gpu__time_duration.sum"
"","","ns"
"0","moec::embeddingKernel<unsigned short>(const long *, long)","10,000"
"1","moec::rt::cuda::detail::linearFewRowsKernel<1, float, float, 1>(const float *)","5,000"

//--- none.csv
"ID","Kernel Name","gpu__time_duration.sum"
"0","moec::rmsNormBlockKernel<4>(const float *)","5,000"
