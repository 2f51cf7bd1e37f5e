//===- ModelOps.cpp - the kernels of the ops of whole models --------------===//
//
// moe.embedding, moe.rms_norm, moe.rotary and moe.attention in f64, as
// docs/dialect.md ("Whole models") states them. moe.attention writes and reads
// the run's KV cache (Kernels.h): first every token's key and value, then every
// token's reads, each of which must find a written entry; a read of a position
// never written is an error naming the sequence and the position, not a row of
// zeros. Sequence ids have no upper bound here (the runtime's max_batch is not
// the interpreter's concern); negative ids and positions are errors.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "moec/Dialect/MoE/MoEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace mlir;
using namespace moec::moe;

namespace moec::interp::detail {
namespace {

/// result[n] = table[ids[n]]; an id outside [0, V) is an error.
LogicalResult evalEmbedding(EmbeddingOp op, Operands in, Results &out) {
  const Tensor &ids = *in[0], &table = *in[1];
  int64_t n = ids.dim(0), v = table.dim(0), h = table.dim(1);
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{n, h});
  for (int64_t t = 0; t < n; ++t) {
    int64_t id = toInt64(ids.values[t]);
    if (id < 0 || id >= v)
      return op.emitOpError() << "ids[" << t << "] = " << id << " is not a row of the table: "
                              << "outside [0, " << v << ")";
    std::copy_n(table.values.begin() + id * h, h, result.values.begin() + t * h);
  }
  return success();
}

/// Each group of G contiguous columns of a row of `input` into `result`: x /
/// sqrt(mean(x²) + epsilon) · (weight_offset + weight).
template <typename NormOp>
LogicalResult normalise(NormOp op, const Tensor &input, const Tensor &weight, Tensor &result) {
  int64_t m = input.dim(0), k = input.dim(1), g = weight.dim(0);
  if (g == 0 || k % g != 0)
    return op.emitOpError() << "weight length " << g << " does not divide the " << k
                            << " input columns into groups at run time";
  double epsilon = op.getEpsilon().convertToDouble();
  double offset = op.getWeightOffset().convertToDouble();
  for (int64_t begin = 0; begin < m * k; begin += g) {
    const double *x = input.values.data() + begin;
    double sum = 0.0;
    for (int64_t i = 0; i < g; ++i)
      sum += x[i] * x[i];
    double inverse = 1.0 / std::sqrt(sum / static_cast<double>(g) + epsilon);
    for (int64_t i = 0; i < g; ++i)
      result.values[begin + i] = x[i] * inverse * (offset + weight.values[i]);
  }
  return success();
}

LogicalResult evalRMSNorm(RMSNormOp op, Operands in, Results &out) {
  const Tensor &input = *in[0];
  Tensor &result =
      out.emplace_back(resultElementType(op), ArrayRef<int64_t>{input.dim(0), input.dim(1)});
  return normalise(op, input, *in[1], result);
}

/// The residual sum rounded to f32 as arith.addf's result, then its norm.
LogicalResult evalAddRMSNorm(AddRMSNormOp op, Operands in, Results &out) {
  const Tensor &input = *in[0], &addend = *in[1];
  if (failed(expectShape(op, &addend, "addend", {input.dim(0), input.dim(1)})))
    return failure();
  Tensor &sum = out.emplace_back(resultElementType(op, 0), input.shape);
  for (size_t i = 0; i < sum.values.size(); ++i)
    sum.values[i] = roundTo(sum.elementType, input.values[i] + addend.values[i]);
  Tensor &result = out.emplace_back(resultElementType(op, 1), input.shape);
  return normalise(op, out[out.size() - 2], *in[2], result);
}

/// In every head, the pairs of the R columns from `offset` rotate by
/// positions[n] · inv_freq[i], cosine and sine scaled by `scale`.
LogicalResult evalRotary(RotaryOp op, Operands in, Results &out) {
  const Tensor &input = *in[0], &positions = *in[1], &invFreq = *in[2];
  int64_t n = input.dim(0), c = input.dim(1), half = invFreq.dim(0);
  int64_t headDim = static_cast<int64_t>(op.getHeadDim());
  int64_t offset = static_cast<int64_t>(op.getOffset());
  if (failed(expectShape(op, &positions, "positions", {n})))
    return failure();
  if (c % headDim != 0 || offset + 2 * half > headDim)
    return op.emitOpError() << "input has " << c << " columns at run time, not whole heads of "
                            << headDim << " with " << 2 * half << " rotated from " << offset;
  bool interleaved = op.getInterleaved();
  double scale = op.getScale().convertToDouble();
  Tensor &result = out.emplace_back(input);
  for (int64_t t = 0; t < n; ++t) {
    double position = positions.values[t];
    for (int64_t head = 0; head < c / headDim; ++head) {
      const double *x = input.values.data() + t * c + head * headDim + offset;
      double *y = result.values.data() + t * c + head * headDim + offset;
      for (int64_t i = 0; i < half; ++i) {
        double angle = position * invFreq.values[i];
        double cosine = std::cos(angle) * scale, sine = std::sin(angle) * scale;
        int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        y[a] = x[a] * cosine - x[b] * sine;
        y[b] = x[b] * cosine + x[a] * sine;
      }
    }
  }
  return success();
}

/// The rows of one moe.attention, split by head.
struct AttentionShape {
  int64_t tokens, heads, kvHeads, d, dk, dv, dr;
};

/// Writes every token's key, value and shared key at (sequence, position) of
/// the op's slot, after checking the ids and that the slot holds rows of the
/// same widths.
LogicalResult writeCache(AttentionOp op, const AttentionShape &s, const Tensor &key,
                         const Tensor &value, const Tensor *keyShared,
                         ArrayRef<std::pair<int64_t, int64_t>> at, KVCache &cache) {
  int64_t layer = static_cast<int64_t>(op.getLayer());
  int64_t keyColumns = s.kvHeads * s.dk, valueColumns = s.kvHeads * s.dv;
  auto [it, fresh] = cache.slots.try_emplace(layer);
  KVCache::Slot &slot = it->second;
  if (fresh) {
    slot.keyColumns = keyColumns;
    slot.valueColumns = valueColumns;
    slot.sharedColumns = s.dr;
  } else if (slot.keyColumns != keyColumns || slot.valueColumns != valueColumns ||
             slot.sharedColumns != s.dr) {
    return op.emitOpError() << "writes keys of " << keyColumns << " (+ " << s.dr
                            << " shared) and values of " << valueColumns
                            << " columns to the slot of layer " << layer << ", which holds "
                            << slot.keyColumns << " (+ " << slot.sharedColumns << ") and "
                            << slot.valueColumns << " from an earlier op";
  }
  std::set<std::pair<int64_t, int64_t>> written;
  for (int64_t t = 0; t < s.tokens; ++t)
    if (!written.insert(at[t]).second)
      return op.emitOpError() << "token " << t << " writes sequence " << at[t].first
                              << ", position " << at[t].second
                              << ", which an earlier token of the same step writes too";
  // Positions fill from 0 without gaps, counting this step's earlier tokens:
  // what the runtime's cache holds (docs/dialect.md).
  std::map<int64_t, int64_t> lengths = slot.lengths;
  for (int64_t t = 0; t < s.tokens; ++t) {
    auto [sequence, position] = at[t];
    int64_t &length = lengths[sequence];
    if (position > length)
      return op.emitOpError() << "token " << t << " writes sequence " << sequence
                              << " at position " << position << ", which holds " << length
                              << " positions: a gap";
    length = std::max(length, position + 1);
  }
  slot.lengths = std::move(lengths);
  // The rows are stored as the planned cache stores them (moe.kv_cache's
  // element_type, moe-cast-model-bf16): rounded once, on the way in.
  bool bf16 = false;
  if (auto function = op->getParentOfType<func::FuncOp>())
    if (auto plan = function->getAttrOfType<DictionaryAttr>(kKVCacheAttr))
      if (auto type = plan.getAs<TypeAttr>(kKVCacheElementType))
        bf16 = type.getValue().isBF16();
  auto row = [bf16](const Tensor &tensor, int64_t t, int64_t width) {
    auto begin = tensor.values.begin() + t * width;
    std::vector<double> values(begin, begin + width);
    if (bf16)
      for (double &v : values)
        v = roundTo(ElementType::BF16, v);
    return values;
  };
  for (int64_t t = 0; t < s.tokens; ++t) {
    KVCache::Entry &entry = slot.entries[at[t]];
    entry.key = row(key, t, keyColumns);
    entry.value = row(value, t, valueColumns);
    entry.keyShared = keyShared ? row(*keyShared, t, s.dr) : std::vector<double>();
  }
  return success();
}

/// Write every token's key and value, then attend: token n over its
/// sequence's positions p <= positions[n] (and > positions[n] - window), query
/// head h over KV head h / (Hq / Hkv), softmax(scale · q·k) with the sink in
/// the denominator.
LogicalResult evalAttention(AttentionOp op, Operands in, Results &out, KVCache &cache) {
  auto get = [&](Value value) { return operandTensor(op, in, value); };
  const Tensor &query = *get(op.getQuery()), &key = *get(op.getKey());
  const Tensor &value = *get(op.getValue()), &positions = *get(op.getPositions());
  const Tensor &sequences = *get(op.getSequences());
  const Tensor *keyShared = get(op.getKeyShared()), *sinks = get(op.getSinks());
  AttentionShape s;
  s.tokens = query.dim(0);
  s.heads = static_cast<int64_t>(op.getNumHeads());
  s.kvHeads = static_cast<int64_t>(op.getNumKvHeads());
  s.d = query.dim(1) / s.heads;
  s.dk = key.dim(1) / s.kvHeads;
  s.dv = value.dim(1) / s.kvHeads;
  s.dr = keyShared ? keyShared->dim(1) : 0;
  int64_t n = s.tokens;
  if (failed(expectShape(op, &key, "key", {n, s.kvHeads * s.dk})) ||
      failed(expectShape(op, &value, "value", {n, s.kvHeads * s.dv})) ||
      failed(expectShape(op, &positions, "positions", {n})) ||
      failed(expectShape(op, &sequences, "sequences", {n})) ||
      failed(expectShape(op, keyShared, "key_shared", {n, s.dr})) ||
      failed(expectShape(op, sinks, "sinks", {s.heads})))
    return failure();

  SmallVector<std::pair<int64_t, int64_t>> at; // (sequence, position) of each token
  for (int64_t t = 0; t < n; ++t) {
    int64_t sequence = toInt64(sequences.values[t]), position = toInt64(positions.values[t]);
    if (sequence < 0)
      return op.emitOpError() << "sequences[" << t << "] = " << sequence << " is negative";
    if (position < 0)
      return op.emitOpError() << "positions[" << t << "] = " << position << " is negative";
    at.emplace_back(sequence, position);
  }
  if (failed(writeCache(op, s, key, value, keyShared, at, cache)))
    return failure();

  const KVCache::Slot &slot = cache.slots.at(static_cast<int64_t>(op.getLayer()));
  int64_t window = op.getWindow();
  double scale = op.getScale().convertToDouble();
  int64_t group = s.heads / s.kvHeads;
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{n, s.heads * s.dv});
  std::vector<const KVCache::Entry *> entries;
  std::vector<double> scores;
  for (int64_t t = 0; t < n; ++t) {
    auto [sequence, position] = at[t];
    int64_t first = window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
    entries.clear();
    for (int64_t p = first; p <= position; ++p) {
      auto it = slot.entries.find({sequence, p});
      if (it == slot.entries.end())
        return op.emitOpError() << "token " << t << " (sequence " << sequence << ", position "
                                << position << ") reads sequence " << sequence << ", position "
                                << p << " of the KV cache of layer " << op.getLayer()
                                << ", which was never written";
      entries.push_back(&it->second);
    }
    for (int64_t h = 0; h < s.heads; ++h) {
      const double *q = query.values.data() + t * s.heads * s.d + h * s.d;
      int64_t kvHead = h / group;
      scores.clear();
      double max = -std::numeric_limits<double>::infinity();
      for (const KVCache::Entry *entry : entries) {
        double dot = 0.0;
        for (int64_t i = 0; i < s.dk; ++i)
          dot += q[i] * entry->key[kvHead * s.dk + i];
        for (int64_t i = 0; i < s.dr; ++i)
          dot += q[s.dk + i] * entry->keyShared[i];
        scores.push_back(scale * dot);
        max = std::max(max, scores.back());
      }
      double sink = sinks ? sinks->values[h] : -std::numeric_limits<double>::infinity();
      max = std::max(max, sink);
      double denominator = sinks ? std::exp(sink - max) : 0.0;
      for (double &score : scores)
        denominator += score = std::exp(score - max);
      double *y = result.values.data() + t * s.heads * s.dv + h * s.dv;
      for (int64_t c = 0; c < s.dv; ++c) {
        double sum = 0.0;
        for (auto [weight, entry] : llvm::zip(scores, entries))
          sum += weight * entry->value[kvHead * s.dv + c];
        y[c] = sum / denominator;
      }
    }
  }
  return success();
}

} // namespace

bool isModelOp(Operation *op) {
  return isa<EmbeddingOp, RMSNormOp, AddRMSNormOp, RotaryOp, AttentionOp, ElementwiseOp,
             ReduceRowsOp>(op);
}

LogicalResult evalModelOp(Operation *op, Operands in, Results &out, KVCache &cache,
                          RegionRunner &regions) {
  bool handled = false;
  LogicalResult generic = evalGenericModelOp(op, in, out, regions, handled);
  if (handled)
    return generic;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<EmbeddingOp>([&](EmbeddingOp o) { return evalEmbedding(o, in, out); })
      .Case<RMSNormOp>([&](RMSNormOp o) { return evalRMSNorm(o, in, out); })
      .Case<AddRMSNormOp>([&](AddRMSNormOp o) { return evalAddRMSNorm(o, in, out); })
      .Case<RotaryOp>([&](RotaryOp o) { return evalRotary(o, in, out); })
      .Case<AttentionOp>([&](AttentionOp o) { return evalAttention(o, in, out, cache); })
      .Default([](Operation *other) {
        return other->emitOpError("is not an op of whole models");
      });
}

} // namespace moec::interp::detail
