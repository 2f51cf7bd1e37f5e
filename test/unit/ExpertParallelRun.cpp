//===- ExpertParallelRun.cpp - N expert-parallel ranks of one artifact -----===//
//
//   moec-ep-run-check ARTIFACT INPUTS.npz EXPECTED.npz N
//
// Loads the CPU artifact of `moec compile --ep-size=N` N times in one process,
// as ranks 0..N-1 of a group whose all-reduce is a barrier and a sum in rank
// order (the fixed order the runtime's communicators keep), runs every rank
// on the same inputs in its own thread, and checks that:
// - every rank's outputs are the same bits (the all-reduce hands each the sum);
// - they match EXPECTED.npz (onnxruntime's) under check_onnxruntime.py's rule;
// - the artifact refuses a plain load, a group of another size and a rank
//   outside the group, each with an error naming why.
// Exit status 0 when all hold, 1 otherwise.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/Compare.h"
#include "moec/runtime/Npz.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using moec::rt::HostTensor;

namespace {

/// N ranks' all-reduce in one process: each rank posts its buffer, rank r
/// sums every buffer in rank order into its own result, and the last barrier
/// lets the buffers change again. A rank that fails breaks the group, and a
/// barrier that waits past its timeout breaks it too: no rank hangs.
struct LocalGroup {
  explicit LocalGroup(int size) : size(size), buffers(size) {}
  int size;
  std::vector<float *> buffers;

  bool arrive() {
    std::unique_lock<std::mutex> lock(mutex);
    if (broken)
      return false;
    uint64_t generation = passed;
    if (++arrived == size) {
      arrived = 0;
      ++passed;
      wake.notify_all();
      return true;
    }
    if (!wake.wait_for(lock, std::chrono::seconds(60),
                       [&] { return passed != generation || broken; }))
      broken = true;
    wake.notify_all();
    return !broken;
  }
  void breakAll() {
    std::lock_guard<std::mutex> lock(mutex);
    broken = true;
    wake.notify_all();
  }

private:
  std::mutex mutex;
  std::condition_variable wake;
  int arrived = 0;
  uint64_t passed = 0;
  bool broken = false;
};

struct RankContext {
  LocalGroup *group;
  int rank;
  std::vector<float> sum;
};

int allReduce(void *context, float *data, uint64_t count, void *stream, char *error,
              size_t errorBytes) {
  auto &self = *static_cast<RankContext *>(context);
  if (stream) {
    std::snprintf(error, errorBytes, "the local group reduces host memory only");
    return 1;
  }
  LocalGroup &group = *self.group;
  group.buffers[self.rank] = data;
  if (!group.arrive()) {
    std::snprintf(error, errorBytes, "another rank failed or timed out");
    return 1;
  }
  self.sum.assign(count, 0.0f);
  for (int r = 0; r < group.size; ++r)
    for (uint64_t i = 0; i < count; ++i)
      self.sum[i] = r == 0 ? group.buffers[r][i] : self.sum[i] + group.buffers[r][i];
  if (!group.arrive()) { // every rank has read every buffer
    std::snprintf(error, errorBytes, "another rank failed or timed out");
    return 1;
  }
  std::memcpy(data, self.sum.data(), count * sizeof(float));
  return 0;
}

moec_communicator communicator(RankContext &context, int size) {
  moec_communicator comm{};
  comm.context = &context;
  comm.rank = context.rank;
  comm.size = size;
  comm.all_reduce_sum_f32 = allReduce;
  return comm;
}

/// Whether loading `dir` with `comm` fails with an error that holds `why`.
bool refuses(const char *dir, const moec_communicator *comm, const char *why, const char *what) {
  moec_model *model = comm ? moec_load_expert_parallel(dir, comm) : moec_load(dir);
  if (model) {
    moec_free(model);
    std::printf("FAIL %s: loaded\n", what);
    return false;
  }
  std::string error = moec_last_error();
  bool ok = error.find(why) != std::string::npos;
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", what, error.c_str());
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: moec-ep-run-check ARTIFACT INPUTS.npz EXPECTED.npz N\n");
    return 2;
  }
  const char *dir = argv[1];
  int ranks = std::atoi(argv[4]);
  moec::rt::TensorMap inputs;
  if (moec::rt::Status status = moec::rt::readNpz(argv[2], inputs); !status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 2;
  }

