//===- CheckpointReaderTest.cpp - safetensors checkpoints -------------------===//
//
// Safetensors files written by the test itself: good single-file and sharded
// checkpoints read back byte for byte, and each broken variant the reader
// must refuse with an error naming the file (and the tensor or key).
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/Checkpoint/SafeTensors.h"

#include "CheckpointTestUtil.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace moec::checkpoint;

namespace {

/// One tensor to write: its header entry is made from the fields.
struct Spec {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string data; // exactly the tensor's bytes
};

std::string le64(uint64_t value) {
  char bytes[8];
  llvm::support::endian::write64le(bytes, value);
  return std::string(bytes, 8);
}

/// A safetensors file: 8-byte length, `header` padded with spaces to a
/// multiple of 8 (as safetensors does), then `data`.
std::string fileWithHeader(const std::string &header, const std::string &data) {
  std::string padded = header;
  while (padded.size() % 8)
    padded += ' ';
  return le64(padded.size()) + padded + data;
}

/// A valid file holding `specs` back to back, in order.
std::string makeFile(const std::vector<Spec> &specs, const std::string &metadata = "") {
  std::string header = "{", data;
  if (!metadata.empty())
    header += "\"__metadata__\":" + metadata;
  for (const Spec &spec : specs) {
    if (header.size() > 1)
      header += ",";
    header += "\"" + spec.name + "\":{\"dtype\":\"" + spec.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < spec.shape.size(); ++i) {
      if (i)
        header += ",";
      header += std::to_string(spec.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + spec.data.size()) + "]}";
    data += spec.data;
  }
  return fileWithHeader(header + "}", data);
}

std::string floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * 4, '\0');
  size_t i = 0;
  for (float value : values)
    std::memcpy(&bytes[4 * i++], &value, 4);
  return bytes;
}

std::string errorText(llvm::Error error) { return llvm::toString(std::move(error)); }

/// The error of reading tensor `name`.
std::string tensorError(const Checkpoint &checkpoint, llvm::StringRef name) {
  auto view = checkpoint.tensor(name);
  if (view)
    return "<no error>";
  return errorText(view.takeError());
}

/// The error of parsing `file` (whole, in memory) as a safetensors file.
std::string parseError(const std::string &file, llvm::StringRef name = "t.safetensors") {
  auto header = parseSafeTensorsHeader(file, file.size(), name);
  if (header)
    return "<no error>";
  return errorText(header.takeError());
}

class CheckpointDir : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("moec-checkpoint-test", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<256> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }
  void write(llvm::StringRef name, const std::string &bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream out(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    out << bytes;
  }
  void writeConfig() { write("config.json", R"({"model_type": "mixtral", "hidden_size": 8})"); }
  /// The error open() gives for this directory.
  std::string openError() {
    auto checkpoint = Checkpoint::open(dir);
    if (checkpoint)
      return "<no error>";
    return errorText(checkpoint.takeError());
  }

  llvm::SmallString<128> dir;
};

//===----------------------------------------------------------------------===//
// Good checkpoints
//===----------------------------------------------------------------------===//

