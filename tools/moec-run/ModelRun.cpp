//===- ModelRun.cpp - moec-run on a whole model ----------------------------===//

#include "ModelRun.h"

#include "moec/runtime/Compare.h"
#include "moec/runtime/Npz.h"

#include <cstdio>

using moec::rt::DType;
using moec::rt::HostTensor;
using moec::rt::Status;

namespace moec::tools {
namespace {

/// `name` of `arrays` as i64 [B, T] (i32 and bool masks are widened), or an error.
Status tokenMatrix(rt::TensorMap &arrays, const std::string &path, const char *name,
                   HostTensor &out) {
  auto it = arrays.find(name);
  if (it == arrays.end())
    return Status::error(path + ": no array '" + name + "'");
  const HostTensor &tensor = it->second;
  if (tensor.shape().size() != 2)
    return Status::error(path + ": '" + name + "' has shape " + rt::formatShape(tensor.shape()) +
                         ", expected [batch, length]");
  out = HostTensor(DType::I64, tensor.shape());
  int64_t *to = out.dataAs<int64_t>();
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    switch (tensor.dtype()) {
    case DType::I64:
      to[i] = tensor.dataAs<int64_t>()[i];
      break;
    case DType::I32:
      to[i] = tensor.dataAs<int32_t>()[i];
      break;
    default:
      return Status::error(path + ": '" + name + "' is " +
                           std::string(rt::dtypeName(tensor.dtype())) + ", expected i64 or i32");
    }
  }
  return Status::ok();
}

} // namespace

Status runWholeModel(moec_model *model, const ModelRunOptions &options, rt::TensorMap &outputs) {
  int64_t maxBatch = moec_max_batch(model), maxSeq = moec_max_seq(model);
  int64_t vocab = moec_vocab_size(model);
  // Nothing larger than the cache can hold is read or inflated.
  rt::NpzLimits limits;
  limits.maxMemberBytes = static_cast<uint64_t>(maxBatch) * static_cast<uint64_t>(maxSeq) * 8;
  rt::TensorMap arrays;
  MOEC_RETURN_IF_ERROR(rt::readNpz(options.inputs, arrays, limits));
  HostTensor ids;
  MOEC_RETURN_IF_ERROR(tokenMatrix(arrays, options.inputs, "input_ids", ids));
  int64_t batch = ids.shape()[0], length = ids.shape()[1];

  if (options.generate < 0) {
    if (arrays.count("attention_mask"))
      std::fprintf(stderr, "moec-run: note: the forward reads no attention_mask (every token "
                           "counts); ignored\n");
    HostTensor logits;
    if (batch < 1 || batch > maxBatch || length < 1 || length > maxSeq)
      return Status::error(options.inputs + ": input_ids of shape " +
                           rt::formatShape(ids.shape()) + " does not fit the KV cache of " +
                           std::to_string(maxBatch) + " sequences of " + std::to_string(maxSeq) +
                           " positions (moec compile --max-batch, --max-seq)");
    logits = HostTensor(DType::F32, {batch, length, vocab});
    if (moec_forward(model, ids.dataAs<int64_t>(), batch, length, logits.dataAs<float>()))
      return Status::error(moec_last_error());
    outputs["logits"] = std::move(logits);
    return Status::ok();
  }

  HostTensor mask;
  bool hasMask = arrays.count("attention_mask") > 0;
  if (hasMask) {
    MOEC_RETURN_IF_ERROR(tokenMatrix(arrays, options.inputs, "attention_mask", mask));
    if (mask.shape() != ids.shape())
      return Status::error(options.inputs + ": attention_mask has shape " +
                           rt::formatShape(mask.shape()) + ", input_ids " +
                           rt::formatShape(ids.shape()));
  }
  HostTensor sequences(DType::I64, {batch, length + options.generate});
  moec_generate_stats stats{};
  if (moec_generate(model, ids.dataAs<int64_t>(),
                    hasMask ? mask.dataAs<int64_t>() : nullptr, batch, length,
                    options.generate, &options.sampling, sequences.dataAs<int64_t>(), &stats))
    return Status::error(moec_last_error());
  auto rate = [](int64_t tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  std::printf("prefill: %lld tokens in %.3f ms (%.1f tokens/s)\n",
              static_cast<long long>(stats.prefill_tokens), stats.prefill_seconds * 1e3,
              rate(stats.prefill_tokens, stats.prefill_seconds));
  std::printf("decode: %lld tokens in %.3f ms (%.1f tokens/s, %.3f ms a step)\n",
              static_cast<long long>(stats.decode_tokens), stats.decode_seconds * 1e3,
              rate(stats.decode_tokens, stats.decode_seconds),
              stats.decode_tokens ? stats.decode_seconds * 1e3 * batch / stats.decode_tokens : 0.0);
  outputs["sequences"] = std::move(sequences);
  return Status::ok();
}

} // namespace moec::tools
