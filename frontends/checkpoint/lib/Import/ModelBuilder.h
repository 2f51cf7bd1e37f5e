//===- ModelBuilder.h - the builder of a checkpoint's step program -*- C++ -*-===//
//
// Internal to the checkpoint importer: the tensors a checkpoint holds, read,
// checked and decoded (f32, bf16, f16, f64, F8_E4M3 with block scales,
// MXFP4), or for a random model placeholders with their fill; and the
// Builder that turns them into the step program's ops. ImportModel.cpp
// builds the program (Builder::build) and ModelLayers.cpp each layer's
// attention, dense MLP and MoE block.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MODELBUILDER_H
#define MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MODELBUILDER_H

#include "moec/Frontends/Checkpoint/Import.h"

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Frontends/Checkpoint/Config.h"
#include "moec/Frontends/Checkpoint/SafeTensors.h"

#include "MXFP4Experts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>

namespace moec::checkpoint::detail {

using namespace mlir;
namespace moe = moec::moe;

/// How a weight of a random model (--random-weights) is filled at load:
/// every element `value`, or a normal of deviation `value`.
struct Fill {
  bool normal = false;
  double value = 0;
  bool operator==(const Fill &) const = default;
};

/// A tensor of the checkpoint as f32 values, row-major; or, for a random
/// model, only its shape and fill (`data` empty): a placeholder that is never
/// materialised.
struct Tensor {
  SmallVector<int64_t> shape;
  std::vector<float> data;
  std::optional<Fill> fill;
};

inline float bf16ToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

inline float f16ToFloat(uint16_t bits) {
  uint32_t sign = (bits >> 15) & 1, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 1024), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

/// e4m3fn (finite only: 0x7f / 0xff are NaN) as a float.
inline float e4m3ToFloat(uint8_t bits) {
  int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                    : exponent == 15 && mantissa == 7
                        ? NAN
                        : std::ldexp(static_cast<float>(mantissa | 8), exponent - 10);
  return bits & 0x80 ? -magnitude : magnitude;
}

/// "[a, b, c]"
inline std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// An FP8 weight of the checkpoint [..., R, C]: its e4m3 codes as they are and
/// its block scales [..., ceil(R/blockRows), ceil(C/blockColumns)] (f32
/// dequantisation multipliers: the weight is code · scale of its block).
struct FP8Weight {
  SmallVector<int64_t> shape;
  std::vector<char> codes;
  Tensor scales;
  int64_t blockRows = 128, blockColumns = 128;
};

class Builder {
public:
  /// `checkpoint` null: a random model (ImportOptions::randomSeed), whose
  /// weights are placeholders of deviation `initializerRange`.
  Builder(Checkpoint *checkpoint, const ModelConfig &config, MLIRContext &context,
          StringRef dir, double initializerRange)
      : checkpoint(checkpoint), config(config), context(context), builder(&context),
        dir(dir.str()), initializerRange(initializerRange) {}

  OwningOpRef<ModuleOp> build();

private:
  //===--- Tensors ------------------------------------------------------===//

  Location locFor(StringRef name) {
    return NameLoc::get(StringAttr::get(&context, name),
                        FileLineColLoc::get(&context, dir, 0, 0));
  }

  /// Fails with a message naming the tensor (and the checkpoint).
  void error(StringRef name, const Twine &why) {
    if (failedOnce)
      return;
    failedOnce = true;
    emitError(locFor(name)) << "tensor '" << name << "' " << why;
  }

  bool has(StringRef name) { return checkpoint && checkpoint->has(name); }

  /// A random model's weight `name`: what transformers' _init_weights gives
  /// (a normal of initializer_range for matrices, embeddings, routers and
  /// experts; ones for RMSNorm weights), and zeros where a bias-like tensor
  /// is better neutral (biases, gpt-oss's sinks, DeepSeek's
  /// e_score_correction_bias).
  Fill randomFill(StringRef name) const {
    if (name.ends_with("norm.weight"))
      return {false, 1.0};
    if (name.ends_with("bias") || name.ends_with("sinks"))
      return {false, 0.0};
    return {true, initializerRange};
  }

