//===- Interpreter.h - a float64 reference interpreter ---------*- C++ -*-===//
//
// Evaluates one func.func of moec's IR on host tensors: the `onnx` ops an
// imported model holds, every op of the `moe` dialect, func.return, and the
// upstream ops hand-written blocks use (arith, math, scf.for, tensor,
// linalg). It is the reference that passes and backends are judged by, so it
// computes in f64, rounds each result once to its declared element type and
// checks each result's concrete shape against the declared type. The semantics are those of docs/dialect.md for `moe` and
// of the ONNX specification for `onnx`.
//
// Rows that docs/dialect.md calls unspecified (the sentinel tail past
// num_valid that moe.permute and moe.grouped_matmul do not compute) are filled
// with NaN, so an op that wrongly reads them poisons the output visibly.
//
// Every error is a diagnostic at the op it concerns (unsupported op, index
// out of range, shape mismatch with the declared type, ...); the call then
// returns failure. Nothing aborts.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_INTERPRETER_H
#define MOEC_INTERPRETER_INTERPRETER_H

#include "moec/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

namespace moec::interp {

/// How a run sees the world beyond the function.
struct InterpretOptions {
  /// The expert-parallel rank a program partitioned for every rank (moe.ep_shard,
  /// moe.sort and moe.combine with `ep_size`) runs as; -1: none, and such ops
  /// are errors. With a rank, moe.all_reduce yields this rank's partial sum:
  /// the caller adds the ranks' results, as the all-reduce would.
  int64_t epRank = -1;
};

/// Runs `function` on `arguments`, one per function argument, whose element
/// types and shapes must fit the argument types (dynamic dimensions take the
/// given size). Returns the values of func.return.
mlir::FailureOr<llvm::SmallVector<Tensor>> interpret(mlir::func::FuncOp function,
                                                     llvm::ArrayRef<Tensor> arguments,
                                                     const InterpretOptions &options = {});

/// The tensor a constant attribute holds: a dense or dense_resource elements
/// attribute of a ranked tensor type. Errors are emitted at `loc`.
mlir::FailureOr<Tensor> tensorFromAttribute(mlir::Attribute attribute, mlir::Location loc);

} // namespace moec::interp

#endif // MOEC_INTERPRETER_INTERPRETER_H
