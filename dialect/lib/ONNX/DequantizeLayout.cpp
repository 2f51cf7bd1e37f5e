//===- DequantizeLayout.cpp - which scale each DequantizeLinear element uses ===//

#include "moec/Dialect/ONNX/DequantizeLayout.h"

using namespace moec::onnx;

std::optional<DequantizeLayout>
DequantizeLayout::get(llvm::ArrayRef<int64_t> xShape, llvm::ArrayRef<int64_t> scaleShape,
                      std::optional<int64_t> axis, std::optional<int64_t> blockSize,
                      std::string &why) {
  DequantizeLayout layout;
  layout.xShape.assign(xShape.begin(), xShape.end());
  layout.scaleShape.assign(scaleShape.begin(), scaleShape.end());
  int64_t rank = static_cast<int64_t>(xShape.size());
  int64_t scaleElements = 1;
  for (int64_t d : scaleShape)
    scaleElements *= d;
  // A one-element scale of rank 0 or 1 is per tensor whatever the axis says.
  if (scaleShape.size() <= 1 && scaleElements == 1 && blockSize.value_or(0) == 0)
    return layout;
  int64_t a = axis.value_or(1);
  if (a < -rank || a >= rank) {
    why = "axis " + std::to_string(a) + " is out of range for x of rank " + std::to_string(rank);
    return std::nullopt;
  }
  layout.axis = a < 0 ? a + rank : a;
  int64_t block = blockSize.value_or(0);
  if (block < 0) {
    why = "block_size " + std::to_string(block) + " is negative";
    return std::nullopt;
  }
  if (block == 0) {
    if (scaleShape.size() != 1 || scaleShape[0] != xShape[layout.axis]) {
      why = "a per-axis scale must be 1-D with x's dimension " + std::to_string(layout.axis) +
            " (" + std::to_string(xShape[layout.axis]) + " elements)";
      return std::nullopt;
    }
    layout.kind = Kind::PerAxis;
    return layout;
  }
  if (static_cast<int64_t>(scaleShape.size()) != rank) {
    why = "a blocked scale must have x's rank " + std::to_string(rank);
    return std::nullopt;
  }
  for (int64_t d = 0; d < rank; ++d) {
    int64_t want = d == layout.axis ? (xShape[d] + block - 1) / block : xShape[d];
    if (scaleShape[d] != want) {
      why = "the blocked scale's dimension " + std::to_string(d) + " is " +
            std::to_string(scaleShape[d]) + "; block_size " + std::to_string(block) +
            " along axis " + std::to_string(layout.axis) + " makes " + std::to_string(want);
      return std::nullopt;
    }
  }
  layout.kind = Kind::Blocked;
  layout.blockSize = block;
  return layout;
}

int64_t DequantizeLayout::scaleIndex(int64_t flat) const {
  switch (kind) {
  case Kind::PerTensor:
    return 0;
  case Kind::PerAxis: {
    int64_t inner = 1;
    for (size_t d = axis + 1; d < xShape.size(); ++d)
      inner *= xShape[d];
    return (flat / inner) % xShape[axis];
  }
  case Kind::Blocked: {
    int64_t index = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(xShape.size()) - 1; d >= 0; --d) {
      int64_t coordinate = flat % xShape[d];
      flat /= xShape[d];
      index += (d == axis ? coordinate / blockSize : coordinate) * stride;
      stride *= scaleShape[d];
    }
    return index;
  }
  }
  return 0;
}
