//===- MXFP4Experts.h - gpt-oss's MXFP4 experts as moe.layer takes them -*- C++ -*-===//
//
// gpt-oss's checkpoints store each expert projection NAME [E, N, K] (rows N
// the outputs, [out, in] as moe.layer's weights) as
//   NAME_blocks  U8 [E, N, ceil(K/32), 16]: two e2m1 codes a byte, code 2j of
//                a 32-block in byte j's low nibble, 2j+1 in its high nibble;
//   NAME_scales  U8 [E, N, ceil(K/32)]: e8m0 exponents, 2^(s - 127).
// (transformers' convert_moe_packed_tensors decodes them so.) moe.layer takes
// the codes as f4E2M1FN [E, N, K], one a byte as MLIR holds them, and the
// scales as f8E8M0FNU [E, N, ceil(K/32)]: the same numbers, never through
// bf16 (docs/dialect.md, "MXFP4 layout").
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MXFP4EXPERTS_H
#define MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MXFP4EXPERTS_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec::checkpoint {

struct MXFP4Experts {
  /// One e2m1 code a byte [E, N, K]; the scale bytes [E, N, ceil(K/32)].
  std::vector<char> codes, scales;
};

/// The blocks' and scales' bytes of `rows` = E·N rows of `k` codes, their
/// shapes already checked. On a NaN scale (0xFF) or a nonzero code past K,
/// nullopt and `why` says which element.
std::optional<MXFP4Experts> unpackMXFP4(llvm::ArrayRef<char> blocks, llvm::ArrayRef<char> scales,
                                        int64_t rows, int64_t k, std::string &why);

} // namespace moec::checkpoint

#endif // MOEC_FRONTENDS_CHECKPOINT_LIB_IMPORT_MXFP4EXPERTS_H
