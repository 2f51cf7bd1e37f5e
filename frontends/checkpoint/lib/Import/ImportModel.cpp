//===- ImportModel.cpp - a checkpoint as a whole-model step program -------===//
//
// One decoder layer per config layer: RMSNorm, attention (GQA with rotary
// embedding, Qwen3's query/key norms, gpt-oss's biases and sinks, DeepSeek-V3's
// MLA), the residual sum, RMSNorm, a dense MLP or a moe.layer, the residual
// sum; then the final norm and the LM head. Which tensors and attributes a
// family needs is written here once per family; Config.h has already checked
// the config's keys and values. Every tensor is checked against the shape the
// config implies before it is read.
//
// FP8 checkpoints (quantization_config fp8, DeepSeek-V3's): a projection's
// `X.weight` is F8_E4M3 with `X.weight_scale_inv`, one f32 dequantisation
// multiplier per weight_block_size block. The routed experts stay e4m3:
// moe.layer takes the codes as they are with their 128x128 block scales
// (per-expert gate and up stacked into gate_up, which needs their rows to be
// whole 128-blocks). Every other FP8 weight (attention, shared experts, dense
// MLP) is dequantised here, once, to f32, which the CPU target computes in.
// A weight's dtype decides, so modules_to_not_convert needs no list here.
//
// MXFP4 checkpoints (quantization_config mxfp4, gpt-oss's): the experts'
// gate_up_proj and down_proj come as `_blocks` and `_scales` (MXFP4Experts.h),
// taken as they are: moe.layer's f4E2M1FN weights with f8E8M0FNU scales.
//
//===----------------------------------------------------------------------===//

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
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <numbers>

using namespace mlir;
namespace moe = moec::moe;

