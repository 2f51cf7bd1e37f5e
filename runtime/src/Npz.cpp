//===- Npz.cpp - numpy .npy and .npz files -----------------------------------===//
//
// Every length and offset read from a file is checked against the bytes that
// are really there before it is used: the reader is fuzzed (runtime/test).
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Npz.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <unistd.h>

namespace moec::rt {
namespace {

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;

struct DescrEntry {
  const char *descr;
  DType dtype;
};
// Little-endian and byte-order-free descriptors only. numpy has no bf16 or
// e4m3; such tensors travel as f32 and are cast where the model needs them.
constexpr DescrEntry kDescrs[] = {
    {"<f2", DType::F16}, {"<f4", DType::F32}, {"<f8", DType::F64},
    {"|i1", DType::I8},  {"<i4", DType::I32}, {"<i8", DType::I64},
    {"|u1", DType::U8},  {"|b1", DType::Bool},
};

/// The dtype of a descriptor such as '<f4'. The byte-order mark must be
/// little-endian or native ('<', '='), or irrelevant ('|') for one-byte types.
std::optional<DType> dtypeOfDescr(std::string_view descr) {
  if (descr.size() != 3)
    return std::nullopt;
  for (const DescrEntry &entry : kDescrs) {
    if (descr.substr(1) != entry.descr + 1)
      continue;
    bool oneByte = dtypeSize(entry.dtype) == 1;
    if (descr[0] == '<' || descr[0] == '=' || (oneByte && (descr[0] == '|' || descr[0] == '>')))
      return entry.dtype;
  }
  return std::nullopt;
}

const char *descrOf(DType dtype) {
  for (const DescrEntry &entry : kDescrs)
    if (entry.dtype == dtype)
      return entry.descr;
  return nullptr;
}

/// A parser for the Python dict literal of an .npy header:
///   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text(text) {}

  Status parse(std::string &descr, bool &fortranOrder, std::vector<int64_t> &shape) {
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!consume('{'))
      return fail("expected '{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      MOEC_RETURN_IF_ERROR(parseString(key));
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after key '" + key + "'");
      skipSpace();
      if (key == "descr") {
        MOEC_RETURN_IF_ERROR(parseString(descr));
        haveDescr = true;
      } else if (key == "fortran_order") {
        MOEC_RETURN_IF_ERROR(parseBool(fortranOrder));
        haveOrder = true;
      } else if (key == "shape") {
        MOEC_RETURN_IF_ERROR(parseShape(shape));
        haveShape = true;
      } else {
        return fail("unexpected key '" + key + "'");
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return fail("expected ',' or '}'");
    }
    if (!haveDescr || !haveOrder || !haveShape)
      return fail("missing 'descr', 'fortran_order' or 'shape'");
    return Status::ok();
  }

private:
  Status fail(const std::string &what) const {
    return Status::error("malformed header at character " + std::to_string(pos) + ": " + what);
  }
  void skipSpace() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view word) {
    if (text.substr(pos, word.size()) == word) {
      pos += word.size();
      return true;
    }
    return false;
  }
  Status parseString(std::string &out) {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return fail("expected a quoted string");
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string_view::npos)
      return fail("unterminated string");
    out.assign(text.substr(pos, end - pos));
    pos = end + 1;
    return Status::ok();
  }
  Status parseBool(bool &out) {
    if (consumeWord("True"))
      out = true;
    else if (consumeWord("False"))
      out = false;
    else
      return fail("expected True or False");
    return Status::ok();
  }
  Status parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return fail("expected '(' to open the shape");
    while (true) {
      skipSpace();
      if (consume(')'))
        return Status::ok();
      if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos])))
        return fail("expected a dimension");
      int64_t dim = 0;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
        int digit = text[pos++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10)
          return fail("dimension overflows int64");
        dim = dim * 10 + digit;
      }
      // numpy writes Python ints; an 'L' suffix comes from Python 2.
      consume('L');
      shape.push_back(dim);
      if (shape.size() > 32)
        return fail("more than 32 dimensions");
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume(')'))
        return Status::ok();
      return fail("expected ',' or ')' in the shape");
    }
  }

  std::string_view text;
  size_t pos = 0;
};

uint32_t readU16(const std::byte *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
}
uint32_t readU32(const std::byte *p) {
  return readU16(p) | readU16(p + 2) << 16;
}
uint64_t readU64(const std::byte *p) {
  return static_cast<uint64_t>(readU32(p)) | static_cast<uint64_t>(readU32(p + 4)) << 32;
}