TEST_F(CheckpointDir, SingleFile) {
  writeConfig();
  std::string bf16 = "\x01\x02\x03\x04\x05\x06\x07\x08";
  write("model.safetensors", makeFile({{"w.weight", "F32", {2, 3}, floats({1, 2, 3, 4, 5, 6})},
                                       {"a.bias", "BF16", {4}, bf16},
                                       {"scalar", "I64", {}, std::string("\x2a\0\0\0\0\0\0\0", 8)},
                                       {"empty", "BOOL", {0, 5}, ""}},
                                      R"({"format": "pt"})"));
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  Checkpoint &c = **checkpoint;

  EXPECT_EQ(c.config().getInteger("hidden_size"), 8);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a.bias", "empty", "scalar", "w.weight"}));
  EXPECT_TRUE(c.has("w.weight"));
  EXPECT_FALSE(c.has("w"));
  EXPECT_EQ(c.totalBytes(), 24u + 8u + 8u);
  EXPECT_EQ(c.files(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(c.metadata("model.safetensors").at("format"), "pt");

  auto w = c.tensor("w.weight");
  ASSERT_TRUE(bool(w)) << errorText(w.takeError());
  EXPECT_EQ(w->name, "w.weight");
  EXPECT_EQ(w->dtype, DType::F32);
  EXPECT_EQ(w->shape, (llvm::SmallVector<int64_t, 4>{2, 3}));
  EXPECT_EQ(w->numElements(), 6);
  EXPECT_EQ(w->file, "model.safetensors");
  ASSERT_EQ(w->bytes.size(), 24u);
  EXPECT_EQ(std::string(w->bytes.data(), 24), floats({1, 2, 3, 4, 5, 6}));

  auto bias = c.tensor("a.bias");
  ASSERT_TRUE(bool(bias));
  EXPECT_EQ(bias->dtype, DType::BF16);
  EXPECT_EQ(std::string(bias->bytes.data(), bias->bytes.size()), bf16);

  auto scalar = c.tensor("scalar");
  ASSERT_TRUE(bool(scalar));
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->numElements(), 1);
  int64_t value;
  std::memcpy(&value, scalar->bytes.data(), 8);
  EXPECT_EQ(value, 42);

  auto empty = c.tensor("empty");
  ASSERT_TRUE(bool(empty));
  EXPECT_EQ(empty->numElements(), 0);
  EXPECT_TRUE(empty->bytes.empty());

  // Mapped once: a second view points at the same bytes.
  auto again = c.tensor("w.weight");
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(again->bytes.data(), w->bytes.data());
}

TEST_F(CheckpointDir, Sharded) {
  writeConfig();
  write("model-00001-of-00002.safetensors",
        makeFile({{"layers.0.w", "F32", {2}, floats({1, 2})},
                  {"layers.0.b", "F16", {1}, std::string("\x00\x3c", 2)}}));
  write("model-00002-of-00002.safetensors",
        makeFile({{"layers.1.w", "F8_E4M3", {3}, "abc"}, {"lm_head", "I8", {2}, "xy"}}));
  write("model.safetensors.index.json", R"({
    "metadata": {"total_size": 15},
    "weight_map": {
      "layers.0.w": "model-00001-of-00002.safetensors",
      "layers.0.b": "model-00001-of-00002.safetensors",
      "layers.1.w": "model-00002-of-00002.safetensors",
      "lm_head": "model-00002-of-00002.safetensors"}})");
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  Checkpoint &c = **checkpoint;
  EXPECT_EQ(c.names(),
            (std::vector<std::string>{"layers.0.b", "layers.0.w", "layers.1.w", "lm_head"}));
  EXPECT_EQ(c.totalBytes(), 8u + 2u + 3u + 2u);
  EXPECT_EQ(c.files().size(), 2u);

  auto w1 = c.tensor("layers.1.w");
  ASSERT_TRUE(bool(w1)) << errorText(w1.takeError());
  EXPECT_EQ(w1->dtype, DType::F8E4M3);
  EXPECT_EQ(w1->file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(std::string(w1->bytes.data(), w1->bytes.size()), "abc");
  auto w0 = c.tensor("layers.0.w");
  ASSERT_TRUE(bool(w0));
  EXPECT_EQ(w0->file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(std::string(w0->bytes.data(), w0->bytes.size()), floats({1, 2}));
  auto head = c.tensor("lm_head");
  ASSERT_TRUE(bool(head));
  EXPECT_EQ(head->dtype, DType::I8);
  EXPECT_EQ(std::string(head->bytes.data(), 2), "xy");
}

TEST_F(CheckpointDir, SingleFileWinsOverIndex) {
  writeConfig();
  write("model.safetensors", makeFile({{"x", "U8", {1}, "z"}}));
  write("model.safetensors.index.json", R"({"weight_map": {"y": "missing.safetensors"}})");
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  EXPECT_EQ((*checkpoint)->names(), std::vector<std::string>{"x"});
}

TEST(SafeTensors, EveryDType) {
  struct Case {
    const char *name;
    DType dtype;
    int64_t size;
  } cases[] = {
      {"F64", DType::F64, 8},   {"F32", DType::F32, 4},        {"F16", DType::F16, 2},
      {"BF16", DType::BF16, 2}, {"F8_E4M3", DType::F8E4M3, 1}, {"F8_E5M2", DType::F8E5M2, 1},
      {"I64", DType::I64, 8},   {"I32", DType::I32, 4},        {"I16", DType::I16, 2},
      {"I8", DType::I8, 1},     {"U8", DType::U8, 1},          {"BOOL", DType::Bool, 1}};
  for (const Case &c : cases) {
    EXPECT_EQ(parseDType(c.name), c.dtype) << c.name;
    EXPECT_EQ(dtypeName(c.dtype), c.name);
    EXPECT_EQ(dtypeSize(c.dtype), c.size) << c.name;
    std::string file = makeFile({{"t", c.name, {3}, std::string(3 * c.size, '\x11')}});
    auto checkpoint = Checkpoint::fromBuffer(llvm::MemoryBuffer::getMemBufferCopy(file, "m"));
    ASSERT_TRUE(bool(checkpoint)) << c.name << ": " << errorText(checkpoint.takeError());
    auto view = (*checkpoint)->tensor("t");
    ASSERT_TRUE(bool(view));
    EXPECT_EQ(view->dtype, c.dtype);
    EXPECT_EQ(int64_t(view->bytes.size()), 3 * c.size);
  }
  EXPECT_FALSE(parseDType("U16"));
  EXPECT_FALSE(parseDType("F8_E8M0"));
  EXPECT_FALSE(parseDType("f32"));
}

TEST(SafeTensors, FromBuffer) {
  std::string file = makeFile({{"a", "F32", {1}, floats({7})}, {"b", "F32", {2}, floats({8, 9})}});
  auto checkpoint =
      Checkpoint::fromBuffer(llvm::MemoryBuffer::getMemBufferCopy(file, "mem.safetensors"));
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  auto b = (*checkpoint)->tensor("b");
  ASSERT_TRUE(bool(b));
  EXPECT_EQ(b->file, "mem.safetensors");
  EXPECT_EQ(std::string(b->bytes.data(), 8), floats({8, 9}));
  std::string message = tensorError(**checkpoint, "c");
  EXPECT_HAS(message, "tensor 'c'");
  EXPECT_HAS(message, "mem.safetensors");
}

TEST(SafeTensors, TrailingDataAndPaddingAccepted) {
  // Data past the last tensor and header padding are not errors.
  std::string file = makeFile({{"a", "U8", {2}, "hi"}}) + "trailing";
  EXPECT_EQ(parseError(file), "<no error>");
  auto header = parseSafeTensorsHeader(file, file.size(), "t");
  ASSERT_TRUE(bool(header));
  EXPECT_EQ(header->dataStart % 8, 0u);
  EXPECT_EQ(header->tensors.at("a").end - header->tensors.at("a").begin, 2u);
}

//===----------------------------------------------------------------------===//
// Broken files: each error names the file and the tensor
//===----------------------------------------------------------------------===//

/// A header holding one tensor entry `entry` (JSON text) and 64 data bytes.
std::string oneEntry(const std::string &entry, const std::string &name = "w") {
  return fileWithHeader("{\"" + name + "\":" + entry + "}", std::string(64, '\0'));
}

struct Broken {
  const char *what;
  std::string file;
  const char *expected; // a part of the message
};

TEST(SafeTensors, BrokenHeaders) {
  std::string nested = "{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}";
  std::vector<Broken> cases = {
      {"empty file", "", "0 bytes, too short"},
      {"short file", "abc", "3 bytes, too short"},
      {"huge header length", le64(200ull << 20) + std::string(64, ' '),
       "header length 209715200 exceeds the limit"},
      {"header past the end", le64(1000) + "{}",
       "header length 1000 runs past the end of the file"},
      {"not JSON", fileWithHeader("{\"w\": ", ""), "not valid JSON"},
      {"not an object", fileWithHeader("[1, 2]", ""), "expected a JSON object, got an array"},
      {"too deep", fileWithHeader(nested, ""), "nested deeper than 64 levels"},
      {"entry not an object", oneEntry("[]"), "tensor 'w': expected an object, got an array"},
      {"unknown dtype", oneEntry(R"({"dtype":"U16","shape":[2],"data_offsets":[0,4]})"),
       "tensor 'w': unsupported dtype 'U16'"},
      {"dtype not a string", oneEntry(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"),
       "tensor 'w': 'dtype' must be a string, got a number"},
      {"missing dtype", oneEntry(R"({"shape":[2],"data_offsets":[0,8]})"),
       "tensor 'w': missing 'dtype'"},
      {"missing shape", oneEntry(R"({"dtype":"F32","data_offsets":[0,8]})"),
       "tensor 'w': missing 'shape'"},
      {"missing offsets", oneEntry(R"({"dtype":"F32","shape":[2]})"),
       "tensor 'w': missing 'data_offsets'"},
      {"unknown key", oneEntry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"),
       "tensor 'w': unknown key 'x'"},
      {"negative dimension", oneEntry(R"({"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]})"),
       "tensor 'w': shape[1] is negative (-3)"},
      {"fractional dimension", oneEntry(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"),
       "tensor 'w': shape[0] must be an integer"},
      {"shape not an array", oneEntry(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"),
       "tensor 'w': 'shape' must be an array"},
      {"element count overflow",
       oneEntry(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
       "tensor 'w': the number of elements overflows 64 bits"},
      {"byte count overflow",
       oneEntry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]})"),
       "tensor 'w': the size in bytes overflows 64 bits"},
      {"size mismatch", oneEntry(R"({"dtype":"F32","shape":[6],"data_offsets":[0,8]})"),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes, but 6 F32 elements take 24"},
      {"end before begin", oneEntry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"),
       "tensor 'w': data_offsets [8, 0] end before they begin"},
      {"offsets past the file", oneEntry(R"({"dtype":"F32","shape":[4],"data_offsets":[56,72]})"),
       "tensor 'w': data_offsets [56, 72] run past the end of the file"},
      {"negative offset", oneEntry(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"),
       "tensor 'w': 'data_offsets' must hold two non-negative integers"},
      {"three offsets", oneEntry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,16]})"),
       "tensor 'w': 'data_offsets' must be an array [begin, end]"},
      {"overlap",
       fileWithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      std::string(16, '\0')),
       "tensors 'a' and 'b' overlap (data_offsets [0, 8] and [4, 12])"},
      {"metadata not strings", fileWithHeader(R"({"__metadata__":{"format":1}})", ""),
       "'__metadata__.format' must be a string, got a number"},
      {"metadata not an object", fileWithHeader(R"({"__metadata__":[]})", ""),
       "'__metadata__' must be an object of strings"},
      {"empty name", oneEntry(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})", ""),
       "a tensor has an empty name"},
  };
  for (const Broken &c : cases) {
    std::string message = parseError(c.file, "bad.safetensors");
    EXPECT_HAS(message, c.expected) << " (" << c.what << ")";
    EXPECT_EQ(message.rfind("bad.safetensors", 0), 0u) << c.what << ": " << message;
    // The in-memory entry point gives the same error.
    auto checkpoint =
        Checkpoint::fromBuffer(llvm::MemoryBuffer::getMemBufferCopy(c.file, "bad.safetensors"));
    ASSERT_FALSE(bool(checkpoint)) << c.what;
    EXPECT_EQ(errorText(checkpoint.takeError()), message) << c.what;
  }
}