namespace moec::checkpoint {
namespace {

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

float bf16ToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

float f16ToFloat(uint16_t bits) {
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
float e4m3ToFloat(uint8_t bits) {
  int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                    : exponent == 15 && mantissa == 7
                        ? NAN
                        : std::ldexp(static_cast<float>(mantissa | 8), exponent - 10);
  return bits & 0x80 ? -magnitude : magnitude;
}

/// "[a, b, c]"
std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

Value Builder::attention(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t h = config.hiddenSize, d = config.headDim;
  int64_t heads = config.numHeads, kvHeads = config.numKVHeads;
  bool bias = config.attentionBias;
  Value q = linear(x, p + "q_proj", heads * d, h, bias);
  Value k = linear(x, p + "k_proj", kvHeads * d, h, bias);
  Value v = linear(x, p + "v_proj", kvHeads * d, h, bias);
  if (config.family == Family::Qwen3Moe) {
    q = rmsNorm(q, p + "q_norm", d);
    k = rmsNorm(k, p + "k_norm", d);
  }
  q = rotary(q, d, 0, p + "rotary_q");
  k = rotary(k, d, 0, p + "rotary_k");
  Value sinks =
      config.family == Family::GptOss ? weight(p + "sinks", {heads}) : Value();
  if (!q || !k || !v || (config.family == Family::GptOss && !sinks))
    return Value();
  Value out = moe::AttentionOp::create(
      builder, locFor(p + "attention"), rowsOf(heads * d), q, k, v, positions, sequences,
      /*key_shared=*/Value(), sinks, builder.getI64IntegerAttr(layer),
      builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(kvHeads),
      builder.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(d))),
      builder.getI64IntegerAttr(config.layerWindow[layer]));
  return linear(out, p + "o_proj", h, heads * d, bias);
}

/// DeepSeek-V3's multi-head latent attention, with the latent expanded per
/// head (kv_b_proj's key and value rows split apart) and the rope key shared
/// by every head.
Value Builder::attentionMLA(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t h = config.hiddenSize, heads = config.numHeads;
  int64_t nope = config.qkNopeHeadDim, rope = config.qkRopeHeadDim, vDim = config.vHeadDim;
  int64_t rank = config.kvLoraRank, qHead = nope + rope;
  Value q;
  if (config.qLoraRank) {
    Value latent = linear(x, p + "q_a_proj", *config.qLoraRank, h);
    latent = rmsNorm(latent, p + "q_a_layernorm", *config.qLoraRank);
    q = linear(latent, p + "q_b_proj", heads * qHead, *config.qLoraRank);
  } else {
    q = linear(x, p + "q_proj", heads * qHead, h);
  }
  q = rotary(q, qHead, nope, p + "rotary_q");
  std::optional<Tensor> kvA = read(p + "kv_a_proj_with_mqa.weight", {rank + rope, h});
  std::optional<Tensor> kvB = read(p + "kv_b_proj.weight", {heads * (nope + vDim), rank});
  if (!q || !kvA || !kvB)
    return Value();
  Value latent = linear(x, constant(rows(*kvA, 0, rank), p + "kv_a_proj_with_mqa.latent"),
                        Value(), p + "kv_a_proj_with_mqa");
  Value ropeKey = linear(x, constant(rows(*kvA, rank, rank + rope), p + "kv_a_proj_with_mqa.rope"),
                         Value(), p + "kv_a_proj_with_mqa");
  ropeKey = rotary(ropeKey, rope, 0, p + "rotary_k");
  latent = rmsNorm(latent, p + "kv_a_layernorm", rank);
  // kv_b_proj's rows are, per head, nope key rows then v value rows.
  std::vector<Tensor> keyParts, valueParts;
  for (int64_t head = 0; head < heads; ++head) {
    int64_t base = head * (nope + vDim);
    keyParts.push_back(rows(*kvB, base, base + nope));
    valueParts.push_back(rows(*kvB, base + nope, base + nope + vDim));
  }
  SmallVector<const Tensor *> keys, values;
  for (int64_t head = 0; head < heads; ++head) {
    keys.push_back(&keyParts[head]);
    values.push_back(&valueParts[head]);
  }
  Value key = linear(latent, constant(stack(keys), p + "kv_b_proj.key"), Value(), p + "kv_b_proj");
  Value value =
      linear(latent, constant(stack(values), p + "kv_b_proj.value"), Value(), p + "kv_b_proj");
  if (!key || !value || !ropeKey)
    return Value();
  // softmax scale: qk_head_dim^-1/2, times YaRN's mscale(factor, mscale_all_dim)².
  double scale = 1.0 / std::sqrt(static_cast<double>(qHead));
  if (config.rope.kind == RopeConfig::Yarn && config.rope.mscaleAllDim != 0.0 &&
      config.rope.factor > 1.0) {
    double m = 0.1 * config.rope.mscaleAllDim * std::log(config.rope.factor) + 1.0;
    scale *= m * m;
  }
  Value out = moe::AttentionOp::create(
      builder, locFor(p + "attention"), rowsOf(heads * vDim), q, key, value, positions,
      sequences, ropeKey, /*sinks=*/Value(), builder.getI64IntegerAttr(layer),
      builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(heads),
      builder.getF64FloatAttr(scale), builder.getI64IntegerAttr(config.layerWindow[layer]));
  return linear(out, p + "o_proj", h, heads * vDim);
}

Value Builder::denseMLP(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  int64_t h = config.hiddenSize, inter = config.intermediateSize;
  std::optional<Tensor> gate = read(p + "gate_proj.weight", {inter, h});
  std::optional<Tensor> up = read(p + "up_proj.weight", {inter, h});
  Value down = weight(p + "down_proj.weight", {h, inter});
  if (!x || !gate || !up || !down)
    return Value();
  Value gateUp = constant(stack({&*gate, &*up}), p + "gate_up_proj");
  auto activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU);
  Value hidden = moe::LinearOp::create(
      builder, locFor(p + "gate_up_proj"), rowsOf(inter), x, gateUp, Value(), activation,
      moe::GateUpLayoutAttr::get(&context, moe::GateUpLayout::Concatenated));
  return linear(hidden, down, Value(), p + "down_proj");
}

bool Builder::expertBlocks(const FP8Weight &weight, StringRef name) {
  if (weight.blockRows == moe::kScaleBlock && weight.blockColumns == moe::kScaleBlock)
    return true;
  error(name, "is F8_E4M3 in blocks of " + std::to_string(weight.blockRows) + "x" +
                  std::to_string(weight.blockColumns) +
                  " (quantization_config.weight_block_size); moe.layer's FP8 experts take "
                  "128x128 blocks, and moec does not quantise FP8 weights again");
  return false;
}