//===----------------------------------------------------------------------===//
// .zip (the container of .npz)
//===----------------------------------------------------------------------===//

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndOfCentralDirSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;
// Deflate cannot expand data by more than about 1032:1; a member claiming more
// is corrupt, and believing it would allocate absurd buffers.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// A bounds-checked view of the archive.
struct Archive {
  std::span<const std::byte> bytes;

  bool has(uint64_t offset, uint64_t size) const {
    return offset <= bytes.size() && size <= bytes.size() - offset;
  }
  const std::byte *at(uint64_t offset) const { return bytes.data() + offset; }
};

struct Member {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t compressedSize = 0, uncompressedSize = 0, localHeaderOffset = 0;
};

Status findCentralDirectory(const Archive &zip, uint64_t &entries, uint64_t &offset,
                            uint64_t &size) {
  if (zip.bytes.size() < kEndOfCentralDirSize)
    return Status::error("not a zip archive (too short)");
  // The end record sits at the end, followed by a comment of at most 64 KiB.
  size_t last = zip.bytes.size() - kEndOfCentralDirSize;
  size_t first = last > 0xFFFF ? last - 0xFFFF : 0;
  std::optional<size_t> end;
  for (size_t pos = last + 1; pos-- > first;)
    if (readU32(zip.at(pos)) == kEndOfCentralDirSig) {
      end = pos;
      break;
    }
  if (!end)
    return Status::error("not a zip archive (no end-of-central-directory record)");
  const std::byte *record = zip.at(*end);
  if (readU16(record + 4) != 0 || readU16(record + 6) != 0)
    return Status::error("multi-disk zip archives are not supported");
  entries = readU16(record + 10);
  size = readU32(record + 12);
  offset = readU32(record + 16);
  if (entries == 0xFFFF || size == 0xFFFFFFFF || offset == 0xFFFFFFFF) {
    if (*end < kZip64LocatorSize ||
        readU32(zip.at(*end - kZip64LocatorSize)) != kZip64LocatorSig)
      return Status::error("zip64 end-of-central-directory locator missing");
    uint64_t zip64End = readU64(zip.at(*end - kZip64LocatorSize + 8));
    if (!zip.has(zip64End, kZip64EndSize) || readU32(zip.at(zip64End)) != kZip64EndSig)
      return Status::error("zip64 end-of-central-directory record missing or out of bounds");
    entries = readU64(zip.at(zip64End + 32));
    size = readU64(zip.at(zip64End + 40));
    offset = readU64(zip.at(zip64End + 48));
  }
  if (!zip.has(offset, size))
    return Status::error("central directory lies outside the file");
  return Status::ok();
}

/// Applies a zip64 extra field: the 64-bit values replace, in order, those of
/// the 32-bit fields that hold 0xFFFFFFFF.
Status applyZip64Extra(const std::byte *extra, uint64_t extraSize, Member &member) {
  uint64_t pos = 0;
  while (extraSize - pos >= 4) {
    uint32_t id = readU16(extra + pos), length = readU16(extra + pos + 2);
    pos += 4;
    if (length > extraSize - pos)
      return Status::error("extra field of member '" + member.name + "' overruns its record");
    if (id == 0x0001) {
      uint64_t field = pos, fieldEnd = pos + length;
      for (uint64_t *value : {&member.uncompressedSize, &member.compressedSize,
                              &member.localHeaderOffset}) {
        if (*value != 0xFFFFFFFF)
          continue;
        if (fieldEnd - field < 8)
          return Status::error("zip64 field of member '" + member.name + "' is too short");
        *value = readU64(extra + field);
        field += 8;
      }
    }
    pos += length;
  }
  return Status::ok();
}

