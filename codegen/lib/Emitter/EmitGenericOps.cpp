//===- EmitGenericOps.cpp - moe.elementwise and moe.reduce_rows -----------===//
//
// The generic ops of the step program, printed as loops rather than kernel
// calls: moe.elementwise is one fused loop over rows × columns, its body's
// scalar ops C++ expressions in f32 (operands read per element, per row
// [N, 1], per column [C] or once); moe.reduce_rows a loop over each row's
// columns in ascending order, accumulated in double. The pool splits the
// rows; every element is computed by one thread alone, in one order, so the
// results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "EmitterBase.h"

#include "moec/Dialect/MoE/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace moec::codegen {

LogicalResult Emitter::checkGenericTarget(Operation *op) {
  if (!hasGenericModelKernels())
    return unsupported(op, "generic whole-model ops (moe.elementwise, moe.reduce_rows) have no "
                           "kernels on " +
                               targetPhrase() + " yet; compile for --target=cpu");
  return success();
}

namespace {

/// The C++ expression of one body op over its operands' expressions; failure
/// for an op it does not print.
FailureOr<std::string> scalarExpr(Operation *op, ArrayRef<std::string> a) {
  auto binary = [&](StringRef sign) { return "(" + a[0] + " " + sign.str() + " " + a[1] + ")"; };
  auto call = [&](StringRef f) {
    return f.str() + "(" + a[0] + (a.size() > 1 ? ", " + a[1] : "") + ")";
  };
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](arith::ConstantOp c) -> FailureOr<std::string> {
        auto value = dyn_cast<FloatAttr>(c.getValue());
        if (!value)
          return failure();
        return floatLiteral(value.getValueAsDouble());
      })
      .Case([&](arith::AddFOp) { return binary("+"); })
      .Case([&](arith::SubFOp) { return binary("-"); })
      .Case([&](arith::MulFOp) { return binary("*"); })
      .Case([&](arith::DivFOp) { return binary("/"); })
      .Case([&](arith::NegFOp) { return "(-" + a[0] + ")"; })
      // IEEE maximum and minimum: a NaN operand makes the result NaN.
      .Case([&](arith::MaximumFOp) {
        return "(" + a[0] + " != " + a[0] + " || " + a[1] + " != " + a[1] + " ? " + a[0] +
               " + " + a[1] + " : std::fmax(" + a[0] + ", " + a[1] + "))";
      })
      .Case([&](arith::MinimumFOp) {
        return "(" + a[0] + " != " + a[0] + " || " + a[1] + " != " + a[1] + " ? " + a[0] +
               " + " + a[1] + " : std::fmin(" + a[0] + ", " + a[1] + "))";
      })
      .Case([&](arith::MaxNumFOp) { return call("std::fmax"); })
      .Case([&](arith::MinNumFOp) { return call("std::fmin"); })
      .Case([&](arith::CmpFOp cmp) -> FailureOr<std::string> {
        using P = arith::CmpFPredicate;
        switch (cmp.getPredicate()) {
        case P::OEQ: return binary("==");
        case P::UNE: return binary("!=");
        case P::OLT: return binary("<");
        case P::OLE: return binary("<=");
        case P::OGT: return binary(">");
        case P::OGE: return binary(">=");
        default: return failure();
        }
      })
      .Case([&](arith::SelectOp) { return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")"; })
      .Case([&](math::SqrtOp) { return call("std::sqrt"); })
      .Case([&](math::RsqrtOp) { return "(1.0f / std::sqrt(" + a[0] + "))"; })
      .Case([&](math::ExpOp) { return call("std::exp"); })
      .Case([&](math::LogOp) { return call("std::log"); })
      .Case([&](math::TanhOp) { return call("std::tanh"); })
      .Case([&](math::ErfOp) { return call("std::erf"); })
      .Case([&](math::AbsFOp) { return call("std::fabs"); })
      .Case([&](math::PowFOp) { return call("std::pow"); })
      .Default([](Operation *) -> FailureOr<std::string> { return failure(); });
}

} // namespace