std::optional<Builder::ExpertWeight> Builder::experts(StringRef prefix, StringRef fused,
                                                      ArrayRef<StringRef> perExpert,
                                                      int64_t rows, int64_t columns) {
  int64_t count = config.numExperts;
  std::string fusedName = (prefix + fused).str();
  ExpertWeight out;
  if (!checkpoint) { // a random model: f32 placeholders, whatever the checkpoint's format
    std::optional<Tensor> placeholder = read(fusedName, {count, rows, columns});
    if (!placeholder)
      return std::nullopt;
    out.values = std::move(*placeholder);
    return out;
  }
  if (has(fusedName)) {
    std::optional<TensorView> tensor = view(fusedName, {count, rows, columns});
    if (!tensor)
      return std::nullopt;
    if (tensor->dtype == DType::F8E4M3) {
      out.fp8 = fp8(*tensor);
      if (!out.fp8 || !expertBlocks(*out.fp8, fusedName))
        return std::nullopt;
      return out;
    }
    std::optional<Tensor> decoded = values(*tensor);
    if (!decoded)
      return std::nullopt;
    out.values = std::move(*decoded);
    return out;
  }
  // v4: one tensor per expert and part, its rows stacked.
  int64_t partRows = rows / static_cast<int64_t>(perExpert.size());
  std::string first = (prefix + "0." + perExpert.front() + ".weight").str();
  if (!has(first)) {
    error(fusedName, "is missing, and so is its per-expert form '" + first + "'");
    return std::nullopt;
  }
  std::optional<TensorView> firstView = view(first, {partRows, columns});
  if (!firstView)
    return std::nullopt;
  bool isFP8 = firstView->dtype == DType::F8E4M3;
  if (isFP8) {
    out.fp8.emplace();
    out.fp8->shape = {count, rows, columns};
    out.fp8->scales.shape = {count, ceilDiv(rows, moe::kScaleBlock),
                             ceilDiv(columns, moe::kScaleBlock)};
  } else {
    out.values.shape = {count, rows, columns};
  }
  for (int64_t e = 0; e < count; ++e)
    for (StringRef part : perExpert) {
      std::string name = (prefix + Twine(e) + "." + part + ".weight").str();
      std::optional<TensorView> piece =
          e == 0 && part == perExpert.front() ? firstView : view(name, {partRows, columns});
      if (!piece)
        return std::nullopt;
      if ((piece->dtype == DType::F8E4M3) != isFP8) {
        error(name, "is " + dtypeName(piece->dtype) + " but '" + first + "' is " +
                        dtypeName(firstView->dtype) +
                        ": the experts' weights are FP8 all or none");
        return std::nullopt;
      }
      if (!isFP8) {
        std::optional<Tensor> decoded = values(*piece);
        if (!decoded)
          return std::nullopt;
        out.values.data.insert(out.values.data.end(), decoded->data.begin(), decoded->data.end());
        continue;
      }
      std::optional<FP8Weight> weight = fp8(*piece);
      if (!weight || !expertBlocks(*weight, name))
        return std::nullopt;
      // Stacked parts keep one scale per 128x128 block only if each part's
      // rows are whole blocks; moec does not quantise FP8 weights again.
      if (perExpert.size() > 1 && partRows % moe::kScaleBlock != 0) {
        error(name, "is F8_E4M3 with " + std::to_string(partRows) +
                        " rows, not a multiple of 128: moe.layer's FP8 gate_up stacks the "
                        "experts' " + perExpert[0] + " and " + perExpert[1] +
                        " rows with one scale per 128x128 block, and their blocks would "
                        "straddle (moec does not quantise FP8 weights again)");
        return std::nullopt;
      }
      out.fp8->codes.insert(out.fp8->codes.end(), weight->codes.begin(), weight->codes.end());
      out.fp8->scales.data.insert(out.fp8->scales.data.end(), weight->scales.data.begin(),
                                  weight->scales.data.end());
    }
  return out;
}

