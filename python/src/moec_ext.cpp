//===- moec_ext.cpp - moec._moec: the runtime's C API for Python ------------===//
//
// A thin nanobind layer over runtime/include/moec/moec.h. Tensors arrive as
// nanobind ndarrays (numpy through the buffer protocol or DLPack, torch through
// DLPack): their memory is passed to the runtime as it is, never copied. The
// Python side (moec/_model.py) picks the framework, allocates the outputs and
// the stream; this file checks what the C API cannot see (dtype of the
// framework, contiguity, the device) and turns every failure into
// moec.RunError with the runtime's message. The GIL is released while a model
// runs.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/dist/RankGroup.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace {

/// Raised as moec.RunError.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void failWithLastError(const std::string &what) {
  const char *message = moec_last_error();
  throw RunError(what + ((message && *message) ? std::string(": ") + message : std::string()));
}

using Array = nb::ndarray<nb::ro>;
using MutableArray = nb::ndarray<>;

std::string dtypeName(nb::dlpack::dtype dtype) {
  const char *kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(dtype.code)) {
  case nb::dlpack::dtype_code::Int: kind = "int"; break;
  case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
  case nb::dlpack::dtype_code::Float: kind = "float"; break;
  case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
  case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
  case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
  }
  return std::string(kind) + std::to_string(dtype.bits);
}

/// The moec dtype of an array, or an error naming the tensor.
moec_dtype moecDtype(nb::dlpack::dtype dtype, const std::string &name) {
  if (dtype == nb::dtype<float>())
    return MOEC_F32;
  if (dtype == nb::dtype<int32_t>())
    return MOEC_I32;
  if (dtype == nb::dtype<int64_t>())
    return MOEC_I64;
  throw RunError("tensor '" + name + "' has dtype " + dtypeName(dtype) +
                 "; moec artifacts take float32, int32 or int64");
}

template <typename A> void checkContiguous(const A &a, const std::string &name) {
  int64_t expected = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected)
      throw RunError("tensor '" + name + "' is not C-contiguous (moec reads it in place; "
                     "make it contiguous first)");
    expected *= static_cast<int64_t>(a.shape(d));
  }
}

/// One tensor handed to the C API: the shape is kept alive beside it.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  moec_tensor tensor{};
  int32_t device = 0;
};

template <typename A> Slot makeSlot(const std::string &name, const A &a, void *data) {
  Slot slot;
  slot.name = name;
  slot.tensor.dtype = moecDtype(a.dtype(), name);
  checkContiguous(a, name);
  slot.shape.resize(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d)
    slot.shape[d] = static_cast<int64_t>(a.shape(d));
  slot.tensor.rank = static_cast<int32_t>(a.ndim());
  slot.tensor.data = data;
  slot.device = a.device_type();
  return slot;
}

void finish(std::vector<Slot> &slots) {
  for (Slot &slot : slots) {
    slot.tensor.name = slot.name.c_str();
    slot.tensor.shape = slot.shape.data();
  }
}

/// A host int64 [B, T] array's data, or an error.
const int64_t *hostIds(const Array &a, const char *what, int64_t &batch, int64_t &length) {
  if (a.device_type() != nb::device::cpu::value)
    throw RunError(std::string(what) + " must be in host memory");
  if (a.dtype() != nb::dtype<int64_t>())
    throw RunError(std::string(what) + " must be int64, not " + dtypeName(a.dtype()));
  if (a.ndim() != 2)
    throw RunError(std::string(what) + " must be [batch, length], not of rank " +
                   std::to_string(a.ndim()));
  checkContiguous(a, what);
  batch = static_cast<int64_t>(a.shape(0));
  length = static_cast<int64_t>(a.shape(1));
  return static_cast<const int64_t *>(a.data());
}

using Spec = std::tuple<std::string, std::string, std::vector<int64_t>>;

/// This process as one rank of an expert-parallel job (moec/runtime/dist/RankGroup.h),
/// from the launcher's environment (torchrun's or mpirun's variables).
class Group {
public:
  Group() {
    moec::rt::dist::DistEnvironment environment;
    moec::rt::Status status = moec::rt::dist::readDistEnvironment(environment);
    if (status) {
      nb::gil_scoped_release release;
      status = moec::rt::dist::RankGroup::join(environment, group_);
    }
    if (!status)
      throw RunError(status.message());
  }
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  void abort(const std::string &why) { group_->abort(why); }
  std::unique_ptr<moec::rt::dist::RankGroup> group_;
};