TEST(SafeTensors, EmptyTensorsMayShareAnOffset) {
  std::string file = fileWithHeader(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                    std::string(8, '\0'));
  EXPECT_EQ(parseError(file), "<no error>");
}

TEST(SafeTensors, DuplicateHeaderKey) {
  std::string file = fileWithHeader(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    "xy");
  std::string message = parseError(file, "dup.safetensors");
  EXPECT_HAS(message, "dup.safetensors header: key 'a' appears twice");
  // Spelled differently, the same key.
  file = fileWithHeader(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("\u0061":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                        "xy");
  message = parseError(file, "dup.safetensors");
  EXPECT_HAS(message, "key 'a' appears twice");
  // Inside an entry too.
  file =
      fileWithHeader(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"shape":[2]}})", "xy");
  message = parseError(file, "dup.safetensors");
  EXPECT_HAS(message, "key 'shape' appears twice");
  // Equal strings as values are not keys.
  file = fileWithHeader(R"({"__metadata__":{"x":"a","y":"a"}})", "");
  EXPECT_EQ(parseError(file), "<no error>");
}

//===----------------------------------------------------------------------===//
// Broken directories and indexes
//===----------------------------------------------------------------------===//

TEST_F(CheckpointDir, MissingConfig) {
  write("model.safetensors", makeFile({{"x", "U8", {1}, "z"}}));
  std::string message = openError();
  EXPECT_HAS(message, "config.json: cannot open");
}

