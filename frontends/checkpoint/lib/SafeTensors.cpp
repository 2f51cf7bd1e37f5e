//===- SafeTensors.cpp - Hugging Face checkpoints, mapped -------------------===//

#include "moec/Frontends/Checkpoint/SafeTensors.h"

#include "JsonUtil.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace moec::checkpoint;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using moec::checkpoint::detail::kindName;
using moec::checkpoint::detail::sortedKeys;

namespace {

constexpr StringRef kSingleFile = "model.safetensors";
constexpr StringRef kIndexFile = "model.safetensors.index.json";
/// config.json and the index are small; a bound keeps a hostile one from
/// being read whole.
constexpr uint64_t kMaxJsonFileBytes = 100ull << 20;

struct DTypeInfo {
  DType dtype;
  StringRef name;
  int64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4},        {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::F8E4M3, "F8_E4M3", 1}, {DType::F8E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},   {DType::I32, "I32", 4},        {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},     {DType::U8, "U8", 1},          {DType::Bool, "BOOL", 1},
};

Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Parses JSON text that must be an object; `what` names the file.
Expected<llvm::json::Object> parseJsonObject(StringRef text, StringRef what) {
  if (!detail::jsonDepthWithinLimit(text))
    return fail(
        llvm::formatv("{0}: JSON nested deeper than {1} levels", what, detail::kMaxJsonDepth));
  Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value)
    return fail(llvm::formatv("{0}: not valid JSON: {1}", what, llvm::toString(value.takeError())));
  llvm::json::Object *object = value->getAsObject();
  if (!object)
    return fail(llvm::formatv("{0}: expected a JSON object, got {1}", what, kindName(*value)));
  if (std::optional<std::string> key = detail::findDuplicateKey(text))
    return fail(llvm::formatv("{0}: key '{1}' appears twice in one object", what, *key));
  return std::move(*object);
}

/// A regular file's size (symbolic links followed: the Hub's cache links
/// snapshots to blobs).
Expected<uint64_t> regularFileSize(StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail(llvm::formatv("{0}: cannot open: {1}", path, ec.message()));
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail(llvm::formatv("{0}: not a regular file", path));
  return status.getSize();
}

/// Reads a small JSON file (config.json, the index) whole and parses it.
Expected<llvm::json::Object> readJsonFile(StringRef path) {
  Expected<uint64_t> size = regularFileSize(path);
  if (!size)
    return size.takeError();
  if (*size > kMaxJsonFileBytes)
    return fail(llvm::formatv("{0}: {1} bytes, more than the {2} a JSON file may have", path, *size,
                              kMaxJsonFileBytes));
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(llvm::formatv("{0}: cannot read: {1}", path, buffer.getError().message()));
  return parseJsonObject((*buffer)->getBuffer(), path);
}

/// Reads `size` bytes at `offset` of an open file, all of them or an error.
Error readExactly(llvm::sys::fs::file_t file, StringRef path, uint64_t offset,
                  llvm::MutableArrayRef<char> out) {
  size_t done = 0;
  while (done < out.size()) {
    Expected<size_t> got =
        llvm::sys::fs::readNativeFileSlice(file, out.drop_front(done), offset + done);
    if (!got)
      return fail(llvm::formatv("{0}: cannot read: {1}", path, llvm::toString(got.takeError())));
    if (*got == 0)
      return fail(llvm::formatv("{0}: ended after {1} bytes while reading its header", path,
                                offset + done));
    done += *got;
  }
  return Error::success();
}

/// Reads and checks the header of the safetensors file at `path`; reads no
/// tensor data.
Expected<SafeTensorsHeader> readHeader(StringRef path, uint64_t fileSize) {
  Expected<llvm::sys::fs::file_t> file = llvm::sys::fs::openNativeFileForRead(path);
  if (!file)
    return fail(llvm::formatv("{0}: cannot open: {1}", path, llvm::toString(file.takeError())));
  llvm::scope_exit closeFile([&] { llvm::sys::fs::closeFile(*file); });
  std::vector<char> prefix(std::min<uint64_t>(fileSize, 8));
  if (Error error = readExactly(*file, path, 0, prefix))
    return std::move(error);
  if (prefix.size() == 8) {
    uint64_t declared = llvm::support::endian::read64le(prefix.data());
    // Read what the header declares, within the file and the 100 MiB bound;
    // parseSafeTensorsHeader reports either violation.
    uint64_t want = 8 + std::min(declared, kMaxHeaderBytes);
    want = std::min(want, fileSize);
    prefix.resize(want);
    if (Error error =
            readExactly(*file, path, 8, llvm::MutableArrayRef<char>(prefix).drop_front(8)))
      return std::move(error);
  }
  return parseSafeTensorsHeader(StringRef(prefix.data(), prefix.size()), fileSize, path);
}

