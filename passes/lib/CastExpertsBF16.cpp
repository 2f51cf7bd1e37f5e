//===- CastExpertsBF16.cpp - what the CUDA target stores as bf16, as types ---===//
//
// The policy of `moec compile --target=cuda --expert-weights=bf16
// [--expert-outputs=bf16]`, stated in the IR: the CUDA printer stores a bf16
// constant as is, holds a bf16 value as BF16 rows, and multiplies bf16 weights
// with the bf16-weight kernels. The rules, taken on the f32 IR before anything
// changes:
//
//   * every moe.grouped_matmul without FP8 scales multiplies bf16 weights: its
//     f32 constant weights become a bf16 constant (nearest even), and weights
//     that cannot be (not an f32 constant of static shape, K % 8 != 0) are an
//     error, as they are in codegen;
//   * a moe.linear takes a bf16 weight when it is not the router's (its logits
//     choose the experts; bf16 would flip near ties), its weight is a constant
//     [N, K] of static shape and K % 8 == 0 (the bf16 kernel loads 8 weights,
//     16 bytes, at a time); otherwise it stays f32;
//   * an f32 value made by moe.permute or by such a bf16-weight kernel becomes
//     bf16 when every reader reads it as the rows of a bf16-weight kernel: those
//     kernels round their rows to bf16 before multiplying, so storing them
//     rounded changes no bit of any result and halves their bytes; the MXFP4
//     grouped matmul (W4A16) rounds its rows so too, and counts as one here
//     (its weights stay MXFP4);
//   * outputs=bf16: a bf16-weight, MXFP4 or FP8 (quantised rows) grouped
//     matmul's result that only moe.combine reads, as its rows, becomes bf16
//     (a precision choice: the combine sums the rounded rows in f32).
//
// Constants used elsewhere too get a bf16 copy (the f32 one stays for its other
// readers, as codegen stores both); splats stay splats, dense_resource blobs
// become dense_resource blobs and dense elements stay dense; the copy keeps
// the constant's discardable attributes (its moec.name among them).
//
// castToBF16 (CastBF16.h) is these rules on any op's body, with moe.embedding
// tables too when asked: moe-cast-model-bf16 applies it to a whole model.
//
//===----------------------------------------------------------------------===//

#include "CastBF16.h"

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Dialect/Utils/ConstantData.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <cstring>

