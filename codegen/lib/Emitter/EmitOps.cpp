//===- EmitOps.cpp - the shared emitter's op-by-op emission ---------------===//
//
// One function per op kind of the grouped phase: its operands' and results'
// checks (each failure a diagnostic at the op), its results' definitions, and
// the kernel call, printed by the target's printer (EmitterBase.h's hooks).
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace moec::codegen {
std::string Emitter::epilogue(std::optional<moe::ActivationAttr> activation,
                              std::optional<moe::GateUpLayout> layout) {
  if (!activation)
    return "Epilogue{}";
  const char *kind = "Identity";
  switch (activation->getKind()) {
  case moe::ActivationKind::SiLU:
    kind = "SiLU";
    break;
  case moe::ActivationKind::GELU:
    kind = "GELU";
    break;
  case moe::ActivationKind::ReLU:
    kind = "ReLU";
    break;
  case moe::ActivationKind::Identity:
    kind = "Identity";
    break;
  }
  const char *layoutName = "None";
  if (layout == moe::GateUpLayout::Concatenated)
    layoutName = "Concatenated";
  else if (layout == moe::GateUpLayout::Interleaved)
    layoutName = "Interleaved";
  return llvm::formatv("Epilogue{true, ActivationKind::{0}, GateUpLayout::{1}, {2}, {3}, {4}}",
                       kind, layoutName, floatLiteral(activation->getAlphaValue()),
                       floatLiteral(activation->getBetaValue()),
                       floatLiteral(activation->getLimitValue()))
      .str();
}

static LogicalResult checkEpilogueLayout(Operation *op, std::optional<moe::GateUpLayout> layout,
                                  bool hasEpilogue) {
  if (hasEpilogue && layout == moe::GateUpLayout::Separate)
    return op->emitError() << "cannot generate code for '" << op->getName()
                           << "': a 'separate' epilogue layout (moe-lower-layer concatenates "
                              "gate and up first)";
  return success();
}

LogicalResult Emitter::emitView(Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  FailureOr<ValueInfo *> in = operand(op, input, "the data operand", /*floatOnly=*/false);
  if (failed(in) || failed(checkTensor(op, result, "the result", false)))
    return failure();
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = cast<RankedTensorType>(result.getType());
  // Only the leading dimensions may change: the row length stays, so the
  // result is the same bytes (a view), whatever the op's shape operand says.
  if (inType.getRank() == 0 || outType.getRank() == 0 ||
      inType.getShape().back() != outType.getShape().back() ||
      ShapedType::isDynamic(inType.getShape().back()))
    return unsupported(op, "it changes the innermost dimension (" +
                               llvm::formatv("{0} to {1}", inType, outType).str() +
                               "); only changes of the leading dimensions are views");
  std::optional<Dim> count = countOf((*in)->dims);
  Dim known{1, false};
  int dynamicDims = 0;
  for (int64_t size : outType.getShape()) {
    if (ShapedType::isDynamic(size))
      ++dynamicDims;
    else
      known.size *= size;
  }
  SmallVector<Dim> dims;
  if (dynamicDims > 1 || (dynamicDims == 1 && (!count->perToken || count->size % known.size)) ||
      (dynamicDims == 0 && count->perToken))
    return unsupported(op, llvm::formatv("cannot map {0} onto {1} as a view", inType, outType));
  for (int64_t size : outType.getShape())
    dims.push_back(ShapedType::isDynamic(size) ? Dim{count->size / known.size, true}
                                                 : Dim{size, false});
  if (dynamicDims == 0 && count->size != known.size)
    return unsupported(op, llvm::formatv("{0} and {1} hold different element counts", inType,
                                         outType));
  ValueInfo info = **in;
  info.dims = dims;
  values[result] = info;
  return success();
}

/// Whether `weights` are bf16 (moe-cast-experts-bf16 decided so): the
/// bf16-weight kernel multiplies them, after rounding f32 rows to bf16.
static bool isBF16(Value weights) {
  return cast<RankedTensorType>(weights.getType()).getElementType().isBF16();
}

LogicalResult Emitter::emitLinear(moe::LinearOp op) {
  comment(op);
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool bf16 = isBF16(op.getWeight());
  FailureOr<ValueInfo *> x = operand(op, op.getInput(), "the input", true, false, bf16);
  FailureOr<ValueInfo *> w = operand(op, op.getWeight(), "the weight", true, false, bf16);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  if (failed(x) || failed(w) || bad)
    return failure();
  if ((*x)->dims.size() != 2 || (*w)->dims.size() != 2)
    return unsupported(op, "the input and weight must be matrices");
  if (bf16 && (!(*w)->weightOffset || (*w)->dims[1].size % 8 != 0))
    return unsupported(op, "bf16 weights must be a constant whose K is a multiple of 8");
  Dim m = (*x)->dims[0];
  FailureOr<ValueInfo *> y = define(op, op.getResult(), m, false, bf16);
  if (failed(y))
    return failure();
  kernel(bf16 ? "linearBF16" : "linear",
         {(*x)->var, dimExpr(m), dimExpr((*x)->dims[1]), (*w)->var, dimExpr((*w)->dims[0]), bias,
          epilogue(op.getEpilogue(), op.getEpilogueLayout()), (*y)->var});
  return success();
}

/// `values` as a C++ array of their variables' type, alive for the call:
/// `std::array<decltype(a), 2>{a, b}.data()`.
static std::string arrayOf(ArrayRef<std::string> values) {
  return llvm::formatv("std::array<decltype({0}), {1}>{{{2}}.data()", values.front(),
                       values.size(), llvm::join(values, ", "))
      .str();
}

LogicalResult Emitter::emitMultiLinear(moe::MultiLinearOp op) {
  comment(op);
  bool bf16 = isBF16(op.getWeights()[0]);
  FailureOr<ValueInfo *> x = operand(op, op.getInput(), "the input", true, false, bf16);
  if (failed(x))
    return failure();
  if ((*x)->dims.size() != 2)
    return unsupported(op, "the input must be a matrix");
  Dim m = (*x)->dims[0];
  std::vector<std::string> weights, widths, biases, results;
  for (auto [i, weight] : llvm::enumerate(op.getWeights())) {
    std::string index = std::to_string(i);
    FailureOr<ValueInfo *> w = operand(op, weight, "weight " + index, true, false, bf16);
    bool bad = false;
    std::string bias = op.getBiases().empty()
                           ? std::string("nullptr")
                           : optionalOperand(op, op.getBiases()[i], "bias " + index, bad);
    if (failed(w) || bad)
      return failure();
    if ((*w)->dims.size() != 2)
      return unsupported(op, "weight " + index + " must be a matrix");
    if (bf16 && (!(*w)->weightOffset || (*w)->dims[1].size % 8 != 0))
      return unsupported(op, "bf16 weights must be constants whose K is a multiple of 8");
    weights.push_back((*w)->var);
    widths.push_back(dimExpr((*w)->dims[0]));
    biases.push_back(bias);
  }
  for (Value result : op.getResults()) {
    FailureOr<ValueInfo *> y = define(op, result, m, false, bf16);
    if (failed(y))
      return failure();
    results.push_back((*y)->var);
  }
  std::string k = dimExpr((*x)->dims[1]);
  if (!bf16) {
    // f32 weights: no kernel takes siblings; each is moe.linear's call.
    for (size_t i = 0; i < weights.size(); ++i)
      kernel("linear", {(*x)->var, dimExpr(m), k, weights[i], widths[i], biases[i],
                        epilogue(std::nullopt, std::nullopt), results[i]});
    return success();
  }
  kernel("linearBF16Siblings",
         {(*x)->var, dimExpr(m), k, std::to_string(weights.size()), arrayOf(weights),
          "std::array<int64_t, " + std::to_string(widths.size()) + ">{" +
              llvm::join(widths, ", ") + "}.data()",
          op.getBiases().empty() ? std::string("nullptr") : arrayOf(biases), arrayOf(results)});
  return success();
}

LogicalResult Emitter::emitRoute(moe::RouteOp op) {
  comment(op);
  FailureOr<ValueInfo *> logits = operand(op, op.getLogits(), "the logits");
  bool bad = false;
  std::string bias = optionalOperand(op, op.getCorrectionBias(), "the correction bias", bad);
  if (failed(logits) || bad)
    return failure();
  if ((*logits)->dims.size() != 2)
    return unsupported(op, "the logits must be a matrix");
  Dim tokens = (*logits)->dims[0];
  FailureOr<ValueInfo *> ids = define(op, op.getExpertIds(), tokens);
  if (failed(ids))
    return failure();
  FailureOr<ValueInfo *> weights = define(op, op.getWeights(), tokens);
  if (failed(weights))
    return failure();
  const char *kind = "SoftmaxTopK";
  if (op.getRouting() == moe::RoutingKind::TopKSoftmax)
    kind = "TopKSoftmax";
  else if (op.getRouting() == moe::RoutingKind::SigmoidGroupTopK)
    kind = "SigmoidGroupTopK";
  kernel("route", {(*logits)->var, dimExpr(tokens), dimExpr((*logits)->dims[1]), bias,
                  llvm::formatv("Routing{RoutingKind::{0}, {1}, {2}, {3}, {4}, {5}}", kind,
                                op.getTopK(), op.getNormalize() ? "true" : "false",
                                op.getNumGroups(), op.getTopkGroups(),
                                floatLiteral(op.getRoutedScalingFactor().convertToDouble()))
                      .str(),
                  (*ids)->var, (*weights)->var});
  return success();
}

LogicalResult Emitter::emitSort(moe::SortOp op) {
  comment(op);
  FailureOr<ValueInfo *> ids = operand(op, op.getExpertIds(), "the expert ids", false);
  if (failed(ids))
    return failure();
  std::optional<Dim> slots = countOf((*ids)->dims);
  FailureOr<ValueInfo *> permutation = define(op, op.getPermutation(), slots);
  if (failed(permutation))
    return failure();
  FailureOr<ValueInfo *> offsets = define(op, op.getOffsets(), std::nullopt);
  if (failed(offsets))
    return failure();
  FailureOr<ValueInfo *> numValid = define(op, op.getNumValid(), std::nullopt);
  if (failed(numValid))
    return failure();
  std::string idsVar = (*ids)->var;
  if ((*ids)->elementType.isInteger(64)) {
    // The kernel sorts i32 ids; an i64 id outside i32's range is no local
    // expert either, so it becomes -1, which sorts into the sentinel tail.
    idsVar = workspaceInt32(*slots);
    narrowIds(**ids, *slots, idsVar);
  } else if (!(*ids)->elementType.isInteger(32)) {
    return unsupported(op, "expert ids must be i32 or i64");
  }
  std::string firstExpert = std::to_string(op.getFirstExpert());
  if (std::optional<int64_t> epSize = op.getEpSize()) {
    if (failed(expertParallel(op, *epSize)))
      return failure();
    firstExpert = rankExpr() + " * " + std::to_string(op.getNumExperts());
  }
  std::vector<std::string> args = {idsVar,
                                   dimExpr(*slots),
                                   std::to_string(op.getNumExperts()),
                                   firstExpert,
                                   (*permutation)->var,
                                   (*offsets)->var,
                                   (*numValid)->var};
  addSortArgs(op, *slots, args);
  kernel("sortByExpert", args, /*pool=*/false);
  return success();
}

LogicalResult Emitter::emitPermute(moe::PermuteOp op) {
  comment(op);
  if (fusedIntoQuantize(op)) {
    line("// (fused into the moe.quantize below)");
    return success();
  }
  FailureOr<ValueInfo *> hidden = operand(op, op.getHidden(), "the hidden states");
  FailureOr<ValueInfo *> permutation = operand(op, op.getPermutation(), "the permutation", false);
  FailureOr<ValueInfo *> numValid = operand(op, op.getNumValid(), "num_valid", false);
  if (failed(hidden) || failed(permutation) || failed(numValid))
    return failure();
  if ((*hidden)->dims.size() != 2)
    return unsupported(op, "the hidden states must be a matrix");
  FailureOr<ValueInfo *> rows =
      define(op, op.getResult(), (*permutation)->dims[0], false, /*bf16=*/true);
  if (failed(rows))
    return failure();
  printPermute(op, **hidden, **permutation, **numValid, **rows);
  return success();
}

LogicalResult Emitter::emitGroupedMatmul(moe::GroupedMatmulOp op) {
  comment(op);
  if (isa<Float4E2M1FNType>(cast<RankedTensorType>(op.getWeights().getType()).getElementType()))
    return emitGroupedMatmulMXFP4(op);
  if (op.getLhsScales() || op.getWeightScales())
    return emitGroupedMatmulFP8(op);
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool bf16 = isBF16(op.getWeights());
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "the lhs", true, false, bf16);
  FailureOr<ValueInfo *> w = operand(op, op.getWeights(), "the weights", true, false, bf16);
  FailureOr<ValueInfo *> offsets = operand(op, op.getOffsets(), "the offsets", false);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  if (failed(lhs) || failed(w) || failed(offsets) || bad)
    return failure();
  if ((*lhs)->dims.size() != 2 || (*w)->dims.size() != 3)
    return unsupported(op, "the lhs must be [S, K] and the weights [E, N, K]");
  // The bf16 kernel loads 8 bf16 weights (16 bytes) at a time.
  if (int64_t k = (*w)->dims[2].size; bf16 && k % 8 != 0)
    return unsupported(op, "K = " + std::to_string(k) +
                               " is not a multiple of 8, which bf16 expert weights need");
  Dim rows = (*lhs)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows, false, bf16);
  if (failed(out))
    return failure();
  std::optional<moe::GateUpLayout> layout = op.getEpilogueLayout();
  if (bf16)
    layout = interleaveOnDevice(op, **w, layout);
  std::vector<std::string> args = {(*lhs)->var, dimExpr((*lhs)->dims[1]), (*w)->var,
                                   dimExpr((*w)->dims[0]), dimExpr((*w)->dims[1]),
                                   (*offsets)->var, bias, epilogue(op.getEpilogue(), layout),
                                   (*out)->var};
  if (launchTakesRowCount())
    args.insert(args.begin() + 1, dimExpr(rows));
  if (bf16)
    kernel(offsetsSettled(op) ? "groupedMatmulBF16SettledOffsets" : "groupedMatmulBF16", args);
  else
    kernel("groupedMatmul", args);
  return success();
}

