//===- NpzTest.cpp - the .npy/.npz reader and writer ------------------------===//

#include "moec/runtime/Npz.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <sys/resource.h>

using namespace moec::rt;

namespace {

std::vector<std::byte> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> bytes(chars.size());
  if (!chars.empty()) // a missing file: no bytes, and data() may be null
    std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

std::string dataPath(const std::string &name) { return std::string(MOEC_TEST_DATA_DIR) + "/" + name; }

float halfToFloat(uint16_t h) {
  int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

double elementAsDouble(const HostTensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::F16: return halfToFloat(t.dataAs<uint16_t>()[i]);
  case DType::F32: return t.dataAs<float>()[i];
  case DType::F64: return t.dataAs<double>()[i];
  case DType::I32: return t.dataAs<int32_t>()[i];
  case DType::I64: return static_cast<double>(t.dataAs<int64_t>()[i]);
  case DType::Bool:
  case DType::U8: return t.dataAs<uint8_t>()[i];
  default: ADD_FAILURE() << "unexpected dtype"; return 0;
  }
}

/// numpy-expected.txt: "name descr dims... : values..." per line, written by
/// the script that wrote the .npz files.
void expectMatchesNumpy(const TensorMap &tensors) {
  std::ifstream in(dataPath("numpy-expected.txt"));
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream fields(line);
    std::string name, descr, token;
    fields >> name >> descr;
    std::vector<int64_t> shape;
    while (fields >> token && token != ":")
      if (token != "-")
        shape.push_back(std::stoll(token));
    std::vector<double> values;
    while (fields >> token)
      values.push_back(std::stod(token));
    auto it = tensors.find(name);
    ASSERT_NE(it, tensors.end()) << name;
    EXPECT_EQ(it->second.shape(), shape) << name;
    ASSERT_EQ(it->second.numElements(), static_cast<int64_t>(values.size())) << name;
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(elementAsDouble(it->second, i), values[i]) << name << "[" << i << "]";
  }
  EXPECT_EQ(lines, tensors.size());
}

HostTensor randomTensor(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  HostTensor t(dtype, std::move(shape));
  auto *bytes = reinterpret_cast<uint8_t *>(t.data());
  for (size_t i = 0; i < t.sizeInBytes(); ++i)
    bytes[i] = static_cast<uint8_t>(rng());
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.sizeInBytes(); ++i)
      bytes[i] &= 1;
  return t;
}

std::filesystem::path scratchDir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("moec-npz-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Npz, ReadsNumpySavez) {
  TensorMap tensors;
  Status status = readNpz(dataPath("numpy-stored.npz"), tensors);
  ASSERT_TRUE(status.isOk()) << status.message();
  expectMatchesNumpy(tensors);
}

TEST(Npz, ReadsNumpySavezCompressed) {
  TensorMap tensors;
  Status status = readNpz(dataPath("numpy-deflated.npz"), tensors);
  ASSERT_TRUE(status.isOk()) << status.message();
  expectMatchesNumpy(tensors);
}

TEST(Npz, RoundTripsEveryDtypeAndRank) {
  std::mt19937 rng(1234);
  TensorMap written;
  written["f32"] = randomTensor(DType::F32, {7, 3}, rng);
  written["f64"] = randomTensor(DType::F64, {2, 3, 4}, rng);
  written["f16"] = randomTensor(DType::F16, {5}, rng);
  written["i8"] = randomTensor(DType::I8, {4, 1}, rng);
  written["i32"] = randomTensor(DType::I32, {}, rng);
  written["i64"] = randomTensor(DType::I64, {3, 2}, rng);
  written["u8"] = randomTensor(DType::U8, {9}, rng);
  written["b"] = randomTensor(DType::Bool, {2, 2}, rng);
  written["empty"] = randomTensor(DType::F32, {0, 5}, rng);
  std::string path = (scratchDir() / "roundtrip.npz").string();
  Status status = writeNpz(path, written);
  ASSERT_TRUE(status.isOk()) << status.message();
  TensorMap read;
  status = readNpz(path, read);
  ASSERT_TRUE(status.isOk()) << status.message();
  ASSERT_EQ(read.size(), written.size());
  for (const auto &[name, tensor] : written) {
    const HostTensor &back = read.at(name);
    EXPECT_EQ(back.dtype(), tensor.dtype()) << name;
    EXPECT_EQ(back.shape(), tensor.shape()) << name;
    ASSERT_EQ(back.sizeInBytes(), tensor.sizeInBytes()) << name;
    EXPECT_EQ(std::memcmp(back.data(), tensor.data(), tensor.sizeInBytes()), 0) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(back.data()) % 64, 0u) << name;
  }
  std::filesystem::remove_all(scratchDir());
}