  /// Tensor `name`, checked to have shape `shape`, or nullopt after an error.
  std::optional<TensorView> view(StringRef name, ArrayRef<int64_t> shape) {
    if (failedOnce)
      return std::nullopt;
    if (!has(name)) {
      error(name, "is missing (the " + familyName(config.family) + " layout needs it)");
      return std::nullopt;
    }
    llvm::Expected<TensorView> view = checkpoint->tensor(name);
    if (!view) {
      error(name, "cannot be read: " + llvm::toString(view.takeError()));
      return std::nullopt;
    }
    if (ArrayRef<int64_t>(view->shape) != shape) {
      error(name, "has shape " + shapeString(view->shape) + ", the config implies " +
                      shapeString(shape));
      return std::nullopt;
    }
    bytesRead += view->bytes.size();
    progress();
    return *view;
  }

  /// A float tensor's values as f32.
  std::optional<Tensor> decode(const TensorView &view) {
    Tensor tensor;
    tensor.shape.assign(view.shape.begin(), view.shape.end());
    int64_t count = view.numElements();
    tensor.data.resize(static_cast<size_t>(count));
    const char *bytes = view.bytes.data();
    switch (view.dtype) {
    case DType::F32:
      std::memcpy(tensor.data.data(), bytes, 4 * static_cast<size_t>(count));
      break;
    case DType::BF16:
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        tensor.data[i] = view.dtype == DType::BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
      }
      break;
    case DType::F64:
      for (int64_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, bytes + 8 * i, 8);
        tensor.data[i] = static_cast<float>(value);
      }
      break;
    default:
      error(view.name, "has dtype " + dtypeName(view.dtype) +
                           "; weights are read from f32, bf16, f16 or f64 (and F8_E4M3 with "
                           "block scales, quantization_config fp8)");
      return std::nullopt;
    }
    return tensor;
  }

  /// The name of the block scales of FP8 weight `name`, as transformers
  /// spells them: X.weight -> X.weight_scale_inv, X.gate_up_proj ->
  /// X.gate_up_proj_scale_inv.
  static std::string scalesName(StringRef name) {
    if (name.ends_with(".weight"))
      return (name.drop_back(strlen(".weight")) + ".weight_scale_inv").str();
    return (name + "_scale_inv").str();
  }

  /// A checked tensor's values as f32, or nullopt after an error. An FP8
  /// weight is dequantised with its block scales.
  std::optional<Tensor> values(const TensorView &tensor) {
    if (tensor.dtype == DType::F8E4M3) {
      std::optional<FP8Weight> weight = fp8(tensor);
      return weight ? std::optional<Tensor>(dequantize(*weight)) : std::nullopt;
    }
    std::string scales = scalesName(tensor.name);
    if (config.quantization && has(scales)) {
      error(scales, "is given but '" + tensor.name + "' is " + dtypeName(tensor.dtype) +
                        ", not F8_E4M3: block scales belong to an FP8 weight");
      return std::nullopt;
    }
    return decode(tensor);
  }

  /// Tensor `name` of shape `shape` as f32, or nullopt after an error; a
  /// random model's placeholder.
  std::optional<Tensor> read(StringRef name, ArrayRef<int64_t> shape) {
    if (!checkpoint) {
      if (failedOnce)
        return std::nullopt;
      return Tensor{SmallVector<int64_t>(shape), {}, randomFill(name)};
    }
    std::optional<TensorView> tensor = view(name, shape);
    return tensor ? values(*tensor) : std::nullopt;
  }

  /// An F8_E4M3 weight and its block scales (`scalesName`), checked: an fp8
  /// quantization_config, scales of the shape its blocks make, finite, and no
  /// NaN code.
  std::optional<FP8Weight> fp8(const TensorView &tensor) {
    StringRef name = tensor.name;
    if (config.quantization != "fp8" || config.fp8BlockSize.size() != 2) {
      error(name, "is F8_E4M3, but config.json has no fp8 quantization_config (its "
                  "weight_block_size says what its weight_scale_inv blocks are)");
      return std::nullopt;
    }
    FP8Weight weight;
    weight.shape.assign(tensor.shape.begin(), tensor.shape.end());
    weight.blockRows = config.fp8BlockSize[0];
    weight.blockColumns = config.fp8BlockSize[1];
    size_t rank = weight.shape.size();
    if (rank < 2) {
      error(name, "is F8_E4M3 with shape " + shapeString(weight.shape) +
                      "; FP8 weights have at least two dimensions (their blocks' rows and "
                      "columns)");
      return std::nullopt;
    }
    SmallVector<int64_t> scaleShape(weight.shape.begin(), weight.shape.end());
    scaleShape[rank - 2] = ceilDiv(scaleShape[rank - 2], weight.blockRows);
    scaleShape[rank - 1] = ceilDiv(scaleShape[rank - 1], weight.blockColumns);
    std::string scaleName = scalesName(name);
    std::string blocks = "in blocks of " + std::to_string(weight.blockRows) + "x" +
                         std::to_string(weight.blockColumns) +
                         " (quantization_config.weight_block_size)";
    if (!has(scaleName)) {
      error(scaleName, "is missing: '" + name + "' is F8_E4M3 " + shapeString(weight.shape) +
                           " and needs its block scales " + shapeString(scaleShape) + ", " +
                           blocks);
      return std::nullopt;
    }
    llvm::Expected<TensorView> scaleView = checkpoint->tensor(scaleName);
    if (!scaleView) {
      error(scaleName, "cannot be read: " + llvm::toString(scaleView.takeError()));
      return std::nullopt;
    }
    if (ArrayRef<int64_t>(scaleView->shape) != ArrayRef<int64_t>(scaleShape)) {
      error(scaleName, "has shape " + shapeString(scaleView->shape) + ", but '" + name + "' " +
                           shapeString(weight.shape) + " " + blocks + " needs " +
                           shapeString(scaleShape));
      return std::nullopt;
    }
    std::optional<Tensor> scales = decode(*scaleView);
    if (!scales)
      return std::nullopt;
    for (size_t i = 0; i < scales->data.size(); ++i)
      if (!std::isfinite(scales->data[i])) {
        error(scaleName, "holds a scale that is not finite (element " + std::to_string(i) + ")");
        return std::nullopt;
      }
    bytesRead += scaleView->bytes.size();
    bool nan = false;
    for (char code : tensor.bytes)
      nan |= (code & 0x7f) == 0x7f;
    if (nan) {
      size_t at = llvm::find_if(tensor.bytes, [](char code) { return (code & 0x7f) == 0x7f; }) -
                  tensor.bytes.begin();
      error(name, "holds an e4m3 NaN code (element " + std::to_string(at) + ")");
      return std::nullopt;
    }
    weight.codes.assign(tensor.bytes.begin(), tensor.bytes.end());
    weight.scales = std::move(*scales);
    return weight;
  }

  /// The values an FP8 weight stands for, code · scale in f32.
  static Tensor dequantize(const FP8Weight &weight) {
    Tensor out;
    out.shape = weight.shape;
    size_t rank = weight.shape.size();
    int64_t rows = weight.shape[rank - 2], columns = weight.shape[rank - 1];
    int64_t rowBlocks = ceilDiv(rows, weight.blockRows);
    int64_t columnBlocks = ceilDiv(columns, weight.blockColumns);
    out.data.resize(weight.codes.size());
    float table[256];
    for (int code = 0; code < 256; ++code)
      table[code] = e4m3ToFloat(static_cast<uint8_t>(code));
    int64_t batches = static_cast<int64_t>(weight.codes.size()) / (rows * columns);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        const float *scales =
            &weight.scales.data[(b * rowBlocks + r / weight.blockRows) * columnBlocks];
        int64_t base = (b * rows + r) * columns;
        for (int64_t c = 0; c < columns; ++c)
          out.data[base + c] =
              table[static_cast<uint8_t>(weight.codes[base + c])] * scales[c / weight.blockColumns];
      }
    return out;
  }

  /// A progress line on large checkpoints, every 10 %.
  void progress() {
    uint64_t total = checkpoint->totalBytes();
    if (total < (uint64_t{1} << 30))
      return;
    unsigned tenth = static_cast<unsigned>(bytesRead * 10 / total);
    if (tenth == reportedTenth)
      return;
    reportedTenth = tenth;
    llvm::errs() << "moec: read " << bytesRead / (1 << 20) << " of " << total / (1 << 20)
                 << " MiB of " << dir << "\n";
  }

  /// An arith.constant holding `tensor` (f32). A placeholder is a splat
  /// (never materialised: a 60 GB model compiles in seconds), named
  /// (moec.name) and, for a normal, marked with its deviation
  /// (moec.random_normal; ConstantData.h).
  Value constant(const Tensor &tensor, StringRef name) {
    auto type = RankedTensorType::get(tensor.shape, builder.getF32Type());
    if (tensor.fill) {
      // A normal's placeholder value is its own: constant folding merges equal
      // constants whatever their names (the greedy driver's folder compares
      // values), which would make two weights one. Distinct bf16 values from
      // 2^16 up (2^16, 2^16 + 2^9, ...: no real constant fill) stay distinct
      // when moe-cast-experts-bf16 rounds them.
      if (tensor.fill->normal && randomWeights >= kMaxRandomWeights) {
        error(name, "is random weight number " + std::to_string(randomWeights) +
                        "; a random model has at most " + std::to_string(kMaxRandomWeights));
        return Value();
      }
      float splat = static_cast<float>(tensor.fill->value);
      if (tensor.fill->normal) {
        uint32_t bits = (0x4780u + static_cast<uint32_t>(randomWeights++)) << 16;
        std::memcpy(&splat, &bits, 4);
      }
      auto op = arith::ConstantOp::create(builder, locFor(name),
                                          DenseElementsAttr::get(type, splat));
      op->setAttr("moec.name", builder.getStringAttr(name));
      if (tensor.fill->normal)
        op->setAttr(kRandomNormalAttr, builder.getF64FloatAttr(tensor.fill->value));
      return op.getResult();
    }
    ArrayRef<char> bytes(reinterpret_cast<const char *>(tensor.data.data()),
                         tensor.data.size() * sizeof(float));
    return makeConstant(builder, locFor(name), type, bytes, name);
  }

  Value weight(StringRef name, ArrayRef<int64_t> shape) {
    std::optional<Tensor> tensor = read(name, shape);
    return tensor ? constant(*tensor, name) : Value();
  }

  /// Rows [begin, end) of a [R, C] tensor.
  static Tensor rows(const Tensor &tensor, int64_t begin, int64_t end) {
    int64_t columns = tensor.shape[1];
    Tensor out;
    out.shape = {end - begin, columns};
    out.fill = tensor.fill;
    if (tensor.fill)
      return out;
    out.data.assign(tensor.data.begin() + begin * columns, tensor.data.begin() + end * columns);
    return out;
  }

  /// [A, B] row blocks stacked: the rows of `parts` in order.
  static Tensor stack(ArrayRef<const Tensor *> parts) {
    Tensor out;
    out.shape = {0, parts.front()->shape.back()};
    // Placeholders stack into one (the importer stacks like with like).
    out.fill = parts.front()->fill;
    for (const Tensor *part : parts) {
      out.shape[0] += part->shape[0];
      assert(part->fill == out.fill && "stacking a placeholder with another kind");
      out.data.insert(out.data.end(), part->data.begin(), part->data.end());
    }
    return out;
  }

  /// [E, A, B] -> [E, B, A].
  static Tensor transposeLastTwo(const Tensor &tensor) {
    int64_t e = tensor.shape[0], a = tensor.shape[1], b = tensor.shape[2];
    Tensor out;
    out.shape = {e, b, a};
    out.fill = tensor.fill;
    if (tensor.fill)
      return out;
    out.data.resize(tensor.data.size());
    for (int64_t x = 0; x < e; ++x)
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < b; ++j)
          out.data[(x * b + j) * a + i] = tensor.data[(x * a + i) * b + j];
    return out;
  }

  //===--- Ops ----------------------------------------------------------===//

  RankedTensorType rowsOf(int64_t columns) {
    return RankedTensorType::get({ShapedType::kDynamic, columns}, builder.getF32Type());
  }

  Value linear(Value x, Value w, Value bias, StringRef name) {
    if (!x || !w)
      return Value();
    int64_t n = cast<RankedTensorType>(w.getType()).getDimSize(0);
    return moe::LinearOp::create(builder, locFor(name), rowsOf(n), x, w, bias,
                                 /*epilogue=*/nullptr, /*epilogue_layout=*/nullptr);
  }

  Value linear(Value x, StringRef name, int64_t out, int64_t in, bool bias = false) {
    Value w = weight((name + ".weight").str(), {out, in});
    Value b = bias ? weight((name + ".bias").str(), {out}) : Value();
    return linear(x, w, b, name);
  }

  Value rmsNorm(Value x, StringRef name, int64_t size) {
    Value w = weight((name + ".weight").str(), {size});
    if (!x || !w)
      return Value();
    return moe::RMSNormOp::create(builder, locFor(name), x.getType(), x, w,
                                  builder.getF64FloatAttr(config.rmsNormEps),
                                  builder.getF64FloatAttr(0.0));
  }

  Value rotary(Value x, int64_t headDim, int64_t offset, StringRef name) {
    if (!x)
      return Value();
    return moe::RotaryOp::create(builder, locFor(name), x.getType(), x, positions, invFreq,
                                 builder.getI64IntegerAttr(headDim),
                                 builder.getI64IntegerAttr(offset),
                                 builder.getBoolAttr(config.ropeInterleave),
                                 builder.getF64FloatAttr(ropeScale));
  }

  Value add(Value a, Value b, StringRef name) {
    if (!a || !b)
      return Value();
    return arith::AddFOp::create(builder, locFor(name), a, b);
  }

  /// The rotary frequencies of a rotated slice of `dim` columns
  /// (transformers' default and YaRN parameters), and the factor on cos/sin.
  void computeRope(int64_t dim) {
    const RopeConfig &rope = config.rope;
    std::vector<double> freq(static_cast<size_t>(dim / 2));
    for (int64_t i = 0; i < dim / 2; ++i)
      freq[i] = 1.0 / std::pow(rope.theta, static_cast<double>(2 * i) / dim);
    ropeScale = 1.0;
    if (rope.kind == RopeConfig::Yarn) {
      auto mscale = [](double scale, double m) {
        return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
      };
      double factor = rope.factor;
      if (rope.attentionFactor)
        ropeScale = *rope.attentionFactor;
      else if (rope.mscale != 0.0 && rope.mscaleAllDim != 0.0)
        ropeScale = mscale(factor, rope.mscale) / mscale(factor, rope.mscaleAllDim);
      else
        ropeScale = mscale(factor, 1.0);
      double original = static_cast<double>(rope.originalMaxPositions);
      auto correction = [&](double rotations) {
        return dim * std::log(original / (rotations * 2 * std::numbers::pi)) /
               (2 * std::log(rope.theta));
      };
      double low = correction(rope.betaFast), high = correction(rope.betaSlow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high)
        high += 0.001; // transformers' guard against a zero-width ramp
      for (int64_t i = 0; i < dim / 2; ++i) {
        double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        double extrapolation = freq[i], interpolation = freq[i] / factor;
        freq[i] = interpolation * ramp + extrapolation * (1.0 - ramp);
      }
    }
    Tensor table;
    table.shape = {dim / 2};
    for (double f : freq)
      table.data.push_back(static_cast<float>(f));
    invFreq = constant(table, "rotary.inv_freq");
  }

  Value attention(Value x, int64_t layer);
  Value attentionMLA(Value x, int64_t layer);
  Value denseMLP(Value x, int64_t layer);
  Value moeBlock(Value x, int64_t layer);

  /// An expert weight [E, rows, columns] as moe.layer takes it: f32 values,
  /// or (an FP8 checkpoint's) e4m3 codes with their 128x128 block scales.
  struct ExpertWeight {
    Tensor values;
    std::optional<FP8Weight> fp8;
    std::optional<MXFP4Experts> mxfp4;
    SmallVector<int64_t> mxfp4Shape; // [E, N, K]
  };

  /// gpt-oss's MXFP4 expert projection `name` [E, rows, columns] from its
  /// `_blocks` and `_scales`, kept as it is.
  std::optional<ExpertWeight> mxfp4Experts(StringRef name, int64_t rows, int64_t columns);

  /// The stacked expert weights [E, rows, columns] from v5's fused tensor or
  /// v4's per-expert ones (`parts` per expert, stacked by rows), FP8 ones
  /// kept as they are.
  std::optional<ExpertWeight> experts(StringRef prefix, StringRef fused,
                                      ArrayRef<StringRef> perExpert, int64_t rows,
                                      int64_t columns);
  /// Whether FP8 expert weight `name` has moe.layer's 128x128 blocks.
  bool expertBlocks(const FP8Weight &weight, StringRef name);
  /// The constant(s) moe.layer takes for an expert weight: the weight and its
  /// block scales (null for an f32 weight).
  std::pair<Value, Value> expertConstants(const ExpertWeight &weight, StringRef name);

  Checkpoint *checkpoint;
  const ModelConfig &config;
  MLIRContext &context;
  OpBuilder builder;
  std::string dir;
  double initializerRange;
  /// Random weights placed so far; their placeholders' distinct values are
  /// the finite bf16 numbers from 2^16 up.
  int64_t randomWeights = 0;
  static constexpr int64_t kMaxRandomWeights = 0x7F80 - 0x4780;
  Value positions, sequences, invFreq;
  double ropeScale = 1.0;
  bool failedOnce = false;
  uint64_t bytesRead = 0;
  unsigned reportedTenth = 0;
};

} // namespace moec::checkpoint::detail

#endif // MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MODELBUILDER_H