/// The FP8 grouped matmul: e4m3 weights with block scales, and e4m3 rows with
/// their per-row group scales (from moe.quantize), or (CPU only) f32 rows.
LogicalResult Emitter::emitGroupedMatmulFP8(moe::GroupedMatmulOp op) {
  FailureOr<std::vector<std::string>> args = fp8MatmulArgs(op);
  if (failed(args))
    return failure();
  if (fusedIntoQuantize(op)) {
    line("// (fused into the moe.quantize below)");
    return success();
  }
  // Of quantised rows, bf16 results too (--expert-outputs=bf16 under --fp8:
  // the tiles round their f32 results).
  FailureOr<ValueInfo *> out = define(op, op.getResult(), fp8MatmulRows(op), false,
                                      /*bf16=*/static_cast<bool>(op.getLhsScales()));
  if (failed(out))
    return failure();
  args->push_back((*out)->var);
  if (!op.getLhsScales())
    kernel("groupedMatmulFP8Weights", *args);
  else
    kernel(offsetsSettled(op) ? "groupedMatmulFP8SettledOffsets" : "groupedMatmulFP8", *args);
  return success();
}

/// The MXFP4 grouped matmul: packed e2m1 weights with one e8m0 scale per row
/// per 32 along K (docs/dialect.md, "MXFP4 layout"), f32 rows (or, where the
/// target has bf16 kernels, bf16 ones). The CUDA kernel takes the bf16
/// kernel's arguments and its settled-offsets variant; the gate/up rows stay
/// in their layout (its tiles read either).
LogicalResult Emitter::emitGroupedMatmulMXFP4(moe::GroupedMatmulOp op) {
  if (!hasMXFP4Kernels())
    return unsupported(op, "MXFP4 weights; " + targetPhrase() +
                               " has no MXFP4 kernel yet (compile with --target=cpu)");
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "the lhs", true, false, /*bf16=*/true);
  FailureOr<ValueInfo *> w =
      operand(op, op.getWeights(), "the weights", true, false, false, /*mxfp4=*/true);
  FailureOr<ValueInfo *> scales =
      operand(op, op.getWeightScales(), "the weight scales", true, false, false, /*mxfp4=*/true);
  FailureOr<ValueInfo *> offsets = operand(op, op.getOffsets(), "the offsets", false);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  if (failed(lhs) || failed(w) || failed(scales) || failed(offsets) || bad)
    return failure();
  if ((*lhs)->dims.size() != 2 || (*w)->dims.size() != 3)
    return unsupported(op, "the lhs must be [S, K] and the weights [E, N, K]");
  if (int64_t k = (*w)->dims[2].size; k % mxfp4KMultiple() != 0)
    return unsupported(op, "K = " + std::to_string(k) + " is not a multiple of " +
                               std::to_string(mxfp4KMultiple()) + ", which " + targetPhrase() +
                               "'s MXFP4 kernel needs");
  Dim rows = (*lhs)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows, false, /*bf16=*/true);
  if (failed(out))
    return failure();
  relayoutMXFP4OnDevice(op, **w);
  std::vector<std::string> args = {(*lhs)->var,
                                   dimExpr((*lhs)->dims[1]),
                                   (*w)->var,
                                   (*scales)->var,
                                   dimExpr((*w)->dims[0]),
                                   dimExpr((*w)->dims[1]),
                                   (*offsets)->var,
                                   bias,
                                   epilogue(op.getEpilogue(), op.getEpilogueLayout()),
                                   (*out)->var};
  if (launchTakesRowCount())
    args.insert(args.begin() + 1, dimExpr(rows));
  kernel(offsetsSettled(op) ? "groupedMatmulMXFP4SettledOffsets" : "groupedMatmulMXFP4", args);
  return success();
}