Status readCentralDirectory(const Archive &zip, std::vector<Member> &members) {
  uint64_t entries = 0, offset = 0, size = 0;
  MOEC_RETURN_IF_ERROR(findCentralDirectory(zip, entries, offset, size));
  uint64_t pos = offset, end = offset + size;
  for (uint64_t i = 0; i < entries; ++i) {
    if (end - pos < kCentralHeaderSize || readU32(zip.at(pos)) != kCentralHeaderSig)
      return Status::error("central directory entry " + std::to_string(i) + " is malformed");
    const std::byte *h = zip.at(pos);
    Member member;
    member.flags = readU16(h + 8);
    member.method = readU16(h + 10);
    member.crc = readU32(h + 16);
    member.compressedSize = readU32(h + 20);
    member.uncompressedSize = readU32(h + 24);
    uint64_t nameSize = readU16(h + 28), extraSize = readU16(h + 30),
             commentSize = readU16(h + 32);
    member.localHeaderOffset = readU32(h + 42);
    uint64_t recordSize = kCentralHeaderSize + nameSize + extraSize + commentSize;
    if (end - pos < recordSize)
      return Status::error("central directory entry " + std::to_string(i) +
                           " overruns the directory");
    member.name.assign(reinterpret_cast<const char *>(h + kCentralHeaderSize), nameSize);
    MOEC_RETURN_IF_ERROR(
        applyZip64Extra(h + kCentralHeaderSize + nameSize, extraSize, member));
    members.push_back(std::move(member));
    pos += recordSize;
  }
  return Status::ok();
}

/// Reads a member's bytes in order, inflating a deflated member on the way and
/// never writing past the size the directory records; finish() checks that
/// exactly that many came out, and the CRC.
class MemberReader {
public:
  MemberReader() = default;
  MemberReader(const MemberReader &) = delete;
  MemberReader &operator=(const MemberReader &) = delete;
  ~MemberReader() {
    if (inflating)
      inflateEnd(&stream);
  }

  Status open(const Archive &zip, const Member &member) {
    if (member.flags & 0x1)
      return Status::error("encrypted members are not supported");
    uint64_t local = member.localHeaderOffset;
    if (!zip.has(local, kLocalHeaderSize) || readU32(zip.at(local)) != kLocalHeaderSig)
      return Status::error("local header missing or out of bounds");
    // Without a data descriptor (flag 3) the local header repeats the sizes;
    // 0xFFFFFFFF defers to a zip64 field.
    if (!(member.flags & 0x8))
      for (auto [at, recorded] : {std::pair{18, member.compressedSize},
                                  {22, member.uncompressedSize}}) {
        uint32_t size = readU32(zip.at(local + at));
        if (size != 0xFFFFFFFF && size != recorded)
          return Status::error("the local header records " + std::to_string(size) +
                               " bytes where the central directory records " +
                               std::to_string(recorded));
      }
    uint64_t start = local + kLocalHeaderSize + readU16(zip.at(local + 26)) +
                     readU16(zip.at(local + 28));
    if (!zip.has(start, member.compressedSize))
      return Status::error("data runs past the end of the file (truncated?)");
    raw = std::span<const std::byte>(zip.at(start), member.compressedSize);
    size = member.uncompressedSize;
    expectedCrc = member.crc;
    if (member.method == kMethodStored) {
      if (member.compressedSize != member.uncompressedSize)
        return Status::error("stored member has different compressed and uncompressed sizes");
      return Status::ok();
    }
    if (member.method != kMethodDeflate)
      return Status::error("compression method " + std::to_string(member.method) +
                           " is not supported (only stored and deflate)");
    if (member.uncompressedSize > member.compressedSize * kMaxDeflateRatio + 1024 ||
        member.compressedSize > std::numeric_limits<uInt>::max() ||
        member.uncompressedSize > std::numeric_limits<uInt>::max())
      return Status::error("deflated member records an impossible size");
    if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
      return Status::error("cannot initialise zlib");
    inflating = true;
    stream.next_in = reinterpret_cast<Bytef *>(const_cast<std::byte *>(raw.data()));
    stream.avail_in = static_cast<uInt>(raw.size());
    return Status::ok();
  }

  /// The member's size as the directory records it.
  uint64_t recordedSize() const { return size; }
  uint64_t remaining() const { return size - done; }