LogicalResult Emitter::emitElementwise(moe::ElementwiseOp op) {
  if (failed(checkGenericTarget(op)))
    return failure();
  SmallVector<ValueInfo *> inputs;
  for (auto [index, input] : llvm::enumerate(op.getInputs())) {
    FailureOr<ValueInfo *> info = operand(op, input, "input " + std::to_string(index));
    if (failed(info))
      return failure();
    inputs.push_back(*info);
  }
  // The rows: an [N, C] or [N, 1] input's.
  std::optional<Dim> rows;
  for (ValueInfo *info : inputs)
    if (info->dims.size() == 2 && !rows)
      rows = info->dims[0];
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  if (!rows) {
    if (resultType.isDynamicDim(0))
      return unsupported(op, "no [N, C] or [N, 1] input gives its row count");
    rows = Dim{resultType.getDimSize(0), false};
  }
  FailureOr<ValueInfo *> out = define(op, op.getResult(), *rows);
  if (failed(out))
    return failure();
  if ((*out)->dims[1].perToken)
    return unsupported(op, "the column count scales with the token count");
  int64_t columns = (*out)->dims[1].size;
  std::string n = "(" + dimExpr(*rows) + ")", c = std::to_string(columns);

  // The body, once per element.
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, std::string> exprs;
  std::vector<std::string> statements;
  for (auto [index, argument, info] : llvm::enumerate(body.getArguments(), inputs)) {
    int64_t width = info->dims.empty() ? 1 : info->dims.back().size;
    bool perRow = info->dims.size() == 2, perColumn = width != 1 && !info->dims.back().perToken;
    std::string at = perRow && perColumn ? "r * " + c + " + c" : perRow ? "r" : perColumn ? "c" : "0";
    std::string name = "a" + std::to_string(index);
    statements.push_back("const float " + name + " = " + info->var + "[" + at + "];");
    exprs[argument] = name;
  }
  unsigned next = 0;
  for (Operation &inner : body.without_terminator()) {
    SmallVector<std::string> args;
    for (Value v : inner.getOperands())
      args.push_back(exprs.lookup(v));
    FailureOr<std::string> expr = scalarExpr(&inner, args);
    if (failed(expr))
      return unsupported(op, "its body holds '" + inner.getName().getStringRef() +
                                 "', which " + targetPhrase() + " does not print");
    std::string name = "e" + std::to_string(next++);
    bool condition = inner.getResult(0).getType().isInteger(1);
    statements.push_back(std::string(condition ? "const bool " : "const float ") + name + " = " +
                         *expr + ";");
    exprs[inner.getResult(0)] = name;
  }
  std::string yielded = exprs.lookup(body.getTerminator()->getOperand(0));
  comment(op);
  line("pool.parallelFor(" + n + ", double" + n + " * " + c + " * " +
       std::to_string(std::max<size_t>(next, 1)) + ", [&](int64_t r0, int64_t r1) {");
  line("  for (int64_t r = r0; r < r1; ++r)");
  line("    for (int64_t c = 0; c < " + c + "; ++c) {");
  for (const std::string &statement : statements)
    line("      " + statement);
  line("      " + (*out)->var + "[r * " + c + " + c] = " + yielded + ";");
  line("    }");
  line("});");
  return success();
}

LogicalResult Emitter::emitReduceRows(moe::ReduceRowsOp op) {
  if (failed(checkGenericTarget(op)))
    return failure();
  FailureOr<ValueInfo *> in = operand(op, op.getInput(), "input");
  if (failed(in))
    return failure();
  if ((*in)->dims[1].perToken)
    return unsupported(op, "the reduced dimension scales with the token count");
  Dim rows = (*in)->dims[0];
  FailureOr<ValueInfo *> out = define(op, op.getResult(), rows);
  if (failed(out))
    return failure();
  std::string n = "(" + dimExpr(rows) + ")", c = std::to_string((*in)->dims[1].size);
  std::string x = (*in)->var + "[r * " + c + " + c]";
  moe::ReduceKind kind = op.getKind();
  comment(op);
  line("pool.parallelFor(" + n + ", double" + n + " * " + c + ", [&](int64_t r0, int64_t r1) {");
  line("  for (int64_t r = r0; r < r1; ++r) {");
  if (kind == moe::ReduceKind::Max) {
    line("    float acc = " + (*in)->var + "[r * " + c + "];");
    line("    for (int64_t c = 1; c < " + c + "; ++c)");
    line("      acc = acc != acc || " + x + " != " + x + " ? acc + " + x + " : std::fmax(acc, " +
         x + ");");
    line("    " + (*out)->var + "[r] = acc;");
  } else {
    line("    double acc = 0.0;");
    line("    for (int64_t c = 0; c < " + c + "; ++c)");
    line("      acc += " + x + ";");
    line("    " + (*out)->var + "[r] = static_cast<float>(acc" +
         (kind == moe::ReduceKind::Mean ? " / " + c + ".0" : std::string()) + ");");
  }
  line("  }");
  line("});");
  return success();
}

} // namespace moec::codegen