namespace moec {
#define GEN_PASS_DEF_MOECASTEXPERTSBF16
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

/// f32 to bf16 bits, rounded to nearest even (NaN stays a quiet NaN), as the
/// bf16-weight kernels round their f32 rows.
uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

bool isConstant(Operation *op) { return isa_and_nonnull<arith::ConstantOp, onnx::ConstantOp>(op); }

bool isF32(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getElementType().isF32();
}

bool isFP8Matmul(GroupedMatmulOp op) { return op.getLhsScales() || op.getWeightScales(); }

/// Whether the CUDA kernel of `op` rounds its rows to bf16 before multiplying
/// and can write bf16 results: the bf16-weight kernels, and the MXFP4 one
/// (W4A16: e2m1 weights with e8m0 scales, which stay as they are).
bool roundsRowsToBF16(GroupedMatmulOp op) {
  auto weights = cast<RankedTensorType>(op.getWeights().getType());
  return !isFP8Matmul(op) ||
         (!op.getLhsScales() && isa<Float4E2M1FNType>(weights.getElementType()));
}

/// Whether moe.linear `op` multiplies by a bf16 weight: not
/// the router's, whose logits choose the experts; a constant weight [N, K] of
/// static shape with K % 8 == 0, which the bf16 kernel loads 8 at a time.
bool linearTakesBF16(LinearOp op) {
  bool router = llvm::any_of(op.getResult().getUsers(),
                             [](Operation *user) { return isa<RouteOp>(user); });
  auto weightType = dyn_cast<RankedTensorType>(op.getWeight().getType());
  return !router && weightType && weightType.hasStaticShape() && weightType.getRank() == 2 &&
         weightType.getDimSize(1) % 8 == 0 && isConstant(op.getWeight().getDefiningOp()) &&
         weightType.getElementType().isF32();
}

/// Whether `value` is held as bf16.
bool storedAsBF16(Value value, bool bf16Outputs) {
  if (value.use_empty() || !isF32(value))
    return false;
  // Producers that can write bf16: permute, and the bf16-weight kernels (not
  // the FP8 grouped matmul, not an f32 linear).
  Operation *def = value.getDefiningOp();
  auto producerMatmul = dyn_cast_or_null<GroupedMatmulOp>(def);
  auto producerLinear = dyn_cast_or_null<LinearOp>(def);
  // outputs=bf16: the experts' results rounded to bf16 for the combine, a
  // precision choice (docs/design.md, "bf16 expert outputs"), unlike the rows
  // below, which their readers round so anyway. The FP8 grouped matmul of
  // quantised rows writes them too (its tiles round their f32 results).
  bool writesBF16Results =
      producerMatmul && (roundsRowsToBF16(producerMatmul) || producerMatmul.getLhsScales());
  if (bf16Outputs && writesBF16Results && llvm::all_of(value.getUses(), [](OpOperand &use) {
        auto combine = dyn_cast<CombineOp>(use.getOwner());
        return combine && use.get() == combine.getRows() &&
               combine.getRows() != combine.getAddend();
      }))
    return true;
  if (!isa_and_nonnull<PermuteOp>(def) && !(producerMatmul && roundsRowsToBF16(producerMatmul)) &&
      !(producerLinear && linearTakesBF16(producerLinear)))
    return false;
  // Every reader reads it as the rows of a bf16-weight kernel, which rounds
  // them to bf16 before multiplying: storing them rounded changes no bit.
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto matmul = dyn_cast<GroupedMatmulOp>(user))
      return use.get() == matmul.getLhs() && roundsRowsToBF16(matmul) &&
             matmul.getLhs() != matmul.getWeights();
    if (auto linear = dyn_cast<LinearOp>(user))
      return use.get() == linear.getInput() && linear.getInput() != linear.getWeight() &&
             linearTakesBF16(linear);
    return false;
  });
}

RankedTensorType withBF16(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), BFloat16Type::get(type.getContext()),
                               tensor.getEncoding());
}

/// The bf16 constant of f32 constant `value` (static shape), built after its
/// definition: a splat stays a splat, a dense_resource blob becomes one, dense
/// elements stay dense. Null when its bytes cannot be read.
Value castConstant(OpBuilder &builder, Value value) {
  Operation *def = value.getDefiningOp();
  auto type = cast<RankedTensorType>(value.getType());
  RankedTensorType bf16Type = withBF16(type);
  builder.setInsertionPointAfter(def);
  Location loc = def->getLoc();
  Attribute attr = isa<arith::ConstantOp>(def)
                       ? cast<arith::ConstantOp>(def).getValue()
                       : (cast<onnx::ConstantOp>(def).getValue()
                              ? Attribute(*cast<onnx::ConstantOp>(def).getValue())
                              : Attribute());
  Value result;
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(attr); dense && dense.isSplat()) {
    uint16_t bits = toBF16(dense.getSplatValue<float>());
    llvm::APFloat half(llvm::APFloat::BFloat(), llvm::APInt(16, bits));
    result = arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(bf16Type, half));
  } else if (std::optional<ArrayRef<char>> bytes = getConstantBytes(value)) {
    int64_t count = type.getNumElements();
    if (static_cast<int64_t>(bytes->size()) != count * 4)
      return {};
    std::vector<char> converted(static_cast<size_t>(count) * 2);
    for (int64_t i = 0; i < count; ++i) {
      float f;
      std::memcpy(&f, bytes->data() + 4 * i, 4);
      uint16_t half = toBF16(f);
      std::memcpy(converted.data() + 2 * i, &half, 2);
    }
    if (isa<DenseResourceElementsAttr>(attr)) {
      result = makeConstant(builder, loc, bf16Type, converted, "experts_bf16");
    } else {
      auto elements = DenseElementsAttr::getFromRawBuffer(bf16Type, converted);
      result = arith::ConstantOp::create(builder, loc, elements);
    }
  } else {
    return {};
  }
  // The weight keeps what is said of it: its discardable attributes, among
  // them its name in the artifact's manifest (what codegen calls a constant: a
  // name given by hand, else its blob's key).
  for (NamedAttribute named : def->getDiscardableAttrs())
    result.getDefiningOp()->setAttr(named.getName(), named.getValue());
  auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr);
  if (!def->hasAttr("moec.name") && resource)
    result.getDefiningOp()->setAttr(
        "moec.name", builder.getStringAttr(resource.getRawHandle().getKey()));
  return result;
}