  /// The next `count` bytes (at most remaining()) into `out`.
  Status read(std::byte *out, uint64_t count) {
    if (count > remaining())
      return Status::error("read past the member's recorded size");
    if (count == 0) // `out` may be null (an empty member's header)
      return Status::ok();
    if (!inflating) {
      std::memcpy(out, raw.data() + done, count);
    } else {
      stream.next_out = reinterpret_cast<Bytef *>(out);
      stream.avail_out = static_cast<uInt>(count);
      while (stream.avail_out > 0) {
        int result = inflate(&stream, Z_NO_FLUSH);
        if (result == Z_STREAM_END && stream.avail_out > 0)
          return Status::error("deflate data inflates to " + std::to_string(stream.total_out) +
                               " bytes, but the directory records " + std::to_string(size));
        if (result != Z_OK && result != Z_STREAM_END)
          return Status::error("deflate data is corrupt or truncated");
        ended = result == Z_STREAM_END;
      }
    }
    crc = static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef *>(out), count));
    done += count;
    return Status::ok();
  }

  /// Checks that the member ends after the bytes read (all of them) and its CRC.
  Status finish() {
    if (remaining() != 0)
      return Status::error("the member was not read to its end");
    if (inflating && !ended) {
      // The stream must end here: one more byte of room must stay empty.
      Bytef extra;
      stream.next_out = &extra;
      stream.avail_out = 1;
      int result = inflate(&stream, Z_FINISH);
      if (result != Z_STREAM_END || stream.avail_out != 1)
        return Status::error("deflate data is corrupt or longer than its recorded size");
    }
    if (crc != expectedCrc)
      return Status::error("CRC mismatch: the data is corrupt");
    return Status::ok();
  }

private:
  std::span<const std::byte> raw;
  uint64_t size = 0, done = 0;
  uint32_t crc = 0, expectedCrc = 0;
  z_stream stream{};
  bool inflating = false, ended = false;
};