std::optional<Builder::ExpertWeight> Builder::mxfp4Experts(StringRef name, int64_t rows,
                                                           int64_t columns) {
  int64_t count = config.numExperts, kBlocks = ceilDiv(columns, moe::kMXBlock);
  std::string blocksName = (name + "_blocks").str(), scalesName = (name + "_scales").str();
  if (config.quantization != "mxfp4") {
    error(blocksName, "is MXFP4, but config.json has no mxfp4 quantization_config");
    return std::nullopt;
  }
  std::optional<TensorView> blocks = view(blocksName, {count, rows, kBlocks, 16});
  std::optional<TensorView> scales = view(scalesName, {count, rows, kBlocks});
  if (!blocks || !scales)
    return std::nullopt;
  for (const TensorView *tensor : {&*blocks, &*scales})
    if (tensor->dtype != DType::U8) {
      error(tensor->name, "has dtype " + dtypeName(tensor->dtype) +
                              "; MXFP4 blocks and scales are U8");
      return std::nullopt;
    }
  std::string why;
  std::optional<MXFP4Experts> unpacked =
      unpackMXFP4(blocks->bytes, scales->bytes, count * rows, columns, why);
  if (!unpacked) {
    error(why.find("scale") != std::string::npos ? scalesName : blocksName, why);
    return std::nullopt;
  }
  ExpertWeight out;
  out.mxfp4 = std::move(*unpacked);
  out.mxfp4Shape = {count, rows, columns};
  return out;
}

std::pair<Value, Value> Builder::expertConstants(const ExpertWeight &weight, StringRef name) {
  if (weight.mxfp4) {
    ArrayRef<int64_t> shape = weight.mxfp4Shape;
    auto codesType = RankedTensorType::get(shape, Float4E2M1FNType::get(&context));
    auto scalesType = RankedTensorType::get({shape[0], shape[1], ceilDiv(shape[2], moe::kMXBlock)},
                                            Float8E8M0FNUType::get(&context));
    return {makeConstant(builder, locFor(name), codesType, weight.mxfp4->codes, name),
            makeConstant(builder, locFor(name), scalesType, weight.mxfp4->scales,
                         (name + "_scales").str())};
  }
  if (!weight.fp8)
    return {constant(weight.values, name), Value()};
  auto type = RankedTensorType::get(weight.fp8->shape, Float8E4M3FNType::get(&context));
  Value codes = makeConstant(builder, locFor(name), type, weight.fp8->codes, name);
  return {codes, constant(weight.fp8->scales, (name + "_scale_inv").str())};
}

