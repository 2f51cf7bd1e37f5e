//===- RaiseONNXModel.h - a whole-model ONNX export as a step program -*- C++ -*-===//
//
// Internal to moe-raise-onnx-model (RaiseONNXModel.cpp: the pass, embedding,
// projections, norms, MLPs, residuals and MoE blocks; RaiseONNXModelAttention.cpp:
// rotary embedding, masks and attention; RaiseONNXModelShapes.cpp: the graph's
// dimensions and positions, constants made at compile time;
// RaiseONNXModelGeneric.cpp: what no form matches, as moe.elementwise and
// moe.reduce_rows).
//
// torch.onnx.export writes a decoder's cache-free forward over a [B, T] batch
// of token ids; the step program (docs/dialect.md, "Whole models") computes
// the same per-token values over N = B·T token rows [N, C]. The raiser walks
// back from the logits and maps each activation of the [B, T] graph to its
// step value: the ONNX value is one of a few views of the step value's
// memory (an Act), and each op that computes one is matched against the form
// the exporter writes, every constant it relies on checked. An elementwise
// node or a last-axis reduction that no form matches is lowered generically;
// the first other value that no form produces is an error at its node.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_PASSES_RAISEONNXMODEL_H
#define MOEC_PASSES_RAISEONNXMODEL_H

#include "ONNXMatchers.h"

#include "moec/Dialect/MoE/MoEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <string>

namespace moec::raise_model {

using namespace mlir;
using namespace moec::onnx_match;

/// A dimension of a shape the graph computes: the batch B and the token count
/// T (dimensions 0 and 1 of input_ids), a number (-1: Reshape's "infer"), or
/// something else.
struct Dim {
  enum Kind { Unknown, Batch, Tokens, Const } kind = Unknown;
  int64_t value = 0;
  static Dim batch() { return {Batch, 0}; }
  static Dim tokens() { return {Tokens, 0}; }
  static Dim constant(int64_t v) { return {Const, v}; }
  bool is(int64_t v) const { return kind == Const && value == v; }
};

/// How an activation of the [B, T] graph views its step value [N, heads·dim]
/// (N = B·T, row b·T + t): Flat [N, C], Tokens [B, T, C], TokenHeads
/// [B, T, H, D] (the same bytes), HeadTokens [B, H, T, D] (the same bytes
/// only when H = 1).
enum class Layout { Flat, Tokens, TokenHeads, HeadTokens };

struct Act {
  Value step;
  Layout layout = Layout::Tokens;
  int64_t heads = 1, dim = 0;
  /// The rotated columns are in moe.rotary's interleaved order, not the
  /// export's halves (DeepSeek's rope): only q·k may read them.
  bool permuted = false;

  int64_t width() const { return heads * dim; }
  /// The ONNX value's elements are the step value's, in order.
  bool sameBytes() const { return layout != Layout::HeadTokens || heads == 1; }
};

/// cos or sin of positions times inverse frequencies, as the export tabulates
/// them: Unsqueeze([Slice(] [a ·] Cos|Sin(Concat(f, f) | f) [)], 1), with
/// f = Transpose(MatMul(inv_freq [1, R/2, 1], Cast(positions [1, 1, T])), [0, 2, 1]).
struct RopeTable {
  Value freqs;        // f [1, T, R/2]
  Value invFreq;      // the [1, R/2, 1] constant
  double scale = 1.0; // a, YaRN's attention factor
  int64_t width = 0;  // the table's last dimension
};

/// A rotary embedding of `source` (a [B, H, T, R] value) found in the graph.
struct RopeMatch {
  Value source;
  RopeTable table;
  bool interleaved = false;
  int64_t rotated = 0; // R
};

class ModelRaiser {
public:
  /// `tokenIds` is the export's input_ids [B, T]; `ids`, `positions` and
  /// `sequences` are the step program's arguments [N]. New ops go before
  /// `insertBefore`.
  ModelRaiser(Value tokenIds, Value ids, Value positions, Value sequences, Operation *insertBefore);