/// After the sort that wrote `op`'s offsets, a kernel of its own produced
/// `op`'s rows: the permute of that sort's permutation (fused into a quantize
/// or not) or a grouped matmul on the same offsets (quantized or not). So the
/// sort ran at least two launches before `op`, which may stream its first
/// weights while its predecessor still runs (groupedMatmul*SettledOffsets).
/// Any sort would not do: a second one emitted right before `op` would be its
FailureOr<std::vector<std::string>> Emitter::fp8MatmulArgs(moe::GroupedMatmulOp op) {
  if (failed(checkEpilogueLayout(op, op.getEpilogueLayout(), op.getEpilogue().has_value())))
    return failure();
  bool fp8Rows = static_cast<bool>(op.getLhsScales());
  if (!op.getWeightScales())
    return LogicalResult(unsupported(op, "FP8 rows with weights that are not FP8; " +
                                             targetPhrase() +
                                             " multiplies FP8 rows only with FP8 weights"));
  if (failed(checkFP8Rows(op, fp8Rows)))
    return failure();
  FailureOr<ValueInfo *> lhs = operand(op, op.getLhs(), "the lhs", true, /*fp8=*/true);
  FailureOr<ValueInfo *> w = operand(op, op.getWeights(), "the weights", true, /*fp8=*/true);
  FailureOr<ValueInfo *> weightScales = operand(op, op.getWeightScales(), "the weight scales");
  FailureOr<ValueInfo *> offsets = operand(op, op.getOffsets(), "the offsets", false);
  bool bad = false;
  std::string bias = optionalOperand(op, op.getBias(), "the bias", bad);
  std::string lhsScales = optionalOperand(op, op.getLhsScales(), "the lhs scales", bad);
  if (failed(lhs) || failed(w) || failed(weightScales) || failed(offsets) || bad)
    return failure();
  if ((*lhs)->dims.size() != 2 || (*w)->dims.size() != 3)
    return LogicalResult(unsupported(op, "the lhs must be [S, K] and the weights [E, N, K]"));
  std::vector<std::string> args = {(*lhs)->var};
  if (launchTakesRowCount())
    args.push_back(dimExpr((*lhs)->dims[0]));
  if (fp8Rows)
    args.push_back(lhsScales);
  args.insert(args.end(), {dimExpr((*lhs)->dims[1]), (*w)->var, (*weightScales)->var,
                           dimExpr((*w)->dims[0]), dimExpr((*w)->dims[1]), (*offsets)->var, bias,
                           epilogue(op.getEpilogue(), op.getEpilogueLayout())});
  return args;
}