/// Whether moe.embedding `op`'s table can be stored as bf16: an f32 constant
/// [V, H] of static shape.
bool tableTakesBF16(EmbeddingOp op) {
  auto type = dyn_cast<RankedTensorType>(op.getTable().getType());
  return type && type.hasStaticShape() && type.getRank() == 2 &&
         type.getElementType().isF32() && isConstant(op.getTable().getDefiningOp());
}

struct MoECastExpertsBF16 : moec::impl::MoECastExpertsBF16Base<MoECastExpertsBF16> {
  using Base::Base;

  void runOnOperation() override {
    if (outputs != "f32" && outputs != "bf16") {
      getOperation().emitError() << "moe-cast-experts-bf16: unknown outputs='" << outputs
                                 << "' (f32, bf16)";
      return signalPassFailure();
    }
    BF16Cast cast;
    cast.outputs = outputs == "bf16";
    if (failed(castToBF16(getOperation(), cast)))
      signalPassFailure();
  }
};

} // namespace

LogicalResult moec::castToBF16(Operation *root, const BF16Cast &options) {
  bool bf16Outputs = options.outputs;
  // Every decision is taken on the f32 IR first (the predicates read element
  // types), then applied.
  SmallVector<OpOperand *> weightUses;
  llvm::SetVector<Value> rows;
  bool failedAny = false;
  root->walk([&](Operation *op) {
    if (isa<PermuteOp, GroupedMatmulOp, LinearOp>(op))
      for (Value result : op->getResults())
        if (storedAsBF16(result, bf16Outputs))
          rows.insert(result);
    if (auto matmul = dyn_cast<GroupedMatmulOp>(op)) {
      if (isFP8Matmul(matmul))
        return;
      Value weights = matmul.getWeights();
      auto type = cast<RankedTensorType>(weights.getType());
      if (type.getElementType().isBF16())
        return; // bf16 already (this pass ran, or the model is bf16)
      if (!isConstant(weights.getDefiningOp()) || !type.getElementType().isF32() ||
          !type.hasStaticShape()) {
        matmul.emitError() << "cannot store the weights as bf16: they must be an f32 constant "
                              "of static shape ("
                           << options.pass << ")";
        failedAny = true;
        return;
      }
      // The bf16 kernel loads 8 bf16 weights (16 bytes) at a time.
      if (int64_t k = type.getDimSize(2); k % 8 != 0) {
        matmul.emitError() << "cannot store the weights as bf16: K = " << k
                           << " is not a multiple of 8, which bf16 expert weights need ("
                           << options.pass << ")";
        failedAny = true;
        return;
      }
      weightUses.push_back(&matmul.getWeightsMutable());
    } else if (auto linear = dyn_cast<LinearOp>(op)) {
      if (linearTakesBF16(linear))
        weightUses.push_back(&linear.getWeightMutable());
    } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      // The rows it gives stay f32 (widened exactly): the residual stream.
      if (options.embeddingTables && tableTakesBF16(embedding))
        weightUses.push_back(&embedding.getTableMutable());
    }
  });
  if (failedAny)
    return failure();

  OpBuilder builder(root->getContext());
  llvm::DenseMap<Value, Value> castOf;
  llvm::SetVector<Operation *> maybeDead;
  for (OpOperand *use : weightUses) {
    Value weights = use->get();
    Value &cast = castOf[weights];
    if (!cast)
      cast = castConstant(builder, weights);
    if (!cast)
      return use->getOwner()->emitError()
             << "cannot store the weights as bf16: the constant's bytes cannot be read ("
             << options.pass << ")";
    use->set(cast);
    maybeDead.insert(weights.getDefiningOp());
  }
  for (Value value : rows)
    value.setType(withBF16(value.getType()));
  for (Operation *op : maybeDead)
    if (op->use_empty())
      op->erase();
  return success();
}