  /// The step value of an activation of the [B, T] graph; the first failure
  /// is emitted at the node that no form produces.
  FailureOr<Act> activation(Value value);
  bool failedHard() const { return hardFailure; }

private:
  // Dispatch and the activations other than attention (RaiseONNXModel.cpp).
  FailureOr<Act> raise(Value value, std::string &why);
  FailureOr<Act> operand(Value value);
  FailureOr<Act> embedding(ox::GatherOp op, std::string &why);
  FailureOr<Act> reshape(ox::ReshapeOp op, std::string &why);
  FailureOr<Act> transpose(ox::TransposeOp op, std::string &why);
  FailureOr<Act> projection(Operation *at, ox::MatMulOp matmul, Value bias, std::string &why);
  FailureOr<Act> add(ox::AddOp op, std::string &why);
  FailureOr<Act> mul(ox::MulOp op, std::string &why);
  FailureOr<Act> rmsNorm(ox::MulOp op, std::string &why);
  FailureOr<Act> gatedMLP(ox::MulOp op, std::string &why);
  FailureOr<Act> split(OpResult result, std::string &why);
  FailureOr<Act> layer(moe::LayerOp op, std::string &why);

  // What no form matches: fused elementwise chains and last-axis reductions
  // (RaiseONNXModelGeneric.cpp).
  FailureOr<Act> generic(Value value, std::string &why);
  FailureOr<Act> elementwise(Operation *root, std::string &why);
  FailureOr<Act> reduction(Operation *op, std::string &why);

  // Rotary embedding, masks and attention (RaiseONNXModelAttention.cpp).
  FailureOr<Act> concat(ox::ConcatOp op, std::string &why);
  FailureOr<Act> rotary(Operation *at, Value source, const RopeMatch &rope, int64_t offset,
                        std::string &why);
  std::optional<RopeMatch> matchRotary(Value value, std::string &why);
  std::optional<RopeTable> matchTable(Value table, bool cosine, std::string &why);
  FailureOr<Act> attention(ox::MatMulOp op, std::string &why);

public:
  // The graph's dimensions and shapes (RaiseONNXModelShapes.cpp).
  Dim dimOf(Value value, int64_t axis);
  Dim scalarDim(Value value);
  std::optional<SmallVector<Dim>> shapeSpec(Value shape);
  /// Whether `value` holds the positions 0..T-1 along its last non-unit axis
  /// (a Range(0, T, 1) of the token count, unsqueezed, expanded or cast).
  bool isPositions(Value value);

  // Constants made at compile time.
  static std::string constantName(Value value, StringRef fallback);
  Value transposed(Value weight, StringRef name);
  Value reshaped(Value constant, ArrayRef<int64_t> shape, StringRef name);

  OpBuilder builder;
  Value tokenIds, ids, positions, sequences;

private:
  llvm::DenseMap<Value, Act> acts;
  llvm::DenseMap<Value, Value> transposedWeights, invFreqs;
  bool hardFailure = false;
};

/// Dimension `axis` of `value`'s type, or ShapedType::kDynamic.
inline int64_t staticDim(Value value, int64_t axis) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || axis < 0 || axis >= type.getRank() || type.isDynamicDim(axis))
    return ShapedType::kDynamic;
  return type.getDimSize(axis);
}

/// An onnx.Constant or arith.constant.
inline bool isConstant(Value value) {
  return value &&
         (value.getDefiningOp<ox::ConstantOp>() || value.getDefiningOp<arith::ConstantOp>());
}

/// An elementwise ONNX op that moe.elementwise can hold, and a reduction that
/// moe.reduce_rows may (RaiseONNXModelGeneric.cpp).
bool isGenericElementwise(Operation *op);
bool isRowReduction(Operation *op);

/// "node 'NAME' (Op)" of an op of an imported graph (its NameLoc), or the op's
/// name alone.
std::string describeNode(Operation *op);

} // namespace moec::raise_model

#endif // MOEC_PASSES_RAISEONNXMODEL_H
