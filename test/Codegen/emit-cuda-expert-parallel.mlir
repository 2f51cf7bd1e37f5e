// `moec compile --ep-size=N --target=cuda`: one program for every expert-
// parallel rank, the rank and the all-reduce through the loader's
// communicator (moec_communicator, State::comm), the all-reduce queued on the
// model's stream inside the run's CUDA graph. No GPU needed (the generated
// code is read; an artifact is compiled where nvcc is).

// RUN: rm -rf %t && mkdir -p %t

// A block (Mixtral): the sort's first expert is the rank's, the combine's
// partial sum is copied to the result and all-reduced there, on the stream
// that the graph captures; create() refuses a group of another size.
// RUN: moec compile %fixtures/mixtral/model.onnx --ep-size=2 --target=cuda --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=BLOCK < %t/mixtral.cu
// BLOCK-NOT: comm->rank == 0
// BLOCK: struct State {
// BLOCK: const moec_communicator *comm = nullptr;
// BLOCK: Status allReduceSum(const moec_communicator &comm, float *data, int64_t count,
// BLOCK: comm.all_reduce_sum_f32(comm.context, data, static_cast<uint64_t>(count),
// BLOCK-NEXT: static_cast<void *>(stream), why, sizeof(why))
// BLOCK: Status waitForGroup(const moec_communicator &comm, cudaStream_t stream) {
// BLOCK: if (comm.wait && comm.wait(comm.context, static_cast<void *>(stream), why, sizeof(why)) != 0)
// BLOCK: const moec_communicator *comm = state.comm;
// BLOCK: auto compute = [&]() -> Status {
// BLOCK: sortByExpert({{.*}}, 2 * T, 4, comm->rank * 4,
// BLOCK: combineRows({{.*}}, [[PARTIAL:v[0-9]+]], stream));
// BLOCK: cudaMemcpyAsync([[SUM:v[0-9]+]], [[PARTIAL]], sizeof(float) * (64 * T), cudaMemcpyDeviceToDevice, stream)
// BLOCK-NEXT: MOEC_RETURN_IF_ERROR(allReduceSum(*comm, [[SUM]], 64 * T, stream));
// BLOCK: return Status::ok();
// BLOCK-NEXT: };
// BLOCK: state.graphs.run(T, stream, compute
// BLOCK: MOEC_RETURN_IF_ERROR(waitForGroup(*comm, stream));
// BLOCK-NEXT: MOEC_CUDA_TRY(cudaStreamSynchronize(stream));
// BLOCK: const moec_communicator *comm, void **state,
// BLOCK-NEXT: char *error, size_t errorBytes) {
// BLOCK-NEXT: if (!comm || comm->size != 2 || comm->rank < 0 || comm->rank >= comm->size || !comm->all_reduce_sum_f32)
// BLOCK-NEXT: this model runs on 2 expert-parallel ranks and needs their communicator
// BLOCK: created->comm = comm;

// A shared expert (DeepSeek-V3) still runs on the side stream, on rank 0
// alone, which alone adds it, so the sum holds it once.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --ep-size=4 --target=cuda --emit=mlir -o %t/deepseek.mlir
// RUN: moec-translate --emit-cuda %t/deepseek.mlir -o %t/deepseek.cu
// RUN: FileCheck %s --check-prefix=SHARED < %t/deepseek.cu
// SHARED: cudaStream_t side = state.model.sideStream();
// SHARED-NEXT: if (comm->rank == 0) { // the shared expert counts on rank 0 alone
// SHARED: linear({{.*}}, side));
// SHARED: linear({{.*}}, side));
// SHARED-NEXT: }
// SHARED: sortByExpert({{.*}}, 4 * T, 4, comm->rank * 4,
// SHARED: state.model.joinSide()
// SHARED: combineRows({{.*}}, (comm->rank == 0 ? v{{[0-9]+}} : nullptr), nullptr, v{{[0-9]+}}, stream));
// SHARED: allReduceSum(*comm, v{{[0-9]+}}, 64 * T, stream)

// A whole model in bf16 (the CUDA default): the experts are cast to bf16 and
// then sharded (moe-cast-model-bf16 runs before moe-partition-experts), and
// its MoE layer's output is all-reduced in the decode step's graph.
// RUN: moec compile %fixtures/models/qwen3_moe/checkpoint --ep-size=2 --target=cuda --max-batch=2 --max-seq=32 --emit=mlir -o %t/qwen3.mlir
// RUN: FileCheck %s --check-prefix=MODEL-IR < %t/qwen3.mlir
// MODEL-IR: moe.sort {{.*}} {ep_size = 2 : i64, num_experts = 4 : i64}
// MODEL-IR: moe.ep_shard %{{.*}} {ep_size = 2 : i64} : tensor<8x64x64xbf16> -> tensor<4x64x64xbf16>
// MODEL-IR: moe.grouped_matmul {{.*}} tensor<4x64x64xbf16>
// MODEL-IR: moe.ep_shard %{{.*}} {ep_size = 2 : i64} : tensor<8x64x32xbf16> -> tensor<4x64x32xbf16>
// MODEL-IR: moe.all_reduce %{{.*}} {ep_size = 2 : i64} : tensor<?x64xf32>
// MODEL-IR-NOT: moe.ep_shard {{.*}}xf32>
// RUN: moec-translate --emit-cuda %t/qwen3.mlir -o %t/qwen3.cu
// RUN: FileCheck %s --check-prefix=MODEL < %t/qwen3.cu
// MODEL: DeviceGenerator generator;
// MODEL: const moec_communicator *comm = nullptr;
// MODEL: allReduceSum(*comm, v{{[0-9]+}}, 64 * T, stream)
// MODEL: moec_artifact_generate

// A group of one (--ep-size=1) is the program for every rank, with its
// manifest's group; --ep-rank=0 of it is the plain program.
// RUN: moec compile %fixtures/mixtral/model.onnx --ep-size=1 --target=cuda --emit=mlir -o %t/one.mlir
// RUN: FileCheck %s --check-prefix=ONE < %t/one.mlir
// ONE: moe.sort {{.*}} {ep_size = 1 : i64, num_experts = 8 : i64}
// ONE: moe.all_reduce {{.*}} {ep_size = 1 : i64}
// RUN: moec compile %fixtures/mixtral/model.onnx --ep-size=1 --ep-rank=0 --target=cuda --emit=mlir -o %t/rank0.mlir
// RUN: FileCheck %s --check-prefix=RANK0 < %t/rank0.mlir
// RANK0-NOT: ep_size
// RANK0-NOT: moe.all_reduce
