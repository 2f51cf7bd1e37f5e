//===- QuantizeExpertsFP8.cpp - experts' weights to block-scaled e4m3 -------===//
//
// Each moe.grouped_matmul over constant weights becomes an FP8 one:
//   weights [E, N, K] -> f8E4M3FN with one f32 scale per 128x128 block
//                        (scale = amax / 448, a dequantisation multiplier, the
//                        `weight_scale_inv` convention; an all-zero block gets 1),
//                        computed here, at compile time;
//   lhs [S, K]        -> moe.quantize: per row, per 128 columns, at run time.
// A random weight (moec.random_normal σ, moec compile --random-weights) is
// quantised as its fill: random e4m3 codes of deviation 64 (a placeholder
// without data), scales σ/64.
// Weights that are already FP8 (a checkpoint's e4m3 `weight` with its
// `weight_scale_inv` blocks, written as weight_scales) are not cast again: only
// their f32/bf16 rows are quantised.
// Partial blocks at the edges (N or K not a multiple of 128) get their own
// scales; nothing reads past a row. docs/dialect.md ("FP8 layout") states the
// format once.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstring>

namespace moec {
#define GEN_PASS_DEF_MOEQUANTIZEEXPERTSFP8
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

/// The deviation of a random weight's e4m3 codes: |code| ≤ 6·64 = 384 < 448
/// for any normal the generator draws (|z| < 5.8), with 3 mantissa bits
/// resolving about a sixtieth of a deviation near zero.
constexpr double kRandomCodeDeviation = 64.0;

/// e4m3 (finite only) of `value`: round to nearest even, saturating at ±448.
uint8_t toE4M3(float value) {
  float clamped = std::fmax(std::fmin(value, float(kE4M3Max)), -float(kE4M3Max));
  llvm::APFloat converted(clamped);
  bool losesInfo;
  converted.convert(llvm::APFloat::Float8E4M3FN(), llvm::APFloat::rmNearestTiesToEven,
                    &losesInfo);
  return static_cast<uint8_t>(converted.bitcastToAPInt().getZExtValue());
}

/// The block cast of weights [E, N, K] (`bytes` of `elementType`): per 128x128
/// block, scale = amax / 448 (1 for an all-zero block) and q = e4m3(w / scale).
void castBlocks(Type elementType, ArrayRef<char> bytes, int64_t experts, int64_t n, int64_t k,
                std::vector<char> &quantized, std::vector<float> &scales) {
  int64_t nBlocks = (n + kScaleBlock - 1) / kScaleBlock, kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
  quantized.assign(static_cast<size_t>(experts * n * k), 0);
  scales.assign(static_cast<size_t>(experts * nBlocks * kBlocks), 0.0f);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t nb = 0; nb < nBlocks; ++nb)
      for (int64_t kb = 0; kb < kBlocks; ++kb) {
        int64_t rowEnd = std::min(n, (nb + 1) * kScaleBlock);
        int64_t colEnd = std::min(k, (kb + 1) * kScaleBlock);
        float amax = 0.0f;
        for (int64_t r = nb * kScaleBlock; r < rowEnd; ++r)
          for (int64_t c = kb * kScaleBlock; c < colEnd; ++c)
            amax = std::fmax(amax, std::fabs(*decodeAsFloat(elementType, bytes, (e * n + r) * k + c)));
        float scale = amax > 0.0f ? amax / float(kE4M3Max) : 1.0f;
        scales[(e * nBlocks + nb) * kBlocks + kb] = scale;
        for (int64_t r = nb * kScaleBlock; r < rowEnd; ++r)
          for (int64_t c = kb * kScaleBlock; c < colEnd; ++c) {
            int64_t index = (e * n + r) * k + c;
            quantized[index] =
                static_cast<char>(toE4M3(*decodeAsFloat(elementType, bytes, index) / scale));
          }
      }
}

struct QuantizeGroupedMatmul : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedMatmulOp op, PatternRewriter &rewriter) const override {
    auto weightsType = cast<RankedTensorType>(op.getWeights().getType());
    Type elementType = weightsType.getElementType();
    if (isa<Float8E4M3FNType>(elementType) || op.getLhsScales())
      return rewriter.notifyMatchFailure(op, "already FP8");
    if (!weightsType.hasStaticShape() || !(elementType.isF32() || elementType.isBF16() ||
                                           elementType.isF16()))
      return rewriter.notifyMatchFailure(op, "weights are not static f32/bf16/f16");
    int64_t experts = weightsType.getDimSize(0), n = weightsType.getDimSize(1),
            k = weightsType.getDimSize(2);
    int64_t nBlocks = (n + kScaleBlock - 1) / kScaleBlock, kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
    MLIRContext *context = getContext();
    Type f8 = Float8E4M3FNType::get(context);
    Type f32 = Float32Type::get(context);
    auto f8Type = RankedTensorType::get({experts, n, k}, f8);
    auto scalesType = RankedTensorType::get({experts, nBlocks, kBlocks}, f32);
    // The new constants are named after the weights they cast where those have
    // a name (moec.name: how bench/write_weights.py fills weights.bin).
    Operation *source = op.getWeights().getDefiningOp();
    auto sourceName = source ? source->getAttrOfType<StringAttr>("moec.name") : StringAttr();
    auto name = [&](Value value, StringRef suffix) {
      if (sourceName)
        value.getDefiningOp()->setAttr("moec.name",
                                       StringAttr::get(context, sourceName.str() + suffix.str()));
      return value;
    };

