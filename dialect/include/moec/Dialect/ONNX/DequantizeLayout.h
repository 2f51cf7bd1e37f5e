//===- DequantizeLayout.h - which scale each DequantizeLinear element uses -===//
//
// ONNX DequantizeLinear (opset 21) computes y = (x - zero_point) * scale with
// one of three scale layouts: per tensor (a scalar), per axis (1-D, along
// `axis`) or blocked (`block_size` > 0: the scale has x's rank, and along
// `axis` one entry per block_size elements). The interpreter evaluates the op
// and moe-raise-onnx reads e4m3 checkpoints through it; both ask this class
// which scale (and zero point) element i of x uses, so the rule is written once.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_ONNX_DEQUANTIZELAYOUT_H
#define MOEC_DIALECT_ONNX_DEQUANTIZELAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <string>

namespace moec::onnx {

class DequantizeLayout {
public:
  /// The layout for x of `xShape` and a scale of `scaleShape`, with the op's
  /// `axis` (default 1) and `block_size` (default 0); on a mismatch, nullopt
  /// and `why` says what does not fit.
  static std::optional<DequantizeLayout> get(llvm::ArrayRef<int64_t> xShape,
                                             llvm::ArrayRef<int64_t> scaleShape,
                                             std::optional<int64_t> axis,
                                             std::optional<int64_t> blockSize, std::string &why);

  /// The flat index into the scale (and the zero point, which has its shape)
  /// of x's element `flat`, row-major.
  int64_t scaleIndex(int64_t flat) const;

private:
  enum class Kind { PerTensor, PerAxis, Blocked };
  Kind kind = Kind::PerTensor;
  int64_t axis = 0, blockSize = 0;
  llvm::SmallVector<int64_t, 4> xShape, scaleShape;
};

} // namespace moec::onnx

#endif // MOEC_DIALECT_ONNX_DEQUANTIZELAYOUT_H