void appendU16(std::string &out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void appendU32(std::string &out, uint32_t v) {
  appendU16(out, v & 0xFFFF);
  appendU16(out, v >> 16);
}

/// numpy's own reader refuses headers over 10000 characters; this bound keeps
/// what a header may make the reader inflate before its data small.
constexpr uint64_t kMaxNpyHeaderBytes = 1 << 20;

/// The first bytes of an .npy image (at least 12, or all of it) say where its
/// header text starts and its data starts.
Status npyHeaderBounds(std::span<const std::byte> bytes, uint64_t &headerStart,
                       uint64_t &dataOffset) {
  if (bytes.size() < kNpyMagicSize + 4 ||
      std::memcmp(bytes.data(), kNpyMagic, kNpyMagicSize) != 0)
    return Status::error("not an .npy image (bad magic)");
  uint32_t major = static_cast<uint32_t>(bytes[6]);
  uint64_t headerSize;
  if (major == 1) {
    headerSize = readU16(bytes.data() + 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return Status::error("truncated .npy header");
    headerSize = readU32(bytes.data() + 8);
    headerStart = 12;
  } else {
    return Status::error(".npy format version " + std::to_string(major) + " is not supported");
  }
  if (headerSize > kMaxNpyHeaderBytes)
    return Status::error(".npy header of " + std::to_string(headerSize) + " bytes is too long");
  dataOffset = headerStart + headerSize;
  return Status::ok();
}

/// What an .npy header declares.
struct NpyHeader {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0, dataBytes = 0;
};

/// Parses the header at the start of `bytes` (which may hold the data too).
Status parseNpyHeader(std::span<const std::byte> bytes, NpyHeader &out) {
  uint64_t headerStart = 0;
  MOEC_RETURN_IF_ERROR(npyHeaderBounds(bytes, headerStart, out.dataOffset));
  if (out.dataOffset > bytes.size())
    return Status::error("truncated .npy header");
  std::string_view header(reinterpret_cast<const char *>(bytes.data() + headerStart),
                          out.dataOffset - headerStart);
  std::string descr;
  bool fortranOrder = false;
  MOEC_RETURN_IF_ERROR(HeaderParser(header).parse(descr, fortranOrder, out.shape));
  if (fortranOrder)
    return Status::error("Fortran-order arrays are not supported; save "
                         "numpy.ascontiguousarray(x)");
  std::optional<DType> dtype = dtypeOfDescr(descr);
  if (!dtype)
    return Status::error("dtype '" + descr + "' is not supported (expected f2, f4, f8, "
                         "i1, i4, i8, u1 or b1, little-endian)");
  out.dtype = *dtype;
  std::optional<int64_t> count = checkedNumElements(out.shape, dtypeSize(*dtype));
  if (!count)
    return Status::error("shape overflows");
  out.dataBytes = static_cast<uint64_t>(*count) * dtypeSize(*dtype);
  return Status::ok();
}

/// The header's size against the bytes there are after it.
Status checkNpyDataBytes(const NpyHeader &header, uint64_t available) {
  if (available != header.dataBytes)
    return Status::error("holds " + std::to_string(available) + " bytes of data, but " +
                         std::string(dtypeName(header.dtype)) + " of that shape needs " +
                         std::to_string(header.dataBytes));
  return Status::ok();
}

/// One member as a tensor: its header is read and checked (against the
/// member's recorded size and `maxBytes`) before its data is allocated.
Status readNpyMember(MemberReader &reader, uint64_t maxBytes, HostTensor &out) {
  std::vector<std::byte> header(std::min<uint64_t>(12, reader.recordedSize()));
  MOEC_RETURN_IF_ERROR(reader.read(header.data(), header.size()));
  uint64_t headerStart = 0, dataOffset = 0;
  MOEC_RETURN_IF_ERROR(npyHeaderBounds(header, headerStart, dataOffset));
  if (dataOffset > reader.recordedSize())
    return Status::error("truncated .npy header");
  if (dataOffset > header.size()) {
    size_t have = header.size();
    header.resize(dataOffset);
    MOEC_RETURN_IF_ERROR(reader.read(header.data() + have, dataOffset - have));
  }
  NpyHeader declared;
  MOEC_RETURN_IF_ERROR(parseNpyHeader(header, declared));
  // Bytes past the header read with its first 12 would be data; no header
  // that parses is that short.
  if (header.size() > declared.dataOffset)
    return Status::error("truncated .npy header");
  MOEC_RETURN_IF_ERROR(checkNpyDataBytes(declared, reader.recordedSize() - declared.dataOffset));
  if (declared.dataBytes > maxBytes) {
    std::string shape;
    for (int64_t dim : declared.shape)
      shape += (shape.empty() ? "" : ", ") + std::to_string(dim);
    return Status::error("its header declares " + std::string(dtypeName(declared.dtype)) + " [" +
                         shape + "] (" + std::to_string(declared.dataBytes) +
                         " bytes), more than the " + std::to_string(maxBytes) +
                         " bytes accepted for it");
  }
  HostTensor tensor(declared.dtype, std::move(declared.shape));
  MOEC_RETURN_IF_ERROR(reader.read(tensor.data(), declared.dataBytes));
  MOEC_RETURN_IF_ERROR(reader.finish());
  out = std::move(tensor);
  return Status::ok();
}

} // namespace

Status parseNpy(std::span<const std::byte> bytes, HostTensor &out) {
  NpyHeader header;
  MOEC_RETURN_IF_ERROR(parseNpyHeader(bytes, header));
  MOEC_RETURN_IF_ERROR(checkNpyDataBytes(header, bytes.size() - header.dataOffset));
  out = HostTensor(header.dtype, std::move(header.shape));
  if (header.dataBytes)
    std::memcpy(out.data(), bytes.data() + header.dataOffset, header.dataBytes);
  return Status::ok();
}

std::string serializeNpy(const HostTensor &tensor) {
  std::string header = "{'descr': '";
  header += descrOf(tensor.dtype()) ? descrOf(tensor.dtype()) : "|V1";
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape().size(); ++i)
    header += (i ? ", " : "") + std::to_string(tensor.shape()[i]);
  if (tensor.shape().size() == 1)
    header += ","; // a 1-tuple: "(3,)"
  header += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary, then '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kNpyMagic, kNpyMagicSize);
  out.push_back('\x01');
  out.push_back('\x00');
  appendU16(out, static_cast<uint32_t>(header.size()));
  out += header;
  out.append(reinterpret_cast<const char *>(tensor.data()), tensor.sizeInBytes());
  return out;
}

uint64_t npzBytesLimit(std::span<const int64_t> shape, int64_t maxDynamic) {
  constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();
  uint64_t bytes = 8; // the largest element .npy holds here (f8, i8)
  for (int64_t dim : shape) {
    uint64_t length = static_cast<uint64_t>(dim < 0 ? std::max<int64_t>(maxDynamic, 0) : dim);
    if (length != 0 && bytes > kSaturated / length)
      return kSaturated;
    bytes *= length;
  }
  return bytes;
}

Status parseNpz(std::span<const std::byte> bytes, TensorMap &out, const NpzLimits &limits) {
  Archive zip{bytes};
  std::vector<Member> members;
  MOEC_RETURN_IF_ERROR(readCentralDirectory(zip, members));
  TensorMap tensors;
  for (const Member &member : members) {
    std::string_view name = member.name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".npy")
      return Status::error("member '" + member.name + "' is not an .npy file");
    std::string key(name.substr(0, name.size() - 4));
    if (tensors.count(key))
      return Status::error("member '" + member.name + "' appears twice");
    auto limit = limits.maxBytesByKey.find(key);
    MemberReader reader;
    HostTensor tensor;
    Status status = reader.open(zip, member);
    if (status)
      status = readNpyMember(reader,
                             limit == limits.maxBytesByKey.end() ? limits.maxMemberBytes
                                                                 : limit->second,
                             tensor);
    MOEC_RETURN_IF_ERROR(status.withContext("member '" + member.name + "'"));
    tensors.emplace(std::move(key), std::move(tensor));
  }
  out = std::move(tensors);
  return Status::ok();
}