/// A shard name from the index must be a plain file name inside the
/// checkpoint's directory.
bool isPlainFileName(StringRef name) {
  return !name.empty() && name.find_first_of(StringRef("/\\\0", 3)) == StringRef::npos &&
         !name.contains("..") && name != ".";
}

} // namespace

StringRef moec::checkpoint::dtypeName(DType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype)
      return info.name;
  return "?";
}

std::optional<DType> moec::checkpoint::parseDType(StringRef name) {
  for (const DTypeInfo &info : kDTypes)
    if (info.name == name)
      return info.dtype;
  return std::nullopt;
}

int64_t moec::checkpoint::dtypeSize(DType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype)
      return info.size;
  return 0;
}

int64_t TensorView::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim; // checked against overflow when the header was read
  return count;
}

//===----------------------------------------------------------------------===//
// The header
//===----------------------------------------------------------------------===//

namespace {

/// Checks one tensor's entry of a header; `dataStart` and `fileSize` bound
/// its offsets.
Expected<TensorEntry> parseTensorEntry(const llvm::json::Value &value, StringRef name,
                                       StringRef file, uint64_t dataStart, uint64_t fileSize) {
  auto bad = [&](const llvm::Twine &message) {
    return fail(llvm::formatv("{0}: tensor '{1}': {2}", file, name, message.str()));
  };
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return bad(llvm::formatv("expected an object, got {0}", kindName(value)));
  for (StringRef key : sortedKeys(*object))
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return bad(llvm::formatv("unknown key '{0}' (dtype, shape, data_offsets)", key));

  TensorEntry entry;
  const llvm::json::Value *dtype = object->get("dtype");
  if (!dtype)
    return bad("missing 'dtype'");
  std::optional<StringRef> dtypeText = dtype->getAsString();
  if (!dtypeText)
    return bad(llvm::formatv("'dtype' must be a string, got {0}", kindName(*dtype)));
  std::optional<DType> parsed = parseDType(*dtypeText);
  if (!parsed)
    return bad(llvm::formatv("unsupported dtype '{0}' (F64, F32, F16, BF16, F8_E4M3, F8_E5M2, "
                             "I64, I32, I16, I8, U8, BOOL)",
                             *dtypeText));
  entry.dtype = *parsed;

  const llvm::json::Value *shapeValue = object->get("shape");
  if (!shapeValue)
    return bad("missing 'shape'");
  const llvm::json::Array *shape = shapeValue->getAsArray();
  if (!shape)
    return bad(llvm::formatv("'shape' must be an array, got {0}", kindName(*shapeValue)));
  // numel · size in uint64, bounded by INT64_MAX (numElements() is int64).
  uint64_t bytes = uint64_t(dtypeSize(entry.dtype));
  uint64_t numel = 1;
  for (auto [index, dimValue] : llvm::enumerate(*shape)) {
    std::optional<int64_t> dim = dimValue.getAsInteger();
    if (!dim)
      return bad(llvm::formatv("shape[{0}] must be an integer", index));
    if (*dim < 0)
      return bad(llvm::formatv("shape[{0}] is negative ({1})", index, *dim));
    entry.shape.push_back(*dim);
    if (numel != 0 && uint64_t(*dim) > uint64_t(INT64_MAX) / numel)
      return bad("the number of elements overflows 64 bits");
    numel *= uint64_t(*dim);
  }
  if (numel != 0 && bytes > uint64_t(INT64_MAX) / numel)
    return bad("the size in bytes overflows 64 bits");
  bytes *= numel;

  const llvm::json::Value *offsetsValue = object->get("data_offsets");
  if (!offsetsValue)
    return bad("missing 'data_offsets'");
  const llvm::json::Array *offsets = offsetsValue->getAsArray();
  if (!offsets || offsets->size() != 2)
    return bad("'data_offsets' must be an array [begin, end]");
  std::optional<uint64_t> begin = (*offsets)[0].getAsUINT64();
  std::optional<uint64_t> end = (*offsets)[1].getAsUINT64();
  if (!begin || !end)
    return bad("'data_offsets' must hold two non-negative integers");
  if (*begin > *end)
    return bad(llvm::formatv("data_offsets [{0}, {1}] end before they begin", *begin, *end));
  if (*end - *begin != bytes)
    return bad(llvm::formatv("data_offsets [{0}, {1}] hold {2} bytes, but {3} {4} elements take "
                             "{5}",
                             *begin, *end, *end - *begin, numel, dtypeName(entry.dtype), bytes));
  if (*end > fileSize - dataStart)
    return bad(llvm::formatv("data_offsets [{0}, {1}] run past the end of the file (its data "
                             "section has {2} bytes)",
                             *begin, *end, fileSize - dataStart));
  entry.begin = dataStart + *begin;
  entry.end = dataStart + *end;
  return entry;
}

} // namespace

