//===- moec-run.cpp - runs a compiled artifact on .npz inputs ------------===//
//
//   moec-run ARTIFACT --inputs IN.npz [--outputs OUT.npz]
//            [--expected-outputs REF.npz [--rtol R] [--atol A] [--scale-atol]]
//            [--bench N] [--on-stream]
//            [--generate N [--temperature T] [--top-k K] [--top-p P] [--seed S]]
//            [--ep N]
//
// An artifact of `moec compile --ep-size=N` runs as N ranks: `--ep N` starts
// them as N processes of this program, or a launcher (torchrun, mpirun) does
// through WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT (ExpertParallel.h).
//
// A whole model (an artifact with a KV cache) takes `input_ids` [B, T] and
// returns the exported graph's `logits`, or with --generate N the `sequences`
// (ModelRun.h).
//
// Loads ARTIFACT (what `moec compile --target=cpu|cuda -o ARTIFACT` wrote) through
// the runtime's C API (moec.h), feeds it the arrays of IN.npz keyed by the
// graph's input names, writes the outputs to OUT.npz (atomically, and not at
// all when anything fails), compares them with REF.npz like moec-interp does,
// and with --bench times N further runs. --on-stream runs a CUDA artifact as a
// CUDA caller would: device buffers, moec_run_async on a stream of its own
// (StreamRun.h). Links only the runtime (and CUDA's runtime): no MLIR.
//
// `moec compile --emit=exe -o NAME` writes a copy of this program with the
// artifact appended (moec/runtime/Bundle.h): NAME takes the same flags without
// ARTIFACT and runs the model it carries.
//
// Exit status: 0 on success, 1 when an output differs from REF.npz, 2 on any
// other error (bad artifact, wrong inputs, ...), printed with its cause.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/Compare.h"
#include "moec/runtime/Npz.h"

#include "moec/runtime/dist/Environment.h"
#include "moec/runtime/dist/RankGroup.h"

#include "ExpertParallel.h"
#include "ModelRun.h"
#include "StreamRun.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

using moec::rt::DType;
using moec::rt::formatShape;
using moec::rt::HostTensor;
using moec::rt::Status;
using moec::rt::TensorMap;

namespace {

constexpr int kError = 2;

struct Options {
  std::string artifact, inputs, outputs, expected;
  moec::rt::Tolerance tolerance;
  bool onStream = false;
  long bench = 0;
  /// --ep N: start N expert-parallel ranks of this program.
  long ep = 0;
  moec::tools::ModelRunOptions model;
};

/// The program's name in messages, and whether this executable carries its
/// model (moec compile --emit=exe): then there is no ARTIFACT argument.
std::string programName = "moec-run";
bool carriesModel = false;

/// This executable's path (errors name it; loading it reads its bundle).
std::string selfPath() {
  char buffer[4096];
  ssize_t length = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0)
    return "/proc/self/exe";
  return std::string(buffer, static_cast<size_t>(length));
}

int fail(const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", programName.c_str(), message.c_str());
  return kError;
}

void usage(FILE *out) {
  std::fprintf(out, "usage: %s%s --inputs IN.npz [--outputs OUT.npz]\n", programName.c_str(),
               carriesModel ? "" : " ARTIFACT");
  std::fprintf(out,
               "                [--expected-outputs REF.npz [--rtol R] [--atol A] [--scale-atol]]\n"
               "                [--bench N] [--on-stream]\n"
               "                [--generate N [--temperature T] [--top-k K] [--top-p P] [--seed S]]\n"
               "                [--ep N]\n"
               "  --rtol R, --atol A  tolerances of --expected-outputs (default 1e-5, 1e-6):\n"
               "                      |got - expected| <= atol + rtol * |expected|\n"
               "  --scale-atol        multiply atol by max(1, max |expected|) per output\n"
               "  --bench N           time N (at most 10000000) more runs; print median,\n"
               "                      p10/p90, min/max in ms\n"
               "  --on-stream         (CUDA artifacts) inputs and outputs in device memory, each\n"
               "                      run queued with moec_run_async on moec-run's own stream and\n"
               "                      waited for there; --bench also times N runs queued back to\n"
               "                      back\n"
               "  A whole model (compiled with a KV cache) reads input_ids [B, T] (and\n"
               "  attention_mask) and writes logits [B, T, V]; with\n"
               "  --generate N        N new tokens per sequence, written as sequences [B, T + N]\n"
               "                      with the prefill's and decode's tokens/s; greedy unless\n"
               "  --temperature T     (> 0) samples, from the --top-k K largest (default all)\n"
               "                      within --top-p P of the mass (default 1), --seed S\n"
               "  --ep N              run an artifact of moec compile --ep-size=N as N processes,\n"
               "                      one per expert-parallel rank (under torchrun or mpirun:\n"
               "                      one rank, from WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT)\n");
}

