//===- GraphReplay.h - timing a CUDA graph of a benchmark's launches -*- C++ -*-===//
//
// Decode kernels run a few microseconds each inside a step's CUDA graph, where
// launch gaps count; the benchmarks time them the same way: what `body`
// launches, captured once into a graph, replayed.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_BENCH_GRAPHREPLAY_H
#define MOEC_BENCH_GRAPHREPLAY_H

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <functional>

/// Milliseconds per replay of a graph of what `body` launches on `stream`
/// (a non-blocking stream): `body` once outside a capture first (the
/// launches' attributes, the stream's flags), three replays to warm up, then
/// the mean of `repeats` replays between two events.
inline double msPerGraphReplay(cudaStream_t stream, const std::function<void(cudaStream_t)> &body,
                               int repeats) {
  body(stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  body(stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i)
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < repeats; ++i)
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return ms / repeats;
}

#endif // MOEC_BENCH_GRAPHREPLAY_H