class Model {
public:
  explicit Model(const std::string &path, Group *group) : path_(path) {
    nb::gil_scoped_release release;
    if (group) {
      moec::rt::Status status = group->group_->load(path, model_);
      if (!status)
        throw RunError(status.message());
      return;
    }
    model_ = moec_load(path.c_str());
    if (!model_) {
      const char *message = moec_last_error();
      throw RunError(message && *message ? message : ("cannot load " + path));
    }
  }
  ~Model() { close(); }
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  void close() {
    if (model_) {
      nb::gil_scoped_release release;
      moec_free(model_);
      model_ = nullptr;
    }
  }
  bool closed() const { return model_ == nullptr; }
  const std::string &path() const { return path_; }

  moec_model *get() const {
    if (!model_)
      throw RunError("the model " + path_ + " was closed");
    return model_;
  }

  std::string target() const { return moec_target(get()); }
  int64_t maxTokens() const { return moec_max_tokens(get()); }
  int64_t maxBatch() const { return moec_max_batch(get()); }
  int64_t maxSeq() const { return moec_max_seq(get()); }
  int64_t vocabSize() const { return moec_vocab_size(get()); }

  std::vector<Spec> inputs() const {
    return specs(moec_num_inputs, moec_input_name, moec_input_dtype, moec_input_rank,
                 moec_input_shape);
  }
  std::vector<Spec> outputs() const {
    return specs(moec_num_outputs, moec_output_name, moec_output_dtype, moec_output_rank,
                 moec_output_shape);
  }

  /// Runs the model on named arrays; `stream` (a cudaStream_t as an integer)
  /// queues it with moec_run_async, otherwise moec_run returns once written.
  void run(const std::vector<std::pair<std::string, Array>> &inputs,
           const std::vector<std::pair<std::string, MutableArray>> &outputs,
           std::optional<uintptr_t> stream) {
    moec_model *m = get();
    std::vector<Slot> in, out;
    in.reserve(inputs.size());
    out.reserve(outputs.size());
    const bool cpuTarget = std::string(moec_target(m)) == "cpu";
    auto checkDevice = [&](const Slot &slot) {
      if (slot.device != nb::device::cpu::value && slot.device != nb::device::cuda::value &&
          slot.device != nb::device::cuda_host::value)
        throw RunError("tensor '" + slot.name + "' is on a device moec does not run on");
      if (cpuTarget && slot.device == nb::device::cuda::value)
        throw RunError("tensor '" + slot.name + "' is in CUDA memory, but " + path_ +
                       " is a CPU artifact (move it to the host, or compile for cuda)");
    };
    for (const auto &[name, a] : inputs) {
      in.push_back(makeSlot(name, a, const_cast<void *>(a.data())));
      checkDevice(in.back());
    }
    for (const auto &[name, a] : outputs) {
      out.push_back(makeSlot(name, a, a.data()));
      checkDevice(out.back());
    }
    finish(in);
    finish(out);
    std::vector<moec_tensor> inTensors, outTensors;
    for (const Slot &slot : in)
      inTensors.push_back(slot.tensor);
    for (const Slot &slot : out)
      outTensors.push_back(slot.tensor);
    int status;
    {
      nb::gil_scoped_release release;
      if (stream)
        status = moec_run_async(m, inTensors.data(), inTensors.size(), outTensors.data(),
                                outTensors.size(), reinterpret_cast<void *>(*stream));
      else
        status = moec_run(m, inTensors.data(), inTensors.size(), outTensors.data(),
                          outTensors.size());
    }
    if (status != 0)
      failWithLastError("running " + path_);
  }

  void forward(const Array &inputIds, MutableArray logits) {
    moec_model *m = get();
    int64_t batch = 0, length = 0;
    const int64_t *ids = hostIds(inputIds, "input_ids", batch, length);
    if (logits.device_type() != nb::device::cpu::value || logits.dtype() != nb::dtype<float>() ||
        logits.ndim() != 3 || static_cast<int64_t>(logits.shape(0)) != batch ||
        static_cast<int64_t>(logits.shape(1)) != length ||
        static_cast<int64_t>(logits.shape(2)) != moec_vocab_size(m))
      throw RunError("logits must be host float32 [batch, length, vocab]");
    checkContiguous(logits, "logits");
    int status;
    {
      nb::gil_scoped_release release;
      status = moec_forward(m, ids, batch, length, static_cast<float *>(logits.data()));
    }
    if (status != 0)
      failWithLastError("forward of " + path_);
  }