TEST_F(CheckpointDir, ConfigNotAnObject) {
  write("config.json", "[1]");
  write("model.safetensors", makeFile({{"x", "U8", {1}, "z"}}));
  std::string message = openError();
  EXPECT_HAS(message, "config.json: expected a JSON object, got an array");
}

TEST_F(CheckpointDir, ConfigNotJson) {
  write("config.json", "{\"model_type\": ");
  std::string message = openError();
  EXPECT_HAS(message, "config.json: not valid JSON");
}

TEST_F(CheckpointDir, ConfigDuplicateKey) {
  write("config.json", R"({"model_type": "mixtral", "model_type": "qwen3_moe"})");
  write("model.safetensors", makeFile({{"x", "U8", {1}, "z"}}));
  std::string message = openError();
  EXPECT_HAS(message, "config.json: key 'model_type' appears twice in one object");
}

TEST_F(CheckpointDir, NoWeights) {
  writeConfig();
  std::string message = openError();
  EXPECT_HAS(message, "holds neither model.safetensors nor model.safetensors.index.json");
}

TEST_F(CheckpointDir, NotADirectory) {
  auto checkpoint = Checkpoint::open(path("nothing-here"));
  ASSERT_FALSE(bool(checkpoint));
  std::string message = errorText(checkpoint.takeError());
  EXPECT_HAS(message, "not a checkpoint directory");
}

