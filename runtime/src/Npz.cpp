//===- Npz.cpp - numpy .npy and .npz files -----------------------------------===//
//
// Every length and offset read from a file is checked against the bytes that
// are really there before it is used: the reader is fuzzed (runtime/test).
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Npz.h"

#include <zlib.h>

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

Status inflateMember(std::span<const std::byte> input, std::vector<std::byte> &output) {
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK)
    return Status::error("cannot initialise zlib");
  stream.next_in = reinterpret_cast<Bytef *>(const_cast<std::byte *>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef *>(output.data());
  stream.avail_out = static_cast<uInt>(output.size());
  int result = inflate(&stream, Z_FINISH);
  uint64_t produced = stream.total_out;
  inflateEnd(&stream);
  if (result != Z_STREAM_END)
    return Status::error("deflate data is corrupt or longer than its recorded size");
  if (produced != output.size())
    return Status::error("deflate data inflates to " + std::to_string(produced) +
                         " bytes, but the directory records " + std::to_string(output.size()));
  return Status::ok();
}

/// The bytes of one member, inflated if need be and checked against its CRC.
Status extractMember(const Archive &zip, const Member &member, std::vector<std::byte> &storage,
                     std::span<const std::byte> &data) {
  if (member.flags & 0x1)
    return Status::error("encrypted members are not supported");
  uint64_t local = member.localHeaderOffset;
  if (!zip.has(local, kLocalHeaderSize) || readU32(zip.at(local)) != kLocalHeaderSig)
    return Status::error("local header missing or out of bounds");
  uint64_t start = local + kLocalHeaderSize + readU16(zip.at(local + 26)) +
                   readU16(zip.at(local + 28));
  if (!zip.has(start, member.compressedSize))
    return Status::error("data runs past the end of the file (truncated?)");
  std::span<const std::byte> raw(zip.at(start), member.compressedSize);
  if (member.method == kMethodStored) {
    if (member.compressedSize != member.uncompressedSize)
      return Status::error("stored member has different compressed and uncompressed sizes");
    data = raw;
  } else if (member.method == kMethodDeflate) {
    if (member.uncompressedSize > member.compressedSize * kMaxDeflateRatio + 1024 ||
        member.compressedSize > std::numeric_limits<uInt>::max() ||
        member.uncompressedSize > std::numeric_limits<uInt>::max())
      return Status::error("deflated member records an impossible size");
    storage.resize(member.uncompressedSize);
    MOEC_RETURN_IF_ERROR(inflateMember(raw, storage));
    data = storage;
  } else {
    return Status::error("compression method " + std::to_string(member.method) +
                         " is not supported (only stored and deflate)");
  }
  uint32_t crc = static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef *>(data.data()), data.size()));
  if (crc != member.crc)
    return Status::error("CRC mismatch: the data is corrupt");
  return Status::ok();
}

void appendU16(std::string &out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void appendU32(std::string &out, uint32_t v) {
  appendU16(out, v & 0xFFFF);
  appendU16(out, v >> 16);
}

} // namespace

Status parseNpy(std::span<const std::byte> bytes, HostTensor &out) {
  if (bytes.size() < kNpyMagicSize + 4 ||
      std::memcmp(bytes.data(), kNpyMagic, kNpyMagicSize) != 0)
    return Status::error("not an .npy image (bad magic)");
  uint32_t major = static_cast<uint32_t>(bytes[6]);
  uint64_t headerSize, headerStart;
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
  if (headerSize > bytes.size() - headerStart)
    return Status::error("truncated .npy header");
  std::string_view header(reinterpret_cast<const char *>(bytes.data() + headerStart),
                          headerSize);
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  MOEC_RETURN_IF_ERROR(HeaderParser(header).parse(descr, fortranOrder, shape));
  if (fortranOrder)
    return Status::error("Fortran-order arrays are not supported; save "
                         "numpy.ascontiguousarray(x)");
  std::optional<DType> dtype = dtypeOfDescr(descr);
  if (!dtype)
    return Status::error("dtype '" + descr + "' is not supported (expected f2, f4, f8, "
                         "i1, i4, i8, u1 or b1, little-endian)");
  std::optional<int64_t> count = checkedNumElements(shape, dtypeSize(*dtype));
  if (!count)
    return Status::error("shape overflows");
  uint64_t dataBytes = static_cast<uint64_t>(*count) * dtypeSize(*dtype);
  uint64_t available = bytes.size() - headerStart - headerSize;
  if (available != dataBytes)
    return Status::error("holds " + std::to_string(available) + " bytes of data, but " +
                         std::string(dtypeName(*dtype)) + " of that shape needs " +
                         std::to_string(dataBytes));
  out = HostTensor(*dtype, shape);
  if (dataBytes)
    std::memcpy(out.data(), bytes.data() + headerStart + headerSize, dataBytes);
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

Status parseNpz(std::span<const std::byte> bytes, TensorMap &out) {
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
    std::vector<std::byte> storage;
    std::span<const std::byte> data;
    MOEC_RETURN_IF_ERROR(
        extractMember(zip, member, storage, data).withContext("member '" + member.name + "'"));
    HostTensor tensor;
    MOEC_RETURN_IF_ERROR(parseNpy(data, tensor).withContext("member '" + member.name + "'"));
    tensors.emplace(std::move(key), std::move(tensor));
  }
  out = std::move(tensors);
  return Status::ok();
}

Status readNpz(const std::string &path, TensorMap &out) {
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
  return parseNpz(bytes, out).withContext(path);
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