Expected<SafeTensorsHeader>
moec::checkpoint::parseSafeTensorsHeader(StringRef prefix, uint64_t fileSize, StringRef file) {
  if (fileSize < 8)
    return fail(llvm::formatv("{0}: {1} bytes, too short for a safetensors file (it starts with "
                              "an 8-byte header length)",
                              file, fileSize));
  if (prefix.size() < 8)
    return fail(llvm::formatv("{0}: the header length was not read", file));
  uint64_t length = llvm::support::endian::read64le(prefix.data());
  if (length > kMaxHeaderBytes)
    return fail(llvm::formatv("{0}: header length {1} exceeds the limit of {2} bytes (100 MiB)",
                              file, length, kMaxHeaderBytes));
  if (length > fileSize - 8)
    return fail(llvm::formatv("{0}: header length {1} runs past the end of the file ({2} bytes)",
                              file, length, fileSize));
  if (prefix.size() < 8 + length)
    return fail(llvm::formatv("{0}: the header was not read whole", file));

  SafeTensorsHeader header;
  header.dataStart = 8 + length;
  Expected<llvm::json::Object> object =
      parseJsonObject(prefix.substr(8, length), (file + " header").str());
  if (!object)
    return object.takeError();

  struct Range {
    uint64_t begin, end;
    StringRef name;
  };
  std::vector<Range> ranges;
  for (StringRef name : sortedKeys(*object)) {
    const llvm::json::Value &value = *object->get(name);
    if (name == "__metadata__") {
      if (value.kind() == llvm::json::Value::Null)
        continue;
      const llvm::json::Object *metadata = value.getAsObject();
      if (!metadata)
        return fail(llvm::formatv("{0}: '__metadata__' must be an object of strings, got {1}", file,
                                  kindName(value)));
      for (StringRef key : sortedKeys(*metadata)) {
        std::optional<StringRef> text = metadata->get(key)->getAsString();
        if (!text)
          return fail(llvm::formatv("{0}: '__metadata__.{1}' must be a string, got {2}", file, key,
                                    kindName(*metadata->get(key))));
        header.metadata.emplace(key.str(), text->str());
      }
      continue;
    }
    if (name.empty())
      return fail(llvm::formatv("{0}: a tensor has an empty name", file));
    Expected<TensorEntry> entry = parseTensorEntry(value, name, file, header.dataStart, fileSize);
    if (!entry)
      return entry.takeError();
    if (entry->end > entry->begin)
      ranges.push_back({entry->begin, entry->end, name});
    header.tensors.emplace(name.str(), std::move(*entry));
  }

  // No two tensors may share a byte (empty tensors share none).
  llvm::sort(ranges, [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
  });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      return fail(llvm::formatv(
          "{0}: tensors '{1}' and '{2}' overlap (data_offsets [{3}, {4}] "
          "and [{5}, {6}])",
          file, ranges[i - 1].name, ranges[i].name, ranges[i - 1].begin - header.dataStart,
          ranges[i - 1].end - header.dataStart, ranges[i].begin - header.dataStart,
          ranges[i].end - header.dataStart));
  return header;
}