FailureOr<std::pair<ValueInfo *, ValueInfo *>> Emitter::defineCodes(moe::QuantizeOp op,
                                                                    Dim rows) {
  FailureOr<ValueInfo *> q = define(op, op.getResult(), rows, /*fp8=*/true);
  if (failed(q))
    return failure();
  FailureOr<ValueInfo *> scales = define(op, op.getScales(), rows);
  if (failed(scales))
    return failure();
  return std::make_pair(*q, *scales);
}

LogicalResult Emitter::emitQuantize(moe::QuantizeOp op) {
  comment(op);
  // The rows: moe.permute's (fused here on CUDA: its f32 rows are never
  // written), or the input's.
  // Or an FP8 grouped matmul's result, done here (its f32 result never written).
  if (auto matmul = op.getInput().getDefiningOp<moe::GroupedMatmulOp>();
      matmul && fusedIntoQuantize(matmul))
    return emitMatmulQuantize(op, matmul);
  auto permute = op.getInput().getDefiningOp<moe::PermuteOp>();
  bool fused = permute && fusedIntoQuantize(permute);
  FailureOr<ValueInfo *> input = fused ? operand(permute, permute.getHidden(), "the hidden states")
                                       : operand(op, op.getInput(), "the input");
  FailureOr<ValueInfo *> permutation, numValid;
  if (fused) {
    permutation = operand(permute, permute.getPermutation(), "the permutation", false);
    numValid = operand(permute, permute.getNumValid(), "num_valid", false);
  }
  if (failed(input) || (fused && (failed(permutation) || failed(numValid))))
    return failure();
  if ((*input)->dims.size() != 2)
    return unsupported(op, fused ? "the hidden states must be a matrix"
                                 : "the input must be a matrix");
  Dim rows = fused ? (*permutation)->dims[0] : (*input)->dims[0];
  FailureOr<std::pair<ValueInfo *, ValueInfo *>> codes = defineCodes(op, rows);
  if (failed(codes))
    return failure();
  ValueInfo *q = codes->first, *scales = codes->second;
  std::string k = dimExpr((*input)->dims[1]);
  if (fused)
    printPermuteQuantize(permute, **input, **permutation, **numValid, *q, *scales);
  else
    printQuantize(**input, rows, k, writtenRows(op.getInput(), rows), *q, *scales);
  return success();
}