bool parseDouble(const char *text, double &value) {
  char *end = nullptr;
  errno = 0;
  value = std::strtod(text, &end);
  return *text && *end == '\0' && errno == 0 && std::isfinite(value) && value >= 0;
}

/// --bench's bound: a count that a run of even a microsecond ends in seconds.
constexpr long kMaxBenchRuns = 10000000;

/// A decimal integer in [min, max], the whole text: no sign but '-' for a
/// negative bound, no spaces, no overflow (strtol saturates; that is refused).
bool parseCount(const char *text, long min, long max, long &value) {
  if (!*text || std::isspace(static_cast<unsigned char>(*text)) || *text == '+')
    return false;
  char *end = nullptr;
  errno = 0;
  long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || parsed < min || parsed > max)
    return false;
  value = parsed;
  return true;
}

/// Returns -1 to go on, else the exit status.
int parseArgs(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *flag) -> const char * {
      std::string prefix = std::string(flag) + "=";
      if (arg.rfind(prefix, 0) == 0)
        return argv[i] + prefix.size();
      if (arg == flag && i + 1 < argc)
        return argv[++i];
      return nullptr;
    };
    auto is = [&](const char *flag) {
      return arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0;
    };
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    const char *text = nullptr;
    if (is("--inputs") && (text = value("--inputs"))) {
      options.inputs = text;
    } else if (is("--outputs") && (text = value("--outputs"))) {
      options.outputs = text;
    } else if (is("--expected-outputs") && (text = value("--expected-outputs"))) {
      options.expected = text;
    } else if (is("--rtol") && (text = value("--rtol"))) {
      if (!parseDouble(text, options.tolerance.rtol))
        return fail(std::string("--rtol: not a non-negative number: '") + text + "'");
    } else if (is("--atol") && (text = value("--atol"))) {
      if (!parseDouble(text, options.tolerance.atol))
        return fail(std::string("--atol: not a non-negative number: '") + text + "'");
    } else if (arg == "--scale-atol") {
      options.tolerance.scaleAtol = true;
    } else if (arg == "--on-stream") {
      options.onStream = true;
    } else if (is("--bench") && (text = value("--bench"))) {
      if (!parseCount(text, 1, kMaxBenchRuns, options.bench))
        return fail(std::string("--bench: not a positive count: '") + text +
                    "' (a whole number in [1, " + std::to_string(kMaxBenchRuns) + "])");
    } else if (is("--ep") && (text = value("--ep"))) {
      if (!parseCount(text, 1, 1024, options.ep))
        return fail(std::string("--ep: not a rank count in [1, 1024]: '") + text + "'");
    } else if (is("--generate") && (text = value("--generate"))) {
      if (!parseCount(text, 0, 1L << 24, options.model.generate))
        return fail(std::string("--generate: not a token count: '") + text + "'");
    } else if (is("--temperature") && (text = value("--temperature"))) {
      double t = 0;
      if (!parseDouble(text, t))
        return fail(std::string("--temperature: not a non-negative number: '") + text + "'");
      options.model.sampling.temperature = static_cast<float>(t);
    } else if (is("--top-k") && (text = value("--top-k"))) {
      long k = 0;
      if (!parseCount(text, 0, 1L << 30, k))
        return fail(std::string("--top-k: not a count: '") + text + "'");
      options.model.sampling.top_k = static_cast<int32_t>(k);
    } else if (is("--top-p") && (text = value("--top-p"))) {
      double p = 0;
      if (!parseDouble(text, p) || p <= 0 || p > 1)
        return fail(std::string("--top-p: not in (0, 1]: '") + text + "'");
      options.model.sampling.top_p = static_cast<float>(p);
    } else if (is("--seed") && (text = value("--seed"))) {
      long seed = 0;
      if (!parseCount(text, 0, std::numeric_limits<long>::max(), seed))
        return fail(std::string("--seed: not a non-negative integer: '") + text + "'");
      options.model.sampling.seed = static_cast<uint64_t>(seed);
    } else if (arg.size() > 1 && arg[0] == '-') {
      usage(stderr);
      return fail("unknown or incomplete option '" + arg + "'");
    } else if (carriesModel) {
      usage(stderr);
      return fail("this executable carries its model; unexpected argument '" + arg + "'");
    } else if (options.artifact.empty()) {
      options.artifact = arg;
    } else {
      usage(stderr);
      return fail("more than one artifact given ('" + options.artifact + "', '" + arg + "')");
    }
  }
  if (carriesModel)
    options.artifact = selfPath();
  if (options.artifact.empty() || options.inputs.empty()) {
    usage(stderr);
    return fail(options.artifact.empty() ? "no artifact given" : "no --inputs given");
  }
  return -1;
}