  bool ok = true;
  ok &= refuses(dir, nullptr, "load it as one of them", "plain load");
  {
    LocalGroup wrong(ranks + 1);
    RankContext context{&wrong, 0, {}};
    moec_communicator comm = communicator(context, ranks + 1);
    ok &= refuses(dir, &comm, "but the group has", "group of another size");
    comm.size = ranks;
    comm.rank = ranks;
    ok &= refuses(dir, &comm, "is outside", "rank outside the group");
  }

  LocalGroup group(ranks);
  std::vector<RankContext> contexts(ranks);
  std::vector<std::vector<HostTensor>> outputs(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<std::string> names;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    contexts[r] = {&group, r, {}};
    threads.emplace_back([&, r] {
      moec_communicator comm = communicator(contexts[r], ranks);
      moec_model *model = moec_load_expert_parallel(dir, &comm);
      if (!model) {
        errors[r] = moec_last_error();
        group.breakAll();
        return;
      }
      std::vector<moec_tensor> in, out;
      std::vector<std::vector<int64_t>> shapes;
      for (size_t i = 0; i < moec_num_inputs(model); ++i) {
        HostTensor &tensor = inputs.at(moec_input_name(model, i));
        in.push_back({moec_input_name(model, i), moec_input_dtype(model, i),
                      static_cast<int32_t>(tensor.shape().size()), tensor.shape().data(),
                      tensor.data()});
      }
      int64_t tokens = in.empty() ? 0 : in[0].shape[in[0].rank - 2];
      for (size_t i = 0; i < moec_num_outputs(model); ++i) {
        std::vector<int64_t> shape(moec_output_shape(model, i),
                                   moec_output_shape(model, i) + moec_output_rank(model, i));
        for (int64_t &d : shape)
          d = d < 0 ? tokens : d;
        outputs[r].emplace_back(moec::rt::DType::F32, shape);
        std::memset(outputs[r].back().data(), 0xFF, outputs[r].back().sizeInBytes());
        out.push_back({moec_output_name(model, i), MOEC_F32, moec_output_rank(model, i),
                       outputs[r].back().shape().data(), outputs[r].back().data()});
        if (r == 0)
          names.push_back(moec_output_name(model, i));
      }
      if (moec_run(model, in.data(), in.size(), out.data(), out.size()) != 0) {
        errors[r] = moec_last_error();
        group.breakAll();
      }
      moec_free(model);
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  for (int r = 0; r < ranks; ++r)
    if (!errors[r].empty()) {
      std::printf("FAIL rank %d: %s\n", r, errors[r].c_str());
      return 1;
    }
  for (int r = 1; r < ranks; ++r)
    for (size_t i = 0; i < names.size(); ++i) {
      bool same = std::memcmp(outputs[r][i].data(), outputs[0][i].data(),
                              outputs[0][i].sizeInBytes()) == 0;
      if (!same)
        std::printf("FAIL %s: rank %d's bits differ from rank 0's\n", names[i].c_str(), r);
      ok &= same;
    }
  std::vector<moec::rt::NamedOutput> named;
  for (size_t i = 0; i < names.size(); ++i)
    named.push_back({names[i], &outputs[0][i]});
  moec::rt::Tolerance tolerance;
  tolerance.scaleAtol = true;
  std::string report;
  bool passed = false;
  if (moec::rt::Status status =
          moec::rt::compareOutputsWithFile(named, argv[3], tolerance, report, passed);
      !status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 2;
  }
  std::printf("%s%d ranks: outputs %s\n", report.c_str(), ranks, passed ? "match" : "differ");
  return ok && passed ? 0 : 1;
}