Value Builder::moeBlock(Value x, int64_t layer) {
  std::string layerPrefix = "model.layers." + std::to_string(layer) + ".";
  int64_t h = config.hiddenSize, inter = config.moeIntermediateSize, count = config.numExperts;
  bool mixtralV4 = config.family == Family::Mixtral && has(layerPrefix + "block_sparse_moe.gate.weight");
  std::string p = layerPrefix + (mixtralV4 ? "block_sparse_moe." : "mlp.");
  bool gptOss = config.family == Family::GptOss;
  Value router = weight(p + (gptOss ? "router.weight" : "gate.weight"), {count, h});
  Value routerBias = gptOss ? weight(p + "router.bias", {count}) : Value();
  Value correction = config.family == Family::DeepseekV3
                         ? weight(p + "gate.e_score_correction_bias", {count})
                         : Value();
  std::optional<ExpertWeight> gateUp, down;
  Value gateUpBias, downBias;
  if (gptOss) {
    // [E, in, out] with gate and up interleaved in the columns.
    std::string fusedName = p + "experts.gate_up_proj", fusedDownName = p + "experts.down_proj";
    for (StringRef name : {StringRef(fusedName), StringRef(fusedDownName)}) {
      if (!has(name))
        continue;
      llvm::Expected<TensorView> tensor = checkpoint->tensor(name);
      if (!tensor)
        llvm::consumeError(tensor.takeError()); // read() below names it
      else if (tensor->dtype == DType::F8E4M3)
        error(name, "is F8_E4M3: gpt-oss's [E, in, out] FP8 experts are not imported");
    }
    if (has(fusedName + "_blocks") || has(fusedDownName + "_blocks")) {
      // MXFP4 (gpt-oss's published checkpoints): [E, out, in] already.
      gateUp = mxfp4Experts(fusedName, 2 * inter, h);
      down = gateUp ? mxfp4Experts(fusedDownName, h, inter) : std::nullopt;
    } else {
      std::optional<Tensor> fused = read(fusedName, {count, h, 2 * inter});
      std::optional<Tensor> fusedDown = read(fusedDownName, {count, inter, h});
      if (fused && fusedDown) {
        gateUp = ExpertWeight{transposeLastTwo(*fused), std::nullopt};
        down = ExpertWeight{transposeLastTwo(*fusedDown), std::nullopt};
      }
    }
    gateUpBias = weight(p + "experts.gate_up_proj_bias", {count, 2 * inter});
    downBias = weight(p + "experts.down_proj_bias", {count, h});
  } else if (mixtralV4) {
    gateUp = experts(p + "experts.", "gate_up_proj", {"w1", "w3"}, 2 * inter, h);
    down = experts(p + "experts.", "down_proj", {"w2"}, h, inter);
  } else {
    gateUp = experts(p + "experts.", "gate_up_proj", {"gate_proj", "up_proj"}, 2 * inter, h);
    down = experts(p + "experts.", "down_proj", {"down_proj"}, h, inter);
  }
  Value sharedGateUp, sharedDown;
  if (config.family == Family::DeepseekV3 && config.numSharedExperts > 0) {
    int64_t shared = inter * config.numSharedExperts;
    std::optional<Tensor> gate = read(p + "shared_experts.gate_proj.weight", {shared, h});
    std::optional<Tensor> up = read(p + "shared_experts.up_proj.weight", {shared, h});
    if (gate && up)
      sharedGateUp = constant(stack({&*gate, &*up}), p + "shared_experts.gate_up_proj");
    sharedDown = weight(p + "shared_experts.down_proj.weight", {h, shared});
  }
  if (failedOnce || !x || !router || !gateUp || !down)
    return Value();
  auto [gateUpWeight, gateUpScales] = expertConstants(*gateUp, p + "experts.gate_up_proj");
  auto [downWeight, downScales] = expertConstants(*down, p + "experts.down_proj");

  moe::RoutingKind routing = moe::RoutingKind::SoftmaxTopK;
  bool normalize = config.normTopKProb;
  int64_t groups = 1, keptGroups = 1;
  double scaling = 1.0;
  auto activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU);
  moe::GateUpLayout layout = moe::GateUpLayout::Concatenated;
  switch (config.family) {
  case Family::Qwen3Moe:
    break;
  case Family::Mixtral:
    normalize = true;
    break;
  case Family::GptOss:
    routing = moe::RoutingKind::TopKSoftmax;
    normalize = false;
    activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU, 1.702, 1.0,
                                          config.swigluLimit > 0 ? config.swigluLimit
                                                                 : INFINITY);
    layout = moe::GateUpLayout::Interleaved;
    break;
  case Family::DeepseekV3:
    routing = moe::RoutingKind::SigmoidGroupTopK;
    groups = config.numGroups;
    keptGroups = config.topKGroups;
    scaling = config.routedScalingFactor;
    break;
  }
  return moe::LayerOp::create(
      builder, locFor(p + "experts"), x.getType(), x, router, /*router_logits=*/Value(),
      /*expert_ids=*/Value(), /*expert_weights=*/Value(), routerBias, correction, gateUpWeight,
      /*up_weight=*/Value(), downWeight, gateUpBias, /*up_bias=*/Value(), downBias,
      gateUpScales, downScales, sharedGateUp, sharedDown,
      /*shared_gate_weight=*/Value(), routing, static_cast<uint64_t>(config.topK), normalize,
      groups, keptGroups, APFloat(scaling), activation, layout);
}

