//===- PlanStreams.cpp - the shared expert's side branch, as attributes -----===//
//
// The CUDA target runs a shared expert beside the routed chain: at decode its
// two matmuls have one expert's rows, a few dozen blocks each, and in line they
// would wait behind the router, sort, permute and the routed GEMMs. Nothing of
// the routed chain reads them (docs/design.md, "The shared expert beside the
// routed experts"). This pass states the plan; the CUDA printer follows it:
//
//   for each moe.combine's addend and addend_gate: the backward slice through
//   moe.linear ops and views down to the function's inputs (or views of them)
//   and constants. It is taken only when it is closed (nothing else feeds it),
//   holds a moe.linear, nothing outside it but the combine reads its values,
//   and none of them is (through views) a result of the function.
//
// Its ops get `moe.stream = 1 : i64` (the side stream); the views of inputs it
// reads get `moe.stream_input_view` (a unit attribute: aliases, no kernel, that
// both streams may read, so codegen defines them before either). The
// interpreter ignores both.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace moec {
#define GEN_PASS_DEF_MOEPLANSTREAMS
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;
using namespace moec::moe;

namespace {

/// The views codegen accepts (isView), before and after moe-legalize-for-codegen.
bool isView(Operation *op) {
  return isa<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::IdentityOp,
             tensor::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op);
}

bool isConstant(Operation *op) { return isa<arith::ConstantOp, onnx::ConstantOp>(op); }

Value viewRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

struct MoEPlanStreams : moec::impl::MoEPlanStreamsBase<MoEPlanStreams> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    getOperation().walk([&](func::FuncOp function) {
      if (function.isExternal())
        return;
      // The values written straight into a result (codegen's outputOf): the
      // moe op results that are, through views, returned.
      llvm::DenseSet<Value> outputs;
      function.walk([&](func::ReturnOp ret) {
        for (Value value : ret.getOperands()) {
          Value root = viewRoot(value);
          Operation *def = root.getDefiningOp();
          if (def && isa<MoEDialect>(def->getDialect()))
            outputs.insert(root);
        }
      });
      llvm::SetVector<Operation *> sideBranch, inputViews;
      function.walk([&](CombineOp combine) {
        for (Value start : {combine.getAddend(), combine.getAddendGate()}) {
          if (!start)
            continue;
          llvm::SetVector<Operation *> slice, views;
          SmallVector<Operation *> work;
          if (Operation *def = start.getDefiningOp())
            work.push_back(def);
          bool closed = true, computes = false;
          while (!work.empty() && closed) {
            Operation *op = work.pop_back_val();
            if (isConstant(op) || slice.contains(op) || views.contains(op))
              continue;
            // A view of an input: both streams may read it.
            if (isView(op) && isa<BlockArgument>(viewRoot(op->getResult(0)))) {
              views.insert(op);
              continue;
            }
            if (!isa<LinearOp>(op) && !isView(op)) {
              closed = false; // fed by the routed chain (or by anything else)
              break;
            }
            computes |= isa<LinearOp>(op);
            slice.insert(op);
            for (Value operand : op->getOperands())
              if (Operation *def = operand.getDefiningOp())
                work.push_back(def);
          }
          // Nothing outside the slice but the combine reads it, and nothing of
          // it is a function result.
          for (Operation *op : slice)
            for (Value result : op->getResults()) {
              closed &= !outputs.contains(result);
              for (Operation *user : result.getUsers())
                closed &= user == combine.getOperation() || slice.contains(user);
            }
          if (closed && computes) {
            sideBranch.insert(slice.begin(), slice.end());
            inputViews.insert(views.begin(), views.end());
          }
        }
      });
      auto stream = IntegerAttr::get(IntegerType::get(context, 64), 1);
      for (Operation *op : sideBranch)
        op->setAttr(kStreamAttr, stream);
      for (Operation *op : inputViews)
        op->setAttr(kStreamInputViewAttr, UnitAttr::get(context));
    });
  }
};

} // namespace