TEST_F(CheckpointDir, BrokenSingleFileNamesIt) {
  writeConfig();
  write("model.safetensors", oneEntry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"));
  std::string message = openError();
  EXPECT_HAS(message, "model.safetensors: tensor 'w': data_offsets [0, 8] hold 8 bytes, but 3 "
                      "F32 elements take 12");
  write("model.safetensors", "1234567");
  message = openError();
  EXPECT_HAS(message, "model.safetensors: 7 bytes, too short");
}

struct IndexCase {
  const char *what;
  const char *index;
  const char *expected;
};

TEST_F(CheckpointDir, BrokenIndex) {
  writeConfig();
  write("a.safetensors", makeFile({{"x", "U8", {1}, "1"}, {"y", "U8", {1}, "2"}}));
  write("b.safetensors", makeFile({{"z", "U8", {1}, "3"}}));
  write("bad.safetensors", "12345");
  IndexCase cases[] = {
      {"not JSON", "{", "model.safetensors.index.json: not valid JSON"},
      {"no weight_map", R"({"metadata": {}})",
       "model.safetensors.index.json: missing 'weight_map'"},
      {"weight_map not an object", R"({"weight_map": []})",
       "'weight_map' must be an object, got an array"},
      {"empty weight_map", R"({"weight_map": {}})", "'weight_map' names no tensors"},
      {"metadata not an object", R"({"metadata": 3, "weight_map": {"x": "a.safetensors"}})",
       "'metadata' must be an object, got a number"},
      {"tensor mapped twice", R"({"weight_map": {"x": "a.safetensors", "x": "b.safetensors"}})",
       "model.safetensors.index.json: key 'x' appears twice in one object"},
      {"file not a string", R"({"weight_map": {"x": 1}})",
       "weight_map['x'] must be a file name, got a number"},
      {"parent directory", R"({"weight_map": {"x": "../a.safetensors"}})",
       "weight_map['x'] = '../a.safetensors' is not a plain file name"},
      {"subdirectory", R"({"weight_map": {"x": "sub/a.safetensors"}})",
       "weight_map['x'] = 'sub/a.safetensors' is not a plain file name"},
      {"absolute path", R"({"weight_map": {"x": "/etc/passwd"}})", "is not a plain file name"},
      {"dot dot", R"({"weight_map": {"x": ".."}})", "is not a plain file name"},
      {"empty file name", R"({"weight_map": {"x": ""}})", "is not a plain file name"},
      {"missing shard", R"({"weight_map": {"x": "gone.safetensors"}})",
       "gone.safetensors: cannot open"},
      {"broken shard", R"({"weight_map": {"x": "bad.safetensors"}})",
       "bad.safetensors: 5 bytes, too short"},
      {"mapped tensor not in its shard",
       R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "a.safetensors"}})",
       "weight_map puts tensor 'z' in 'a.safetensors', whose header does not hold it"},
      {"shard tensor not in the map", R"({"weight_map": {"x": "a.safetensors"}})",
       "a.safetensors: tensor 'y' is not in model.safetensors.index.json's weight_map"},
      {"shard tensor mapped elsewhere",
       R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"}})",
       "a.safetensors: tensor 'y' is in this shard, but model.safetensors.index.json's weight_map "
       "puts it in 'b.safetensors'"},
  };
  for (const IndexCase &c : cases) {
    write("model.safetensors.index.json", c.index);
    std::string message = openError();
    EXPECT_HAS(message, c.expected) << " (" << c.what << ")";
  }
}