LogicalResult Emitter::emitCombine(moe::CombineOp op) {
  comment(op);
  FailureOr<ValueInfo *> rows = operand(op, op.getRows(), "the rows", true, false, /*bf16=*/true);
  FailureOr<ValueInfo *> permutation = operand(op, op.getPermutation(), "the permutation", false);
  FailureOr<ValueInfo *> weights = operand(op, op.getWeights(), "the routing weights");
  FailureOr<ValueInfo *> numValid = operand(op, op.getNumValid(), "num_valid", false);
  bool bad = false;
  std::string addend = optionalOperand(op, op.getAddend(), "the addend", bad);
  std::string gate = optionalOperand(op, op.getAddendGate(), "the addend gate", bad);
  if (failed(rows) || failed(permutation) || failed(weights) || failed(numValid) || bad)
    return failure();
  if ((*rows)->dims.size() != 2 || (*weights)->dims.size() != 2)
    return unsupported(op, "the rows and routing weights must be matrices");
  if (std::optional<int64_t> epSize = op.getEpSize()) {
    // The addend counts once in the ranks' sum: rank 0 adds it.
    if (failed(expertParallel(op, *epSize)))
      return failure();
    if (addend != "nullptr")
      addend = "(" + rankExpr() + " == 0 ? " + addend + " : nullptr)";
    if (gate != "nullptr")
      gate = "(" + rankExpr() + " == 0 ? " + gate + " : nullptr)";
  }
  Dim tokens = (*weights)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), tokens);
  if (failed(out))
    return failure();
  printCombine(op, **rows, **permutation, **weights, **numValid, addend, gate, **out);
  return success();
}

