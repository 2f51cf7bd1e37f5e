//===- QuantizeExpertsMXFP4.cpp - experts' weights to MXFP4 -----------------===//
//
// Each moe.grouped_matmul over constant f32/bf16/f16 weights without scales
// gets MXFP4 weights, computed here, at compile time:
//   weights [E, N, K] -> f4E2M1FN codes with f8E8M0FNU scales [E, N, ceil(K/32)],
// one scale per row per 32 along K (a partial block at the end of a row has its
// own). The rows stay as they are (weight-only quantisation). The rule is
// triton_kernels' default (moec/runtime/MXFP4.h, docs/dialect.md "MXFP4
// layout"): per block, f32(amax / 6) rounded up to a power of two, codes
// rounded to nearest even.
// Left alone: grouped matmuls that already have scales (FP8 or MXFP4 weights),
// weights that are not constants, and every moe.linear (routers, shared
// experts, a whole model's projections). A NaN or infinite weight has no
// MXFP4 code: an error at the grouped matmul. A random weight
// (moec.random_normal σ, --random-weights, filled at load) is cast as its
// fill: random codes e2m1(2z), marked `normal 2`, with one scale byte, the
// power of two nearest σ/2, for every block.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"
#include "moec/runtime/MXFP4.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moec {
#define GEN_PASS_DEF_MOEQUANTIZEEXPERTSMXFP4
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;
namespace mx = moec::rt::mxfp4;

namespace {

/// The deviation of a random weight's e2m1 codes: e2m1(2z) uses every
/// magnitude (|2z| beyond 5 saturates at 6 in 1.2 % of draws).
constexpr double kRandomCodeDeviation = 2.0;

/// The codes (one per byte) and scale bytes of weights [E, N, K] given by
/// `value(index)`, block by block; the index of a non-finite value in `bad`.
template <typename ValueAt>
void castBlocks(int64_t rows, int64_t k, ValueAt value, std::vector<char> &codes,
                std::vector<char> &scales, std::optional<int64_t> &bad) {
  int64_t kBlocks = (k + mx::kBlock - 1) / mx::kBlock;
  codes.assign(static_cast<size_t>(rows * k), 0);
  scales.assign(static_cast<size_t>(rows * kBlocks), 0);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t kb = 0; kb < kBlocks; ++kb) {
      int64_t first = row * k + kb * mx::kBlock;
      int64_t last = row * k + std::min(k, (kb + 1) * mx::kBlock);
      float amax = 0.0f;
      for (int64_t i = first; i < last; ++i) {
        float x = value(i);
        if (!std::isfinite(x)) {
          bad = i;
          return;
        }
        amax = std::fmax(amax, std::fabs(x));
      }
      uint8_t scale = mx::scaleFor(amax);
      scales[row * kBlocks + kb] = static_cast<char>(scale);
      for (int64_t i = first; i < last; ++i)
        codes[i] = static_cast<char>(mx::quantize(value(i), scale));
    }
}

/// "[e, n, k]" of flat index `index` in [E, N, K].
std::string position(int64_t index, int64_t n, int64_t k) {
  return "[" + std::to_string(index / (n * k)) + ", " + std::to_string(index / k % n) + ", " +
         std::to_string(index % k) + "]";
}