OwningOpRef<ModuleOp> Builder::build() {
  Location loc = FileLineColLoc::get(&context, dir, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  auto ids = RankedTensorType::get({ShapedType::kDynamic}, builder.getI64Type());
  int64_t h = config.hiddenSize, vocab = config.vocabSize;
  auto function = func::FuncOp::create(builder, loc, "forward",
                                       builder.getFunctionType({ids, ids, ids}, {rowsOf(vocab)}));
  const char *inputNames[] = {"input_ids", "positions", "sequences"};
  for (unsigned i = 0; i < 3; ++i)
    function.setArgAttr(i, "onnx.name", builder.getStringAttr(inputNames[i]));
  function.setResultAttr(0, "onnx.name", builder.getStringAttr("logits"));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  positions = body->getArgument(1);
  sequences = body->getArgument(2);
  bool mla = config.family == Family::DeepseekV3;
  computeRope(mla ? config.qkRopeHeadDim : config.headDim);

  Value table = weight("model.embed_tokens.weight", {vocab, h});
  Value x = table ? moe::EmbeddingOp::create(builder, locFor("model.embed_tokens"),
                                             rowsOf(h), body->getArgument(0), table)
                  : Value();
  for (int64_t layer = 0; layer < config.numLayers && !failedOnce; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".";
    Value normed = rmsNorm(x, p + "input_layernorm", h);
    Value attended = mla ? attentionMLA(normed, layer) : attention(normed, layer);
    x = add(x, attended, p + "residual_attention");
    normed = rmsNorm(x, p + "post_attention_layernorm", h);
    Value mlp = config.layerIsMoE[layer] ? moeBlock(normed, layer) : denseMLP(normed, layer);
    x = add(x, mlp, p + "residual_mlp");
  }
  x = rmsNorm(x, "model.norm", h);
  Value head = config.tieWordEmbeddings ? table : weight("lm_head.weight", {vocab, h});
  Value logits = linear(x, head, Value(), "lm_head");
  if (failedOnce || !logits)
    return nullptr;
  func::ReturnOp::create(builder, loc, logits);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

bool isCheckpointDirectory(StringRef path) {
  llvm::SmallString<256> config(path);
  llvm::sys::path::append(config, "config.json");
  return llvm::sys::fs::is_directory(path) && llvm::sys::fs::exists(config);
}

OwningOpRef<ModuleOp> importCheckpoint(StringRef dir, MLIRContext &context,
                                       const ImportOptions &options) {
  context.loadDialect<moe::MoEDialect, arith::ArithDialect, func::FuncDialect>();
  Location loc = FileLineColLoc::get(&context, dir, 0, 0);
  // A random model reads config.json alone; safetensors, if any, are ignored.
  std::unique_ptr<Checkpoint> checkpoint;
  llvm::json::Object json;
  if (options.randomSeed) {
    llvm::Expected<llvm::json::Object> read = readConfigFile(dir);
    if (!read) {
      emitError(loc) << llvm::toString(read.takeError());
      return nullptr;
    }
    json = std::move(*read);
  } else {
    llvm::Expected<std::unique_ptr<Checkpoint>> opened = Checkpoint::open(dir);
    if (!opened) {
      emitError(loc) << llvm::toString(opened.takeError());
      return nullptr;
    }
    checkpoint = std::move(*opened);
  }
  const llvm::json::Object &object = checkpoint ? checkpoint->config() : json;
  llvm::Expected<ModelConfig> config = parseConfig(object);
  if (!config) {
    // The reader's messages start with "config.json: ".
    emitError(loc) << llvm::toString(config.takeError());
    return nullptr;
  }
  // transformers' _init_weights: normal(0, initializer_range), 0.02 by default.
  double range = 0.02;
  if (const llvm::json::Value *given = object.get("initializer_range")) {
    std::optional<double> number = given->getAsNumber();
    if (!number || !std::isfinite(*number) || *number < 0 || *number > 1e6) {
      emitError(loc) << "config.json: 'initializer_range' must be a number in [0, 1e6]";
      return nullptr;
    }
    range = *number;
  }
  Builder builder(checkpoint.get(), *config, context, dir, range);
  OwningOpRef<ModuleOp> module = builder.build();
  if (module && options.randomSeed)
    (*module)->setAttr(kRandomSeedAttr,
                       IntegerAttr::get(IntegerType::get(&context, 64, IntegerType::Unsigned),
                                        *options.randomSeed));
  return module;
}

} // namespace moec::checkpoint