TEST(Npz, WriteFailureLeavesNoFile) {
  std::mt19937 rng(5);
  TensorMap tensors;
  tensors["x"] = randomTensor(DType::F32, {2}, rng);
  std::string path = (scratchDir() / "missing-dir" / "out.npz").string();
  Status status = writeNpz(path, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("missing-dir/out.npz"), std::string::npos) << status.message();
  EXPECT_FALSE(std::filesystem::exists(path));

  // A tensor .npy cannot hold is refused before anything reaches the target.
  tensors["bf16"] = randomTensor(DType::BF16, {2}, rng);
  path = (scratchDir() / "bf16.npz").string();
  status = writeNpz(path, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("'bf16'"), std::string::npos) << status.message();
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto &entry : std::filesystem::directory_iterator(scratchDir()))
    ADD_FAILURE() << "left behind: " << entry.path();
  std::filesystem::remove_all(scratchDir());
}

struct BadFile {
  const char *file;
  const char *expected; // a fragment of the error message
};

class NpzRejects : public ::testing::TestWithParam<BadFile> {};

TEST_P(NpzRejects, WithAMessageNamingTheReason) {
  TensorMap tensors;
  std::string path = dataPath(GetParam().file);
  std::vector<std::byte> bytes = readBytes(path);
  Status status = std::string(GetParam().file).ends_with(".npy")
                      ? [&] {
                          HostTensor t;
                          return parseNpy(bytes, t);
                        }()
                      : readNpz(path, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find(GetParam().expected), std::string::npos)
      << status.message();
}

INSTANTIATE_TEST_SUITE_P(
    Files, NpzRejects,
    ::testing::Values(BadFile{"big-endian.npy", "dtype '>i4' is not supported"},
                      BadFile{"fortran.npy", "Fortran-order"},
                      BadFile{"does-not-exist.npz", "cannot open"}));

/// Edits an .npy image built from `header` and `data` and expects `expected`
/// in the error.
void expectNpyError(const std::string &header, size_t dataBytes, const std::string &expected) {
  std::string image = "\x93NUMPY\x01";
  image.push_back('\0');
  image.push_back(static_cast<char>(header.size() & 0xFF));
  image.push_back(static_cast<char>(header.size() >> 8));
  image += header;
  image.append(dataBytes, '\x01');
  std::vector<std::byte> bytes(image.size());
  std::memcpy(bytes.data(), image.data(), image.size());
  HostTensor t;
  Status status = parseNpy(bytes, t);
  ASSERT_FALSE(status.isOk()) << header;
  EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
}

TEST(Npy, RejectsMalformedHeaders) {
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20,
                 "holds 20 bytes of data, but f32 of that shape needs 24");
  expectNpyError("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8,
                 "dtype '<c8' is not supported");
  expectNpyError("{'descr': '<f4', 'shape': (1,), }", 4, "missing");
  expectNpyError("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", 4,
                 "expected True or False");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (1, -2), }", 4,
                 "expected a dimension");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': "
                 "(99999999999999999999,), }",
                 4, "overflows");
  expectNpyError("{'descr': '<f8', 'fortran_order': False, 'shape': "
                 "(4294967296, 4294967296), }",
                 0, "shape overflows");
  expectNpyError("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
                 "unexpected key 'x'");
  expectNpyError("{'descr': '<f4", 0, "unterminated string");
}

TEST(Npz, RejectsCorruption) {
  std::vector<std::byte> good = readBytes(dataPath("numpy-stored.npz"));
  TensorMap tensors;
  ASSERT_TRUE(parseNpz(good, tensors).isOk());

  // A flipped data byte fails the CRC check, and the member is named.
  std::vector<std::byte> bad = good;
  bad[100] ^= std::byte{0x40};
  Status status = parseNpz(bad, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("member '"), std::string::npos) << status.message();

  // Not a zip at all.
  std::vector<std::byte> junk(64, std::byte{0x41});
  status = parseNpz(junk, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("not a zip archive"), std::string::npos) << status.message();
}