  nb::dict generate(const Array &inputIds, std::optional<Array> attentionMask,
                    int64_t maxNewTokens, float temperature, int32_t topK, float topP,
                    uint64_t seed, MutableArray sequences) {
    moec_model *m = get();
    int64_t batch = 0, length = 0;
    const int64_t *ids = hostIds(inputIds, "input_ids", batch, length);
    const int64_t *mask = nullptr;
    if (attentionMask) {
      int64_t maskBatch = 0, maskLength = 0;
      mask = hostIds(*attentionMask, "attention_mask", maskBatch, maskLength);
      if (maskBatch != batch || maskLength != length)
        throw RunError("attention_mask must have input_ids' shape");
    }
    if (sequences.device_type() != nb::device::cpu::value ||
        sequences.dtype() != nb::dtype<int64_t>() || sequences.ndim() != 2 ||
        static_cast<int64_t>(sequences.shape(0)) != batch ||
        static_cast<int64_t>(sequences.shape(1)) != length + maxNewTokens)
      throw RunError("sequences must be host int64 [batch, length + max_new_tokens]");
    checkContiguous(sequences, "sequences");
    moec_sampling sampling{temperature, topK, topP, seed};
    moec_generate_stats stats{};
    int status;
    {
      nb::gil_scoped_release release;
      status = moec_generate(m, ids, mask, batch, length, maxNewTokens, &sampling,
                             static_cast<int64_t *>(sequences.data()), &stats);
    }
    if (status != 0)
      failWithLastError("generate with " + path_);
    nb::dict result;
    result["prefill_tokens"] = stats.prefill_tokens;
    result["decode_tokens"] = stats.decode_tokens;
    result["prefill_seconds"] = stats.prefill_seconds;
    result["decode_seconds"] = stats.decode_seconds;
    return result;
  }

  void reset(int64_t sequence) {
    if (moec_reset(get(), sequence) != 0)
      failWithLastError("reset of " + path_);
  }

private:
  /// (name, dtype, shape) of each input or output, through the C API's getters.
  std::vector<Spec> specs(size_t (*count)(const moec_model *),
                          const char *(*name)(const moec_model *, size_t),
                          moec_dtype (*dtype)(const moec_model *, size_t),
                          int32_t (*rank)(const moec_model *, size_t),
                          const int64_t *(*shape)(const moec_model *, size_t)) const {
    std::vector<Spec> result;
    moec_model *m = get();
    for (size_t i = 0; i < count(m); ++i) {
      const int64_t *dims = shape(m, i);
      result.emplace_back(name(m, i), moec_dtype_name(dtype(m, i)),
                          std::vector<int64_t>(dims, dims + rank(m, i)));
    }
    return result;
  }

  std::string path_;
  moec_model *model_ = nullptr;
};

} // namespace

NB_MODULE(_moec, m) {
  m.doc() = "moec's runtime C API (moec.h); use the moec package, not this module";
  nb::exception<RunError>(m, "RunError", PyExc_RuntimeError);

  nb::class_<Group>(m, "Group")
      .def(nb::init<>())
      .def_prop_ro("rank", &Group::rank)
      .def_prop_ro("size", &Group::size)
      .def("abort", &Group::abort, nb::arg("why"));

  nb::class_<Model>(m, "Model")
      .def(nb::init<const std::string &, Group *>(), nb::arg("path"),
           nb::arg("group").none() = nb::none(), nb::keep_alive<1, 3>())
      .def("close", &Model::close)
      .def_prop_ro("closed", &Model::closed)
      .def_prop_ro("path", &Model::path)
      .def_prop_ro("target", &Model::target)
      .def_prop_ro("max_tokens", &Model::maxTokens)
      .def_prop_ro("max_batch", &Model::maxBatch)
      .def_prop_ro("max_seq", &Model::maxSeq)
      .def_prop_ro("vocab_size", &Model::vocabSize)
      .def_prop_ro("inputs", &Model::inputs)
      .def_prop_ro("outputs", &Model::outputs)
      .def("run", &Model::run, nb::arg("inputs"), nb::arg("outputs"),
           nb::arg("stream").none() = nb::none())
      .def("forward", &Model::forward, nb::arg("input_ids"), nb::arg("logits"))
      .def("generate", &Model::generate, nb::arg("input_ids"), nb::arg("attention_mask").none(),
           nb::arg("max_new_tokens"), nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"),
           nb::arg("seed"), nb::arg("sequences"))
      .def("reset", &Model::reset, nb::arg("sequence") = -1);
}
