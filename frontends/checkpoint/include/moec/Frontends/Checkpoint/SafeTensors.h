//===- SafeTensors.h - Hugging Face checkpoints, mapped ---------*- C++ -*-===//
//
// A Hugging Face checkpoint directory: config.json and the weights as one
// model.safetensors or as model.safetensors.index.json and its shards. Opening
// reads and checks config.json, the index and every shard's header; a tensor's
// bytes are mapped from its shard on first use, never copied. Nothing in the
// files is trusted: every error names the file (and the tensor or key) and
// none is a crash.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_SAFETENSORS_H
#define MOEC_FRONTENDS_CHECKPOINT_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace moec::checkpoint {

/// The element types moec reads (safetensors' F64, F32, F16, BF16, F8_E4M3,
/// F8_E5M2, I64, I32, I16, I8, U8, BOOL). Others (U16, F8_E8M0, F4, ...) are
/// errors.
enum class DType { F64, F32, F16, BF16, F8E4M3, F8E5M2, I64, I32, I16, I8, U8, Bool };

/// The safetensors spelling ("F8_E4M3", "BOOL", ...).
llvm::StringRef dtypeName(DType dtype);
/// The dtype a safetensors spelling names, if moec reads it.
std::optional<DType> parseDType(llvm::StringRef name);
/// Bytes of one element.
int64_t dtypeSize(DType dtype);

/// One tensor of a checkpoint: its bytes point into the mapped shard (row
/// major, little endian, no alignment promised: a shard's data section starts
/// wherever its header ends).
struct TensorView {
  std::string name;
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
  llvm::ArrayRef<char> bytes;
  std::string file; ///< the shard's file name, e.g. "model-00001-of-00002.safetensors"
  int64_t numElements() const;
};

/// One tensor of a safetensors header, checked: `begin`/`end` are offsets from
/// the start of the file (the header's data_offsets plus 8 + header length),
/// end - begin = numel · dtype size, inside the file, not overlapping another.
struct TensorEntry {
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
  uint64_t begin = 0, end = 0;
};

/// A safetensors file's header, checked against the file's size.
struct SafeTensorsHeader {
  uint64_t dataStart = 0;                      ///< 8 + the header's length
  std::map<std::string, TensorEntry> tensors;  ///< by name
  std::map<std::string, std::string> metadata; ///< "__metadata__", strings only
};

/// The most header bytes a safetensors file may declare (100 MiB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

/// Parses and checks the header of a safetensors file of `fileSize` bytes
/// whose first bytes are `prefix` (at least 8 + the declared header length of
/// them, or the whole file if shorter). `fileName` names the file in errors.
llvm::Expected<SafeTensorsHeader> parseSafeTensorsHeader(llvm::StringRef prefix, uint64_t fileSize,
                                                         llvm::StringRef fileName);

/// DIR/config.json alone, parsed (an object), for a model without weights
/// (moec compile --random-weights); errors name the file.
llvm::Expected<llvm::json::Object> readConfigFile(llvm::StringRef dir);

class Checkpoint {
public:
  /// `dir` holds config.json and either model.safetensors or
  /// model.safetensors.index.json + the shards it names (model.safetensors
  /// wins where both are present, as in transformers). Reads config.json, the
  /// index and every shard's header; maps nothing.
  static llvm::Expected<std::unique_ptr<Checkpoint>> open(llvm::StringRef dir);

  /// One safetensors file already in memory (the whole file, e.g. for the
  /// fuzzer): the same header checks as open(); tensor() views `file`. The
  /// checkpoint owns `file`; `config` is what config() returns.
  static llvm::Expected<std::unique_ptr<Checkpoint>>
  fromBuffer(std::unique_ptr<llvm::MemoryBuffer> file, llvm::json::Object config = {});

  ~Checkpoint();

  /// config.json, parsed (an object; parseConfig() in Config.h normalises it).
  const llvm::json::Object &config() const { return config_; }
  bool has(llvm::StringRef name) const;
  /// The tensor's bytes, its shard mapped on first use (once per shard,
  /// thread-safe). An error names the tensor and the file: an unknown name, a
  /// shard that cannot be mapped or no longer has the size it had at open().
  llvm::Expected<TensorView> tensor(llvm::StringRef name) const;
  /// Every tensor's name, sorted.
  std::vector<std::string> names() const;
  /// The sum of all tensors' sizes in bytes.
  uint64_t totalBytes() const { return totalBytes_; }
  /// The shards' file names, in the order of first mention (one for a
  /// single-file checkpoint).
  std::vector<std::string> files() const;
  /// A shard's "__metadata__" (empty for a file not in this checkpoint).
  const std::map<std::string, std::string> &metadata(llvm::StringRef file) const;

private:
  struct Shard {
    std::string fileName; ///< as in the index (or "model.safetensors")
    std::string path;     ///< dir/fileName
    uint64_t size = 0;    ///< at open()
    std::map<std::string, std::string> metadata;
    mutable std::unique_ptr<llvm::MemoryBuffer> mapped;
  };
  struct Located {
    TensorEntry entry;
    unsigned shard;
  };

  Checkpoint() = default;
  llvm::Error addShard(std::string fileName, std::string path, uint64_t size,
                       SafeTensorsHeader header, const llvm::StringMap<std::string> *weightMap);

  llvm::json::Object config_;
  std::vector<Shard> shards_;
  llvm::StringMap<Located> tensors_;
  uint64_t totalBytes_ = 0;
  mutable std::mutex mapMutex_;
};

} // namespace moec::checkpoint

#endif // MOEC_FRONTENDS_CHECKPOINT_SAFETENSORS_H
