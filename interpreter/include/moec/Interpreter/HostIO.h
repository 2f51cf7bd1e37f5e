//===- HostIO.h - npz arrays in and out of the interpreter -----*- C++ -*-===//
//
// moec-interp (and anything else that runs a function on .npz files) names
// inputs and outputs as the ONNX importer does: by the `onnx.name` attribute
// of each argument and result, else `argN` and `resultN`.
//
// An array fits an argument when its rank equals the argument's, its static
// dimensions match (a dynamic one takes the array's size) and its dtype is
// acceptable:
//   * floating-point arguments take any floating-point array (f16, bf16, f32,
//     f64, f8E4M3FN), rounded to the argument's type as a cast at the graph's
//     entry would (numpy has no bf16, and np.random gives f64);
//   * integer arguments take any integer array whose values the argument's
//     type represents (numpy's default int64 for i32 ids);
//   * i1 arguments take bool arrays.
// Anything else (floats for integers, a wrong rank, a mismatched static
// dimension, a missing or unknown name) is an error.
//
// Results are written with the dtype of their declared element type where
// .npy has one; bf16 and f8E4M3FN results are written as f32 (exactly), and
// i16/ui16/ui32/ui64 as i32 or i64.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_HOSTIO_H
#define MOEC_INTERPRETER_HOSTIO_H

#include "moec/Interpreter/Tensor.h"
#include "moec/runtime/Npz.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace moec::interp {

/// The name of argument `index` of `function`: its `onnx.name`, else "argN".
std::string argumentName(mlir::func::FuncOp function, unsigned index);
/// The name of result `index` of `function`: its `onnx.name`, else "resultN".
std::string resultName(mlir::func::FuncOp function, unsigned index);

/// The arguments of `function` from `inputs`, keyed by argument name.
llvm::Expected<llvm::SmallVector<Tensor>> bindArguments(mlir::func::FuncOp function,
                                                        const rt::TensorMap &inputs);

/// `tensor` as a host tensor for an .npz file.
rt::HostTensor toHostTensor(const Tensor &tensor);

// Outputs are compared with expected arrays by moec/runtime/Compare.h (as
// moec-run's), on toHostTensor of each result.

} // namespace moec::interp

#endif // MOEC_INTERPRETER_HOSTIO_H