/// tensor.concat of static shapes: what moe-lower-layer leaves when separate
/// gate and up weights are function arguments rather than constants (the
/// hand-written expert loops). A copy per operand per outer index.
LogicalResult Emitter::emitConcat(tensor::ConcatOp op) {
  comment(op);
  auto resultType = cast<RankedTensorType>(op.getType());
  if (!resultType.hasStaticShape())
    return unsupported(op, "only concatenations of static shapes are supported");
  SmallVector<ValueInfo *> parts;
  for (Value input : op.getInputs()) {
    FailureOr<ValueInfo *> info = operand(op, input, "an operand");
    if (failed(info))
      return failure();
    parts.push_back(*info);
  }
  FailureOr<ValueInfo *> out = define(op, op.getResult(), std::nullopt);
  if (failed(out))
    return failure();
  int64_t dim = op.getDim(), outer = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= resultType.getDimSize(i);
  printConcat(**out, parts, dim, outer);
  return success();
}

/// The ranks' partial sums added up, through the loader's communicator.
LogicalResult Emitter::emitAllReduce(moe::AllReduceOp op) {
  if (!result.epSize)
    return unsupported(op, "an all-reduce in a program compiled for one rank (--ep-rank); "
                           "compile without --ep-rank for the artifact that every rank loads");
  if (failed(expertParallel(op, static_cast<int64_t>(op.getEpSize()))))
    return failure();
  FailureOr<ValueInfo *> in = operand(op, op.getInput(), "the partial sum");
  if (failed(in))
    return failure();
  if (!(*in)->elementType.isF32())
    return unsupported(op, "the ranks' partial sums are all-reduced in f32 only");
  std::optional<Dim> count = countOf((*in)->dims);
  if (!count || (*in)->dims.empty())
    return unsupported(op, "a partial sum with two token dimensions");
  FailureOr<ValueInfo *> out = define(op, op.getResult(), (*in)->dims[0]);
  if (failed(out))
    return failure();
  comment(op);
  printAllReduce(**in, **out, dimExpr(*count));
  return success();
}

LogicalResult Emitter::emitReturn(func::ReturnOp op) {
  for (auto [i, value] : llvm::enumerate(op.getOperands())) {
    FailureOr<ValueInfo *> info = operand(op, value, "result " + std::to_string(i), false);
    if (failed(info))
      return failure();
    // The caller sizes outputs from the manifest, where the dynamic dimension
    // is T itself; a result of S = K·T rows (say) would overrun it.
    const SmallVector<Dim> &declared = result.outputs[i].dims;
    bool same = declared.size() == (*info)->dims.size();
    for (size_t d = 0; same && d < declared.size(); ++d)
      same = declared[d].size == (*info)->dims[d].size &&
             declared[d].perToken == (*info)->dims[d].perToken;
    if (!same)
      return unsupported(op, "result " + Twine(i) + " has shape " + shapeText((*info)->dims) +
                                 " ('?': a multiple of the token count T), the output is "
                                 "declared " + shapeText(declared) +
                                 "; an output's dynamic dimension must be T itself");
    std::optional<Dim> count = countOf((*info)->dims);
    printResult(i, value, **info, *count);
  }
  return success();
}

} // namespace moec::codegen