/// An .npz of one member `name` as `method` (0 stored, 8 deflated) writes it.
std::vector<std::byte> zipOfOneMember(const std::string &name, uint32_t method,
                                      const std::string &data, uint32_t crc,
                                      uint32_t uncompressed) {
  auto u16 = [](std::string &s, uint32_t v) {
    s.push_back(static_cast<char>(v & 0xFF));
    s.push_back(static_cast<char>(v >> 8));
  };
  auto u32 = [&](std::string &s, uint32_t v) {
    u16(s, v & 0xFFFF);
    u16(s, v >> 16);
  };
  auto record = [&](bool central) {
    std::string h;
    u32(h, central ? 0x02014b50 : 0x04034b50);
    if (central)
      u16(h, 20);
    for (uint32_t v : {20u, 0u, method, 0u, 0x21u})
      u16(h, v);
    u32(h, crc);
    u32(h, static_cast<uint32_t>(data.size()));
    u32(h, uncompressed);
    u16(h, static_cast<uint32_t>(name.size()));
    u16(h, 0);
    if (central) {
      for (int i = 0; i < 3; ++i)
        u16(h, 0);
      u32(h, 0);
      u32(h, 0); // the local header's offset
    }
    return h + name;
  };
  std::string zip = record(false) + data;
  std::string central = record(true);
  std::string end;
  u32(end, 0x06054b50);
  for (uint32_t v : {0u, 0u, 1u, 1u})
    u16(end, v);
  u32(end, static_cast<uint32_t>(central.size()));
  u32(end, static_cast<uint32_t>(zip.size()));
  u16(end, 0);
  zip += central + end;
  std::vector<std::byte> bytes(zip.size());
  std::memcpy(bytes.data(), zip.data(), zip.size());
  return bytes;
}

/// An .npz of one deflated member "x.npy": an .npy header declaring f32 of
/// `shape`, then `zeros` zero bytes of data. The directory records the header
/// and `recordedData` bytes of data as the member's size (default: `zeros`).
std::vector<std::byte> deflatedNpz(const std::string &shape, uint64_t zeros,
                                   std::optional<uint64_t> recordedData = {}) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string npy = "\x93NUMPY\x01";
  npy.push_back('\0');
  npy.push_back(static_cast<char>(header.size() & 0xFF));
  npy.push_back(static_cast<char>(header.size() >> 8));
  npy += header;

  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, -MAX_WBITS, 9, Z_RLE),
            Z_OK);
  std::string compressed;
  std::vector<unsigned char> out(1 << 20), chunk(1 << 20, 0);
  uLong crc = crc32(0, reinterpret_cast<const Bytef *>(npy.data()), npy.size());
  auto pump = [&](const unsigned char *in, size_t size, int flush) {
    stream.next_in = const_cast<Bytef *>(in);
    stream.avail_in = static_cast<uInt>(size);
    do {
      stream.next_out = out.data();
      stream.avail_out = static_cast<uInt>(out.size());
      deflate(&stream, flush);
      compressed.append(reinterpret_cast<char *>(out.data()), out.size() - stream.avail_out);
    } while (stream.avail_out == 0);
  };
  pump(reinterpret_cast<const unsigned char *>(npy.data()), npy.size(), Z_NO_FLUSH);
  for (uint64_t left = zeros; left > 0;) {
    size_t size = std::min<uint64_t>(left, chunk.size());
    crc = crc32(crc, chunk.data(), static_cast<uInt>(size));
    pump(chunk.data(), size, Z_NO_FLUSH);
    left -= size;
  }
  pump(nullptr, 0, Z_FINISH);
  deflateEnd(&stream);

  return zipOfOneMember("x.npy", 8, compressed, static_cast<uint32_t>(crc),
                        static_cast<uint32_t>(npy.size() + recordedData.value_or(zeros)));
}

/// The peak resident memory of this process, in MiB.
long peakMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