//===----------------------------------------------------------------------===//
// The checkpoint
//===----------------------------------------------------------------------===//

Checkpoint::~Checkpoint() = default;

Error Checkpoint::addShard(std::string fileName, std::string path, uint64_t size,
                           SafeTensorsHeader header,
                           const llvm::StringMap<std::string> *weightMap) {
  unsigned index = shards_.size();
  for (auto &[name, entry] : header.tensors) {
    if (weightMap) {
      auto listed = weightMap->find(name);
      if (listed == weightMap->end())
        return fail(
            llvm::formatv("{0}: tensor '{1}' is not in {2}'s weight_map", path, name, kIndexFile));
      if (listed->second != fileName)
        return fail(llvm::formatv("{0}: tensor '{1}' is in this shard, but {2}'s weight_map puts "
                                  "it in '{3}'",
                                  path, name, kIndexFile, listed->second));
    }
    if (tensors_.count(name))
      return fail(llvm::formatv("{0}: tensor '{1}' is also in '{2}'", path, name,
                                shards_[tensors_[name].shard].fileName));
    totalBytes_ += entry.end - entry.begin;
    tensors_[name] = Located{std::move(entry), index};
  }
  Shard shard;
  shard.fileName = std::move(fileName);
  shard.path = std::move(path);
  shard.size = size;
  shard.metadata = std::move(header.metadata);
  shards_.push_back(std::move(shard));
  return Error::success();
}

Expected<llvm::json::Object> moec::checkpoint::readConfigFile(StringRef dir) {
  if (!llvm::sys::fs::is_directory(dir))
    return fail(llvm::formatv("{0}: not a checkpoint directory", dir));
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "config.json");
  return readJsonFile(path);
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::open(StringRef dir) {
  auto join = [&](StringRef name) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());

  if (!llvm::sys::fs::is_directory(dir))
    return fail(llvm::formatv("{0}: not a checkpoint directory", dir));
  Expected<llvm::json::Object> config = readJsonFile(join("config.json"));
  if (!config)
    return config.takeError();
  checkpoint->config_ = std::move(*config);

  std::string single = join(kSingleFile);
  if (llvm::sys::fs::exists(single)) {
    Expected<uint64_t> size = regularFileSize(single);
    if (!size)
      return size.takeError();
    Expected<SafeTensorsHeader> header = readHeader(single, *size);
    if (!header)
      return header.takeError();
    if (Error error =
            checkpoint->addShard(kSingleFile.str(), single, *size, std::move(*header), nullptr))
      return std::move(error);
    return checkpoint;
  }

  std::string indexPath = join(kIndexFile);
  if (!llvm::sys::fs::exists(indexPath))
    return fail(llvm::formatv("{0}: holds neither {1} nor {2} (a config.json alone compiles "
                              "with --random-weights, weights filled at load)",
                              dir, kSingleFile, kIndexFile));
  Expected<llvm::json::Object> index = readJsonFile(indexPath);
  if (!index)
    return index.takeError();
  if (const llvm::json::Value *metadata = index->get("metadata"))
    if (metadata->kind() != llvm::json::Value::Null && !metadata->getAsObject())
      return fail(llvm::formatv("{0}: 'metadata' must be an object, got {1}", indexPath,
                                kindName(*metadata)));
  const llvm::json::Value *weightMapValue = index->get("weight_map");
  if (!weightMapValue)
    return fail(llvm::formatv("{0}: missing 'weight_map'", indexPath));
  const llvm::json::Object *weightMapObject = weightMapValue->getAsObject();
  if (!weightMapObject)
    return fail(llvm::formatv("{0}: 'weight_map' must be an object, got {1}", indexPath,
                              kindName(*weightMapValue)));
  if (weightMapObject->empty())
    return fail(llvm::formatv("{0}: 'weight_map' names no tensors", indexPath));

  llvm::StringMap<std::string> weightMap;
  std::vector<std::string> shardOrder;
  llvm::StringSet<> seenShards;
  for (StringRef name : sortedKeys(*weightMapObject)) {
    const llvm::json::Value &value = *weightMapObject->get(name);
    std::optional<StringRef> file = value.getAsString();
    if (!file)
      return fail(llvm::formatv("{0}: weight_map['{1}'] must be a file name, got {2}", indexPath,
                                name, kindName(value)));
    if (!isPlainFileName(*file))
      return fail(llvm::formatv("{0}: weight_map['{1}'] = '{2}' is not a plain file name in the "
                                "checkpoint's directory (no '/', '\\', '..')",
                                indexPath, name, *file));
    if (name.empty())
      return fail(llvm::formatv("{0}: weight_map has an empty tensor name", indexPath));
    weightMap[name] = file->str();
    if (seenShards.insert(*file).second)
      shardOrder.push_back(file->str());
  }

  for (const std::string &file : shardOrder) {
    std::string path = join(file);
    Expected<uint64_t> size = regularFileSize(path);
    if (!size)
      return fail(llvm::formatv("{0} (a shard named in {1})", llvm::toString(size.takeError()),
                                kIndexFile));
    Expected<SafeTensorsHeader> header = readHeader(path, *size);
    if (!header)
      return header.takeError();
    if (Error error = checkpoint->addShard(file, path, *size, std::move(*header), &weightMap))
      return std::move(error);
  }
  // Every tensor the map lists must be in its shard.
  for (StringRef name : sortedKeys(*weightMapObject))
    if (!checkpoint->tensors_.count(name))
      return fail(llvm::formatv("{0}: weight_map puts tensor '{1}' in '{2}', whose header does "
                                "not hold it",
                                indexPath, name, weightMap[name]));
  return checkpoint;
}

