//===- MXFP4Experts.cpp - gpt-oss's MXFP4 experts as moe.layer takes them --===//

#include "MXFP4Experts.h"

#include "moec/runtime/MXFP4.h"

namespace moec::checkpoint {

namespace mx = moec::rt::mxfp4;

std::optional<MXFP4Experts> unpackMXFP4(llvm::ArrayRef<char> blocks, llvm::ArrayRef<char> scales,
                                        int64_t rows, int64_t k, std::string &why) {
  int64_t kBlocks = (k + mx::kBlock - 1) / mx::kBlock, rowBytes = mx::packedRowBytes(k);
  MXFP4Experts out;
  out.codes.resize(static_cast<size_t>(rows * k));
  out.scales.assign(scales.begin(), scales.end());
  for (int64_t i = 0; i < rows * kBlocks; ++i)
    if (static_cast<uint8_t>(scales[i]) == mx::kScaleNaN) {
      why = "holds the e8m0 NaN scale 0xFF (row " + std::to_string(i / kBlocks) + ", block " +
            std::to_string(i % kBlocks) + ")";
      return std::nullopt;
    }
  for (int64_t row = 0; row < rows; ++row) {
    auto *packed = reinterpret_cast<const uint8_t *>(blocks.data() + row * rowBytes);
    for (int64_t i = 0; i < k; ++i)
      out.codes[row * k + i] = static_cast<char>(mx::codeAt(packed, i));
    // The codes past K (a partial last block) hold nothing: zero, as stored.
    for (int64_t i = k; i < kBlocks * mx::kBlock; ++i)
      if (mx::codeAt(packed, i) != 0) {
        why = "holds a nonzero code past the row's " + std::to_string(k) + " columns (row " +
              std::to_string(row) + ", column " + std::to_string(i) + ")";
        return std::nullopt;
      }
  }
  return out;
}

} // namespace moec::checkpoint