bool toApiDType(DType dtype, moec_dtype &out) {
  switch (dtype) {
  case DType::F32:
    out = MOEC_F32;
    return true;
  case DType::I32:
    out = MOEC_I32;
    return true;
  case DType::I64:
    out = MOEC_I64;
    return true;
  default:
    return false;
  }
}

DType fromApiDType(moec_dtype dtype) {
  return dtype == MOEC_I32 ? DType::I32 : dtype == MOEC_I64 ? DType::I64 : DType::F32;
}

double percentile(std::vector<double> sorted, double p) {
  double position = p * (sorted.size() - 1);
  size_t below = static_cast<size_t>(position);
  size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/// One model and the tensors of its runs: the arrays of --inputs bound to the
/// model's inputs, host outputs of the declared shapes, and with --on-stream
/// their device copies.
struct ModelHandle {
  moec_model *model = nullptr;
  ~ModelHandle() { moec_free(model); }
};

struct Run {
  ModelHandle handle; // freed last, after the stream and its buffers
  moec_model *model = nullptr;
  TensorMap inputs, outputs;
  std::vector<moec_tensor> apiInputs, apiOutputs;
  int64_t tokens = -1; // from the inputs' dynamic dimension; -1: none
  bool onStream = false;
  moec::tools::StreamRun stream;

  /// Reads `path` and binds the arrays that name an input; the C API checks
  /// names, dtypes and shapes. The token count for the outputs' shapes comes
  /// from the inputs. No array is allocated or inflated beyond what the model
  /// can take: an input's at the model's largest token count, any other
  /// array's the largest of those (Npz.h, NpzLimits).
  Status bindInputs(const std::string &path) {
    moec::rt::NpzLimits limits;
    limits.maxMemberBytes = 0;
    for (size_t i = 0; i < moec_num_inputs(model); ++i) {
      std::span<const int64_t> shape(moec_input_shape(model, i),
                                     static_cast<size_t>(moec_input_rank(model, i)));
      uint64_t bytes = moec::rt::npzBytesLimit(shape, moec_max_tokens(model));
      limits.maxBytesByKey[moec_input_name(model, i)] = bytes;
      limits.maxMemberBytes = std::max(limits.maxMemberBytes, bytes);
    }
    MOEC_RETURN_IF_ERROR(moec::rt::readNpz(path, inputs, limits));
    for (auto &[name, tensor] : inputs) {
      size_t index = 0;
      while (index < moec_num_inputs(model) && name != moec_input_name(model, index))
        ++index;
      if (index == moec_num_inputs(model)) {
        std::fprintf(stderr, "moec-run: note: %s array '%s' names no input of the model; ignored\n",
                     path.c_str(), name.c_str());
        continue;
      }
      moec_tensor api{name.c_str(), MOEC_F32, static_cast<int32_t>(tensor.shape().size()),
                      tensor.shape().data(), tensor.data()};
      if (!toApiDType(tensor.dtype(), api.dtype))
        return Status::error(path + ": input '" + name + "' is " +
                             std::string(moec::rt::dtypeName(tensor.dtype())) + ", expected " +
                             moec_dtype_name(moec_input_dtype(model, index)));
      const int64_t *declared = moec_input_shape(model, index);
      for (int32_t d = 0; d < moec_input_rank(model, index) && d < api.rank; ++d)
        if (declared[d] < 0 && tokens < 0)
          tokens = tensor.shape()[d];
      apiInputs.push_back(api);
    }
    return Status::ok();
  }

  /// Host outputs of the declared shapes, the token dimension `tokens` long.
  Status allocateOutputs() {
    for (size_t i = 0; i < moec_num_outputs(model); ++i) {
      const int64_t *declared = moec_output_shape(model, i);
      std::vector<int64_t> shape(declared, declared + moec_output_rank(model, i));
      for (int64_t &size : shape)
        if (size < 0)
          size = std::max<int64_t>(tokens, 0);
      if (!moec::rt::checkedNumElements(shape, 8))
        return Status::error("output '" + std::string(moec_output_name(model, i)) +
                             "' of shape " + formatShape(shape) + " is too large");
      outputs[moec_output_name(model, i)] =
          HostTensor(fromApiDType(moec_output_dtype(model, i)), shape);
    }
    for (size_t i = 0; i < moec_num_outputs(model); ++i) {
      HostTensor &tensor = outputs[moec_output_name(model, i)];
      apiOutputs.push_back({moec_output_name(model, i), moec_output_dtype(model, i),
                            static_cast<int32_t>(tensor.shape().size()), tensor.shape().data(),
                            tensor.data()});
    }
    return Status::ok();
  }

  /// --on-stream: device copies of the inputs and outputs (StreamRun.h).
  Status bindStream() {
    onStream = true;
    if (std::strcmp(moec_target(model), "cuda") != 0) {
      // moec_run_async refuses it before it queues anything: its message says why.
      if (moec_run_async(model, apiInputs.data(), apiInputs.size(), apiOutputs.data(),
                         apiOutputs.size(), nullptr))
        return Status::error(std::string("--on-stream: ") + moec_last_error());
      return Status::error("--on-stream: moec_run_async ran a '" +
                           std::string(moec_target(model)) + "' artifact");
    }
    std::vector<size_t> inputBytes, outputBytes;
    for (const moec_tensor &api : apiInputs)
      inputBytes.push_back(inputs.at(api.name).sizeInBytes());
    for (const moec_tensor &api : apiOutputs)
      outputBytes.push_back(outputs.at(api.name).sizeInBytes());
    return stream.bind(apiInputs, inputBytes, apiOutputs, outputBytes);
  }

  /// One run: moec_run on the host buffers, or with --on-stream moec_run_async
  /// on the device copies, waited for on the stream.
  Status once(bool checked) {
    if (onStream)
      return stream.run(model, apiInputs, apiOutputs, /*checkOrder=*/checked);
    if (moec_run(model, apiInputs.data(), apiInputs.size(), apiOutputs.data(), apiOutputs.size()))
      return Status::error(moec_last_error());
    return Status::ok();
  }

  /// --bench N: times N more runs and prints their summary.
  Status bench(long runs) {
    std::vector<double> ms;
    for (long i = 0; i < runs; ++i) {
      auto start = std::chrono::steady_clock::now();
      MOEC_RETURN_IF_ERROR(once(false));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("bench: %ld runs, %lld tokens: median %.4f ms, p10 %.4f ms, p90 %.4f ms, "
                "min %.4f ms, max %.4f ms\n",
                runs, static_cast<long long>(std::max<int64_t>(tokens, 0)), percentile(ms, 0.5),
                percentile(ms, 0.1), percentile(ms, 0.9), ms.front(), ms.back());
    if (!onStream)
      return Status::ok();
    double total = 0;
    MOEC_RETURN_IF_ERROR(stream.runQueued(model, apiInputs, apiOutputs, runs, &total));
    std::printf("bench: %ld runs queued back to back: %.4f ms a run\n", runs, total / runs);
    return Status::ok();
  }
};

} // namespace

int main(int argc, char **argv) {
  moec::rt::BundleTrailer trailer;
  Status bundle = moec::rt::readBundleTrailer(selfPath(), trailer, carriesModel);
  if (carriesModel) {
    const char *slash = std::strrchr(argv[0], '/');
    programName = slash ? slash + 1 : argv[0];
  }
  if (!bundle)
    return fail(bundle.message());
  Options options;
  if (int rc = parseArgs(argc, argv, options); rc >= 0)
    return rc;

  bool asRank = moec::tools::launchedAsRank();
  if (options.ep >= 1 && !asRank) {
    // The supervisor: N copies of this command line, without --ep, as ranks.
    std::vector<char *> rankArgs;
    for (int i = 0; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--ep") {
        ++i;
        continue;
      }
      if (arg.rfind("--ep=", 0) != 0)
        rankArgs.push_back(argv[i]);
    }
    rankArgs.push_back(nullptr);
    return moec::tools::superviseRanks(static_cast<int>(options.ep),
                                       static_cast<int>(rankArgs.size()) - 1, rankArgs.data(),
                                       programName);
  }
  if (asRank && carriesModel)
    return fail("expert-parallel ranks load an artifact directory, not a bundled executable");
  std::unique_ptr<moec::rt::dist::RankGroup> group;
  // A rank's failure reaches the other ranks at once, not after their timeout.
  auto failRank = [&](const std::string &message) {
    if (group)
      group->abort(message);
    return fail(message);
  };

  Run run;
  auto loadStart = std::chrono::steady_clock::now();
  if (asRank) {
    moec::rt::dist::DistEnvironment environment;
    Status status = moec::rt::dist::readDistEnvironment(environment);
    if (status)
      status = moec::rt::dist::RankGroup::join(environment, group);
    if (status)
      status = group->load(options.artifact, run.model);
    if (!status)
      return fail(status.message());
    run.handle.model = run.model;
    // Every rank computes the same outputs; rank 0 reports them (errors and
    // notes still reach stderr from every rank).
    if (group->rank() != 0 && !std::freopen("/dev/null", "w", stdout))
      return failRank("cannot silence rank " + std::to_string(group->rank()) + "'s output");
  } else {
    run.model = run.handle.model = moec_load(options.artifact.c_str());
  }
  if (!run.model)
    return failRank(moec_last_error());
  // A generation reports its load too: the weights' upload (or their fill at
  // load, docs/artifact.md) is part of a model's cost to start.
  if (options.model.generate >= 0)
    std::printf("load: %.3f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                                loadStart)
                                      .count());
  bool wholeModel = moec_max_batch(run.model) > 0;
  if (!wholeModel && (options.model.generate >= 0 || options.model.sampling.temperature > 0))
    return failRank("--generate and sampling need a whole model (an artifact with a KV cache); " +
                options.artifact + " is a block");
  if (wholeModel && (options.onStream || options.bench > 0))
    return failRank("--on-stream and --bench run blocks; a whole model times itself with "
                "--generate");
  options.model.inputs = options.inputs;
  if (wholeModel) {
    if (Status status = moec::tools::runWholeModel(run.model, options.model, run.outputs);
        !status)
      return failRank(status.message());
  } else if (Status status = run.bindInputs(options.inputs); !status)
    return failRank(status.message());
  if (!wholeModel) {
    if (Status status = run.allocateOutputs(); !status)
      return failRank(status.message());
    if (options.onStream)
      if (Status status = run.bindStream(); !status)
        return failRank(status.message());
    if (Status status = run.once(true); !status)
      return failRank(options.inputs + ": " + status.message());
  }
  // Every rank computed the outputs; rank 0 writes and compares them.
  if (group && group->rank() != 0)
    return 0;
  // The outputs of this first run are the ones written and compared.
  if (options.onStream)
    if (Status status = run.stream.fetch(); !status)
      return failRank(status.message());
  if (options.bench > 0)
    if (Status status = run.bench(options.bench); !status)
      return failRank(status.message());
  if (!options.outputs.empty())
    if (Status status = moec::rt::writeNpz(options.outputs, run.outputs); !status)
      return failRank(status.message());

  if (options.expected.empty())
    return 0;
  // The comparison of moec-interp (moec/runtime/Compare.h), in the outputs' order.
  std::vector<moec::rt::NamedOutput> named;
  for (const auto &[name, tensor] : run.outputs)
    named.emplace_back(name, &tensor);
  std::string report;
  bool passed = false;
  if (Status status = moec::rt::compareOutputsWithFile(named, options.expected, options.tolerance,
                                                       report, passed);
      !status)
    return failRank(status.message());
  std::fputs(report.c_str(), stdout);
  return passed ? 0 : moec::rt::kCompareMismatch;
}