Status readNpz(const std::string &path, TensorMap &out, const NpzLimits &limits) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::streamsize size = file.tellg();
  if (size < 0)
    return Status::error(path + ": cannot determine the file size");
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  file.seekg(0);
  if (size > 0 && !file.read(reinterpret_cast<char *>(bytes.data()), size))
    return Status::error(path + ": read failed");
  return parseNpz(bytes, out, limits).withContext(path);
}

Status writeNpz(const std::string &path, const TensorMap &tensors) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    return Status::error(path + ": cannot create '" + temporary + "': " + std::strerror(errno));
  auto fail = [&](const std::string &why) {
    std::fclose(file);
    std::remove(temporary.c_str());
    return Status::error(path + ": " + why);
  };
  std::string central;
  uint64_t offset = 0;
  for (const auto &[key, tensor] : tensors) {
    if (!descrOf(tensor.dtype()))
      return fail("tensor '" + key + "' has dtype " + std::string(dtypeName(tensor.dtype())) +
                  ", which .npy cannot hold");
    std::string name = key + ".npy";
    std::string npy = serializeNpy(tensor);
    if (npy.size() >= 0xFFFFFFFFull || offset >= 0xFFFFFFFFull || name.size() > 0xFFFF)
      return fail("archives over 4 GiB are not supported by the writer");
    uint32_t crc = static_cast<uint32_t>(
        crc32_z(0, reinterpret_cast<const Bytef *>(npy.data()), npy.size()));
    auto record = [&](bool centralRecord) {
      std::string h;
      appendU32(h, centralRecord ? kCentralHeaderSig : kLocalHeaderSig);
      if (centralRecord)
        appendU16(h, 20); // version made by
      appendU16(h, 20);   // version needed
      appendU16(h, 0);    // flags
      appendU16(h, kMethodStored);
      appendU16(h, 0); // time
      appendU16(h, 0x21); // date: 1980-01-01
      appendU32(h, crc);
      appendU32(h, static_cast<uint32_t>(npy.size()));
      appendU32(h, static_cast<uint32_t>(npy.size()));
      appendU16(h, static_cast<uint32_t>(name.size()));
      appendU16(h, 0); // extra
      if (centralRecord) {
        appendU16(h, 0); // comment
        appendU16(h, 0); // disk
        appendU16(h, 0); // internal attributes
        appendU32(h, 0); // external attributes
        appendU32(h, static_cast<uint32_t>(offset));
      }
      return h + name;
    };
    std::string local = record(false);
    central += record(true);
    if (std::fwrite(local.data(), 1, local.size(), file) != local.size() ||
        std::fwrite(npy.data(), 1, npy.size(), file) != npy.size())
      return fail("write failed: " + std::string(std::strerror(errno)));
    offset += local.size() + npy.size();
  }
  if (offset >= 0xFFFFFFFFull || tensors.size() >= 0xFFFF)
    return fail("archives over 4 GiB or 65535 members are not supported by the writer");
  std::string end;
  appendU32(end, kEndOfCentralDirSig);
  appendU16(end, 0);
  appendU16(end, 0);
  appendU16(end, static_cast<uint32_t>(tensors.size()));
  appendU16(end, static_cast<uint32_t>(tensors.size()));
  appendU32(end, static_cast<uint32_t>(central.size()));
  appendU32(end, static_cast<uint32_t>(offset));
  appendU16(end, 0);
  if (std::fwrite(central.data(), 1, central.size(), file) != central.size() ||
      std::fwrite(end.data(), 1, end.size(), file) != end.size())
    return fail("write failed: " + std::string(std::strerror(errno)));
  if (std::fclose(file) != 0) {
    std::remove(temporary.c_str());
    return Status::error(path + ": close failed: " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return Status::error(path + ": cannot rename the temporary file into place: " +
                         std::strerror(errno));
  }
  return Status::ok();
}

} // namespace moec::rt