/// A 1 MiB archive whose member inflates to 1 GiB of zeros, as its header
/// says: refused from the header, before anything is allocated or inflated,
/// where the caller accepts less (the model's input at its largest, or a
/// limit for any member).
TEST(Npz, RefusesAZipBombFromItsHeader) {
  std::vector<std::byte> bomb = deflatedNpz("(268435456,)", uint64_t(1) << 30);
  EXPECT_LT(bomb.size(), 2u << 20);
  long before = peakMiB();
  TensorMap tensors;
  NpzLimits limits;
  int64_t declared[] = {-1, 64};
  limits.maxBytesByKey["x"] = npzBytesLimit(declared, /*maxDynamic=*/8192);
  Status status = parseNpz(bomb, tensors, limits);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("member 'x.npy': its header declares f32 [268435456] "
                                  "(1073741824 bytes), more than the 4194304 bytes accepted"),
            std::string::npos)
      << status.message();

  NpzLimits small;
  small.maxMemberBytes = 1 << 20;
  status = parseNpz(bomb, tensors, small);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("more than the 1048576 bytes accepted"), std::string::npos)
      << status.message();
  EXPECT_LT(peakMiB() - before, 64) << "the reader allocated the bomb's size";
}

/// A header that declares 16 bytes of data in a member that inflates to
/// 64 MiB: refused before the data is inflated, whether the directory
/// records the real size (the header disagrees with it) or the small one
/// (the data runs past it).
TEST(Npz, RefusesDataLongerThanItsHeaderSays) {
  long before = peakMiB();
  TensorMap tensors;
  std::vector<std::byte> honestDirectory = deflatedNpz("(4,)", 64 << 20);
  Status status = parseNpz(honestDirectory, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("holds 67108864 bytes of data, but f32 of that shape needs 16"),
            std::string::npos)
      << status.message();

  std::vector<std::byte> smallDirectory = deflatedNpz("(4,)", 64 << 20, 16);
  status = parseNpz(smallDirectory, tensors);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("longer than its recorded size"), std::string::npos)
      << status.message();
  EXPECT_LT(peakMiB() - before, 32) << "the reader allocated the inflated size";

  // The same archive with data of the declared size reads.
  std::vector<std::byte> good = deflatedNpz("(4,)", 16);
  ASSERT_TRUE(parseNpz(good, tensors).isOk());
  EXPECT_EQ(tensors.at("x").sizeInBytes(), 16u);
}

/// An empty member (found by the fuzzer: the header's read of no bytes
/// passed a null pointer to memcpy) is not an .npy image.
TEST(Npz, RefusesAnEmptyMember) {
  TensorMap tensors;
  for (uint32_t method : {0u, 8u}) {
    std::string data = method == 0 ? "" : std::string("\x03\x00", 2); // deflate of nothing
    Status status = parseNpz(zipOfOneMember("x.npy", method, data, 0, 0), tensors);
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find("member 'x.npy': not an .npy image"), std::string::npos)
        << status.message();
  }
}

/// Every truncation and many random corruptions of real numpy files: the
/// reader returns an error or a tensor map, and never crashes or hangs. The
/// fuzz ctests run it under the sanitizers as well (docs/fuzzing.md).
TEST(Npz, SurvivesTruncationAndByteFlips) {
  for (const char *file : {"numpy-stored.npz", "numpy-deflated.npz"}) {
    std::vector<std::byte> good = readBytes(dataPath(file));
    size_t rejected = 0;
    for (size_t length = 0; length < good.size(); ++length) {
      TensorMap tensors;
      std::span<const std::byte> prefix(good.data(), length);
      rejected += !parseNpz(prefix, tensors).isOk();
    }
    // Every proper prefix loses the end-of-central-directory record.
    EXPECT_EQ(rejected, good.size()) << file;

    std::mt19937 rng(99);
    size_t flipRejected = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<std::byte> bytes = good;
      int flips = 1 + trial % 4;
      for (int f = 0; f < flips; ++f)
        bytes[rng() % bytes.size()] ^= std::byte(1 + rng() % 255);
      TensorMap tensors;
      flipRejected += !parseNpz(bytes, tensors).isOk();
    }
    EXPECT_GT(flipRejected, 0u) << file;
  }
}

} // namespace