struct MoEQuantizeExpertsMXFP4
    : moec::impl::MoEQuantizeExpertsMXFP4Base<MoEQuantizeExpertsMXFP4> {
  void runOnOperation() override {
    SmallVector<GroupedMatmulOp> matmuls;
    getOperation().walk([&](GroupedMatmulOp op) { matmuls.push_back(op); });
    for (GroupedMatmulOp op : matmuls)
      if (failed(quantize(op)))
        return signalPassFailure();
  }

  LogicalResult quantize(GroupedMatmulOp op) {
    auto weightsType = cast<RankedTensorType>(op.getWeights().getType());
    Type elementType = weightsType.getElementType();
    // Already quantised (FP8 or MXFP4 weights, FP8 rows): never cast again.
    if (op.getWeightScales() || op.getLhsScales())
      return success();
    if (!weightsType.hasStaticShape() ||
        !(elementType.isF32() || elementType.isBF16() || elementType.isF16()))
      return success();
    // An arith.constant, or an imported onnx.Constant.
    Operation *constant = op.getWeights().getDefiningOp();
    if (!constant || !isa<arith::ConstantOp, onnx::ConstantOp>(constant))
      return success(); // not a constant: nothing to cast at compile time
    int64_t experts = weightsType.getDimSize(0), n = weightsType.getDimSize(1),
            k = weightsType.getDimSize(2);
    int64_t kBlocks = (k + mx::kBlock - 1) / mx::kBlock;
    MLIRContext *context = &getContext();
    auto codesType = RankedTensorType::get({experts, n, k}, Float4E2M1FNType::get(context));
    auto scalesType =
        RankedTensorType::get({experts, n, kBlocks}, Float8E8M0FNUType::get(context));
    // Named after the weights they cast where those have a name (moec.name).
    auto sourceName = constant->getAttrOfType<StringAttr>("moec.name");
    auto name = [&](Value value, StringRef suffix) {
      if (sourceName)
        value.getDefiningOp()->setAttr("moec.name",
                                       StringAttr::get(context, sourceName.str() + suffix.str()));
      return value;
    };

    OpBuilder builder(op);
    Location loc = op.getLoc();
    Value weights, scales;
    std::optional<int64_t> bad;
    if (auto deviation = constant->getAttrOfType<FloatAttr>(kRandomNormalAttr)) {
      // A random weight (moec.random_normal σ, filled at load) becomes random
      // codes e2m1(kRandomCodeDeviation · z) with one scale for every block,
      // the power of two nearest σ / kRandomCodeDeviation: code · scale is
      // about a normal of deviation σ. The fill packs codes two a byte over
      // the whole tensor, so rows must be whole blocks.
      if (k % mx::kBlock != 0)
        return op.emitOpError("cannot cast weights filled at load (")
               << kRandomNormalAttr << ", --random-weights) to MXFP4: K = " << k
               << " is not a multiple of " << mx::kBlock
               << ", and random codes fill rows of whole blocks";
      double sigma = deviation.getValueAsDouble() / kRandomCodeDeviation;
      int exponent = sigma > 0 ? static_cast<int>(std::lround(std::log2(sigma))) : -126;
      uint8_t scale = static_cast<uint8_t>(std::clamp(exponent, -126, 127) + mx::kScaleBias);
      // The codes' placeholder: a resource without data, whose key no other
      // constant shares (constant folding would merge equal splats).
      auto handle = DenseResourceElementsHandle::getManagerInterface(context).insert(
          sourceName ? sourceName.str() + ".e2m1" : "experts_e2m1");
      weights = name(arith::ConstantOp::create(builder, loc,
                                               DenseResourceElementsAttr::get(codesType, handle)),
                     ".e2m1");
      weights.getDefiningOp()->setAttr(kRandomNormalAttr,
                                       builder.getF64FloatAttr(kRandomCodeDeviation));
      llvm::APFloat scaleValue(llvm::APFloat::Float8E8M0FNU(), llvm::APInt(8, scale));
      scales = name(arith::ConstantOp::create(builder, loc,
                                              DenseElementsAttr::get(scalesType, scaleValue)),
                    ".e8m0_scales");
    } else if (std::optional<ArrayRef<char>> bytes = getConstantBytes(op.getWeights())) {
      std::vector<char> codes, scaleBytes;
      castBlocks(experts * n, k, [&](int64_t i) { return *decodeAsFloat(elementType, *bytes, i); },
                 codes, scaleBytes, bad);
      if (bad)
        return op.emitOpError("cannot cast the weights to MXFP4: element ")
               << position(*bad, n, k) << " is " << *decodeAsFloat(elementType, *bytes, *bad)
               << ", which has no code";
      weights = name(makeConstant(builder, loc, codesType, codes, "experts_e2m1"), ".e2m1");
      scales = name(makeConstant(builder, loc, scalesType, scaleBytes, "experts_e8m0_scales"),
                    ".e8m0_scales");
    } else {
      Attribute attr;
      if (auto arithConstant = dyn_cast<arith::ConstantOp>(constant))
        attr = arithConstant.getValue();
      else if (auto onnxConstant = dyn_cast<onnx::ConstantOp>(constant))
        attr = onnxConstant.getValue() ? Attribute(*onnxConstant.getValue()) : Attribute();
      auto splat = dyn_cast_or_null<DenseElementsAttr>(attr);
      if (!splat || !splat.isSplat())
        return success(); // a constant whose bytes cannot be read
      // A splat (a shape without its weights) stays a splat: every block has
      // the same amax, so the same scale and code.
      float value = *decodeAsFloat(elementType, splat.getRawData(), 0);
      if (!std::isfinite(value))
        return op.emitOpError("cannot cast the weights to MXFP4: every element is ")
               << value << ", which has no code";
      uint8_t scale = mx::scaleFor(std::fabs(value));
      llvm::APFloat code(llvm::APFloat::Float4E2M1FN(), llvm::APInt(4, mx::quantize(value, scale)));
      llvm::APFloat exponent(llvm::APFloat::Float8E8M0FNU(), llvm::APInt(8, scale));
      weights = name(
          arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(codesType, code)),
          ".e2m1");
      scales = name(
          arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(scalesType, exponent)),
          ".e8m0_scales");
    }
    auto quantized = GroupedMatmulOp::create(
        builder, loc, op.getType(), op.getLhs(), weights, op.getOffsets(), op.getBias(),
        /*lhs_scales=*/Value(), scales, op.getEpilogueAttr(), op.getEpilogueLayoutAttr());
    op.replaceAllUsesWith(quantized.getResult());
    op.erase();
    if (constant->use_empty())
      constant->erase();
    return success();
  }
};

} // namespace