Expected<std::unique_ptr<Checkpoint>>
Checkpoint::fromBuffer(std::unique_ptr<llvm::MemoryBuffer> file, llvm::json::Object config) {
  std::string name = file->getBufferIdentifier().str();
  if (name.empty())
    name = kSingleFile.str();
  StringRef bytes = file->getBuffer();
  Expected<SafeTensorsHeader> header = parseSafeTensorsHeader(bytes, bytes.size(), name);
  if (!header)
    return header.takeError();
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->config_ = std::move(config);
  if (Error error = checkpoint->addShard(name, name, bytes.size(), std::move(*header), nullptr))
    return std::move(error);
  checkpoint->shards_.front().mapped = std::move(file);
  return checkpoint;
}

bool Checkpoint::has(StringRef name) const { return tensors_.count(name); }

Expected<TensorView> Checkpoint::tensor(StringRef name) const {
  auto found = tensors_.find(name);
  if (found == tensors_.end())
    return fail(
        llvm::formatv("tensor '{0}': not in the checkpoint ({1})", name,
                      shards_.size() == 1 ? shards_.front().path : std::string(kIndexFile)));
  const Located &located = found->second;
  const Shard &shard = shards_[located.shard];
  const llvm::MemoryBuffer *mapped;
  {
    std::lock_guard<std::mutex> lock(mapMutex_);
    if (!shard.mapped) {
      auto buffer = llvm::MemoryBuffer::getFile(shard.path, /*IsText=*/false,
                                                /*RequiresNullTerminator=*/false);
      if (!buffer)
        return fail(llvm::formatv("{0}: cannot map for tensor '{1}': {2}", shard.path, name,
                                  buffer.getError().message()));
      if ((*buffer)->getBufferSize() != shard.size)
        return fail(llvm::formatv("{0}: has {1} bytes, but {2} when the checkpoint was opened "
                                  "(tensor '{3}')",
                                  shard.path, (*buffer)->getBufferSize(), shard.size, name));
      shard.mapped = std::move(*buffer);
    }
    mapped = shard.mapped.get();
  }
  TensorView view;
  view.name = name.str();
  view.dtype = located.entry.dtype;
  view.shape = located.entry.shape;
  view.bytes = llvm::ArrayRef<char>(mapped->getBufferStart() + located.entry.begin,
                                    located.entry.end - located.entry.begin);
  view.file = shard.fileName;
  return view;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto &entry : tensors_)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> files;
  for (const Shard &shard : shards_)
    files.push_back(shard.fileName);
  return files;
}

const std::map<std::string, std::string> &Checkpoint::metadata(StringRef file) const {
  static const std::map<std::string, std::string> empty;
  for (const Shard &shard : shards_)
    if (shard.fileName == file)
      return shard.metadata;
  return empty;
}