    std::optional<ArrayRef<char>> bytes = getConstantBytes(op.getWeights());
    Value weights, weightScales;
    if (!bytes) {
      auto constant = op.getWeights().getDefiningOp<arith::ConstantOp>();
      auto splat = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
      if (!splat || !splat.isSplat())
        return rewriter.notifyMatchFailure(op, "weights are not a constant");
      // A splat (a shape without its weights, as benchmarks write them) stays
      // a splat: every block has the same amax, so the same scale and code.
      float value = *decodeAsFloat(elementType, splat.getRawData(), 0);
      float scale = value != 0.0f ? std::fabs(value) / float(kE4M3Max) : 1.0f;
      uint8_t code = toE4M3(value / scale);
      // A random weight (moec.random_normal σ, filled at load) becomes random
      // codes, normals of deviation kRandomCodeDeviation (finite: |z| < 6
      // keeps them below 448), with every block scale σ / kRandomCodeDeviation:
      // code · scale is again a normal of deviation σ.
      auto deviation = source->getAttrOfType<FloatAttr>(kRandomNormalAttr);
      if (deviation) {
        scale = static_cast<float>(deviation.getValueAsDouble() / kRandomCodeDeviation);
        code = 0;
      }
      llvm::APFloat e4m3(llvm::APFloat::Float8E4M3FN(), llvm::APInt(8, code));
      if (deviation) {
        // Its codes' placeholder: a resource without data, whose key no other
        // constant shares (a splat of one code would be merged with the other
        // random experts of its shape by constant folding).
        auto handle = DenseResourceElementsHandle::getManagerInterface(context).insert(
            sourceName ? sourceName.str() + ".e4m3" : "experts_e4m3");
        weights = name(arith::ConstantOp::create(rewriter, op.getLoc(),
                                                 DenseResourceElementsAttr::get(f8Type, handle)),
                       ".e4m3");
        weights.getDefiningOp()->setAttr(kRandomNormalAttr,
                                         rewriter.getF64FloatAttr(kRandomCodeDeviation));
      } else {
        weights = name(arith::ConstantOp::create(rewriter, op.getLoc(),
                                                 DenseElementsAttr::get(f8Type, e4m3)),
                       ".e4m3");
      }
      weightScales = name(arith::ConstantOp::create(rewriter, op.getLoc(),
                                                    DenseElementsAttr::get(scalesType, scale)),
                          ".e4m3_scales");
    }
    Location loc = op.getLoc();
    if (!weights) {
      std::vector<char> quantized;
      std::vector<float> scales;
      castBlocks(elementType, *bytes, experts, n, k, quantized, scales);
      weights = name(makeConstant(rewriter, loc, f8Type, quantized, "experts_e4m3"), ".e4m3");
      weightScales = name(
          makeConstant(rewriter, loc, scalesType,
                       ArrayRef<char>(reinterpret_cast<const char *>(scales.data()),
                                      scales.size() * 4),
                       "experts_e4m3_scales"),
          ".e4m3_scales");
    }
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    int64_t rows = lhsType.getDimSize(0);
    auto quantize = QuantizeOp::create(rewriter, loc, RankedTensorType::get({rows, k}, f8),
                                       RankedTensorType::get({rows, kBlocks}, f32), op.getLhs());
    rewriter.replaceOpWithNewOp<GroupedMatmulOp>(
        op, op.getType(), quantize.getResult(), weights, op.getOffsets(), op.getBias(),
        quantize.getScales(), weightScales, op.getEpilogueAttr(), op.getEpilogueLayoutAttr());
    return success();
  }
};

/// FP8 weights meeting f32/bf16 rows (weight-only FP8, e.g. an FP8 checkpoint
/// written by hand): the weights and their scales stay, the rows are quantised.
struct QuantizeRowsOfFP8Weights : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedMatmulOp op, PatternRewriter &rewriter) const override {
    auto weightsType = cast<RankedTensorType>(op.getWeights().getType());
    if (!isa<Float8E4M3FNType>(weightsType.getElementType()) || op.getLhsScales())
      return rewriter.notifyMatchFailure(op, "not FP8 weights with unquantised rows");
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    int64_t k = lhsType.getDimSize(1), kBlocks = (k + kScaleBlock - 1) / kScaleBlock;
    MLIRContext *context = getContext();
    auto quantize = QuantizeOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get({lhsType.getDimSize(0), k}, Float8E4M3FNType::get(context)),
        RankedTensorType::get({lhsType.getDimSize(0), kBlocks}, Float32Type::get(context)),
        op.getLhs());
    rewriter.replaceOpWithNewOp<GroupedMatmulOp>(
        op, op.getType(), quantize.getResult(), op.getWeights(), op.getOffsets(), op.getBias(),
        quantize.getScales(), op.getWeightScales(), op.getEpilogueAttr(),
        op.getEpilogueLayoutAttr());
    return success();
  }
};

struct MoEQuantizeExpertsFP8 : moec::impl::MoEQuantizeExpertsFP8Base<MoEQuantizeExpertsFP8> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<QuantizeGroupedMatmul, QuantizeRowsOfFP8Weights>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