TEST_F(CheckpointDir, ShardChangedAfterOpen) {
  writeConfig();
  write("model.safetensors", makeFile({{"x", "F32", {2}, floats({1, 2})}}));
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  write("model.safetensors", "short");
  std::string message = tensorError(**checkpoint, "x");
  EXPECT_HAS(message, "model.safetensors: has 5 bytes");
  EXPECT_HAS(message, "tensor 'x'");
}

TEST_F(CheckpointDir, ShardRemovedAfterOpen) {
  writeConfig();
  write("model.safetensors", makeFile({{"x", "F32", {2}, floats({1, 2})}}));
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
  llvm::sys::fs::remove(path("model.safetensors"));
  std::string message = tensorError(**checkpoint, "x");
  EXPECT_HAS(message, "model.safetensors: cannot map for tensor 'x'");
}

//===----------------------------------------------------------------------===//
// The fixtures' checkpoints (test/fixtures/models/*/checkpoint*)
//===----------------------------------------------------------------------===//

TEST(Fixtures, EveryTensorReads) {
  std::vector<std::string> dirs = test::fixtureCheckpoints();
  if (dirs.empty())
    GTEST_SKIP() << "no checkpoints under test/fixtures/models";
  for (const std::string &dir : dirs) {
    auto checkpoint = Checkpoint::open(dir);
    ASSERT_TRUE(bool(checkpoint)) << errorText(checkpoint.takeError());
    uint64_t total = 0;
    for (const std::string &name : (*checkpoint)->names()) {
      auto view = (*checkpoint)->tensor(name);
      ASSERT_TRUE(bool(view)) << errorText(view.takeError());
      EXPECT_EQ(int64_t(view->bytes.size()), view->numElements() * dtypeSize(view->dtype));
      total += view->bytes.size();
    }
    EXPECT_EQ(total, (*checkpoint)->totalBytes()) << dir;
    EXPECT_FALSE((*checkpoint)->names().empty()) << dir;
  }
}

} // namespace
