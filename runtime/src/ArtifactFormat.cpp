//===- ArtifactFormat.cpp - manifest.txt and weights.bin's header ---------===//
//
// The writer and the reader of the format in moec/runtime/ArtifactFormat.h.
// The reader trusts nothing: every line, number and name is checked, and the
// manifest is returned only when all of it is valid.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/ArtifactFormat.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace moec::rt::artifact {
namespace {

bool isTensorDType(std::string_view dtype) {
  return dtype == "f32" || dtype == "i32" || dtype == "i64";
}

bool isWeightDType(std::string_view dtype) {
  return isTensorDType(dtype) || dtype == "bf16" || dtype == "f8e4m3" || dtype == "f4e2m1" ||
         dtype == "f8e8m0";
}

/// A decimal count in [0, 2^62]: large enough for any file, small enough
/// that sums of a few never wrap.
bool parseCount(const std::string &text, uint64_t &value) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  unsigned long long parsed = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || parsed > (1ull << 62))
    return false;
  value = parsed;
  return true;
}

/// A name is one token without '/' (file names: inside the artifact).
bool isPlainName(const std::string &name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

/// A seed: a decimal in [0, 2^64).
bool parseSeed(const std::string &text, uint64_t &value) {
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  unsigned long long parsed = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0)
    return false;
  value = parsed;
  return true;
}

/// A fill's value: an f32 in C99 hexadecimal (as printed: exact), finite.
std::string printValue(float value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", static_cast<double>(value));
  return text;
}
bool parseValue(const std::string &text, float &value) {
  if (text.empty() || text.size() > 40 ||
      text.find_first_not_of("0123456789abcdefABCDEFxXpP+-.") != std::string::npos)
    return false;
  errno = 0;
  char *end = nullptr;
  double parsed = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(parsed) ||
      static_cast<double>(static_cast<float>(parsed)) != parsed)
    return false;
  value = static_cast<float>(parsed);
  return true;
}

/// The elements of `shape` times `elementBytes`, or false on overflow.
bool shapeBytes(const std::vector<int64_t> &shape, int elementBytes, uint64_t &bytes) {
  unsigned __int128 total = static_cast<unsigned>(elementBytes);
  for (int64_t size : shape) {
    total *= static_cast<uint64_t>(size);
    if (total > (static_cast<unsigned __int128>(1) << 62))
      return false;
  }
  bytes = static_cast<uint64_t>(total);
  return true;
}

void printTensor(std::ostringstream &os, const char *key, const TensorEntry &tensor) {
  os << key << " " << tensor.name << " " << tensor.dtype << " " << printShape(tensor.shape)
     << "\n";
}

} // namespace

int weightDTypeBytes(std::string_view dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "i64")
    return 8;
  if (dtype == "bf16")
    return 2;
  if (dtype == "f8e4m3" || dtype == "f8e8m0")
    return 1;
  return 0; // f4e2m1 is packed two a byte, per row (MXFP4.h), and unknown dtypes

}

std::string printShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

bool parseShape(std::string_view text, std::vector<int64_t> &shape) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return false;
  std::string body(text.substr(1, text.size() - 2));
  std::vector<int64_t> parsed;
  if (!body.empty()) {
    std::stringstream stream(body);
    std::string item;
    while (std::getline(stream, item, ',')) {
      if (item == "-1") {
        parsed.push_back(-1);
        continue;
      }
      uint64_t value = 0;
      if (!parseCount(item, value))
        return false;
      parsed.push_back(static_cast<int64_t>(value));
    }
    if (body.back() == ',')
      return false;
  }
  shape = std::move(parsed);
  return true;
}

namespace {
/// The manifest's entries; with `comments`, the explanatory lines too.
std::string printEntries(const Manifest &manifest, bool comments) {
  std::ostringstream os;
  os << kManifestMagic << " " << kManifestVersion << "\n";
  if (comments)
    os << "# written by moec compile --target=" << manifest.target << "; docs/artifact.md\n";
  os << "target " << manifest.target << "\n"
     << "library " << manifest.library << "\n";
  if (comments && manifest.externalWeights)
    os << "# --weights=external: weights.bin is not written; fill it in the layout\n"
          "# of the weight lines below (bench/write_weights.py)\n";
  os << "weights " << manifest.weightsFile << " " << manifest.weightsBytes << "\n";
  if (manifest.imageBytes) {
    if (comments)
      os << "# the weights are filled at load into an image of these bytes (moec compile\n"
            "# --random-weights or --ep-size); weights.bin holds the stored ones only\n";
    os << "weights_image " << manifest.imageBytes << "\n";
  }
  if (manifest.epSize > 0) {
    if (comments)
      os << "# one artifact for this many expert-parallel ranks; a weight marked 'shard' is\n"
            "# one rank's slice, rank r's stored at source + r * bytes\n";
    os << "expert_parallel " << manifest.epSize << "\n";
  }
  if (manifest.hasRandomSeed) {
    if (comments)
      os << "# the weights filled 'normal STD' are random: STD times the generator's normal\n"
            "# of (seed, the weight's name, the element); they mean nothing\n";
    os << "random_seed " << manifest.randomSeed << "\n";
  }
  if (comments && manifest.target == "cuda")
    os << "# device workspace, without CUB's sort workspace (sized at load)\n";
  os << "workspace_bytes " << manifest.workspaceBytes << "\n"
     << "max_tokens " << manifest.maxTokens << "\n";
  if (manifest.maxBatch > 0) {
    if (comments)
      os << "# a whole model: the KV cache holds MAX_BATCH sequences of MAX_SEQ positions\n";
    os << "kv_cache " << manifest.maxBatch << " " << manifest.maxSeq << "\n";
  }
  for (const TensorEntry &tensor : manifest.inputs)
    printTensor(os, "input", tensor);
  for (const TensorEntry &tensor : manifest.outputs)
    printTensor(os, "output", tensor);
  for (const WeightEntry &weight : manifest.weights) {
    os << "weight " << weight.name << " " << weight.dtype << " " << printShape(weight.shape)
       << " " << weight.offset << " " << weight.bytes;
    if (manifest.imageBytes) {
      switch (weight.fill) {
      case WeightEntry::Fill::Stored:
        os << " stored " << weight.source;
        break;
      case WeightEntry::Fill::Constant:
        os << " constant " << printValue(weight.value);
        break;
      case WeightEntry::Fill::Normal:
        os << " normal " << printValue(weight.value);
        break;
      }
      if (weight.shard)
        os << " shard";
    }
    os << "\n";
  }
  return os.str();
}

/// A hash line's value: 16 hex digits, or "-" (not recorded) where `optional`.
bool parseHash(const std::string &text, bool optional, std::string &hash) {
  if (optional && text == "-") {
    hash.clear();
    return true;
  }
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  hash = text;
  return true;
}

constexpr const char *kManifestHashKey = "manifest_hash";
} // namespace

std::string printPlan(const Manifest &manifest) { return printEntries(manifest, false); }

std::string printManifest(const Manifest &manifest) {
  std::string text = printEntries(manifest, true);
  auto orNone = [](const std::string &hash) { return hash.empty() ? std::string("-") : hash; };
  text += "# content hashes (docs/artifact.md, \"What the loader verifies\")\n";
  text += "library_hash " + manifest.libraryHash + "\n";
  text += "weights_sample_hash " + orNone(manifest.weightsSampleHash) + "\n";
  text += "weights_hash " + orNone(manifest.weightsHash) + "\n";
  text += std::string(kManifestHashKey) + " " + hashText(contentHash(text.data(), text.size())) +
          "\n";
  return text;
}

uint64_t contentHash(const void *data, uint64_t bytes) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  auto mix = [](uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
  };
  const auto *p = static_cast<const unsigned char *>(data);
  uint64_t lanes[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                       0x082efa98ec4e6c89ull};
  uint64_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t word;
      std::memcpy(&word, p + i + 8 * lane, 8);
      lanes[lane] = (lanes[lane] ^ word) * kMul;
      lanes[lane] ^= lanes[lane] >> 32;
    }
  uint64_t h = bytes * kMul;
  for (uint64_t lane : lanes)
    h = mix(h ^ mix(lane));
  for (; i < bytes; ++i)
    h = (h ^ p[i]) * kMul;
  return mix(h);
}

uint64_t weightsSampleHash(const unsigned char *data, uint64_t bytes) {
  constexpr uint64_t kEdge = 64 * 1024, kBlock = 4096, kBlocks = 64;
  if (bytes <= 2 * kEdge + kBlocks * kBlock)
    return contentHash(data, bytes);
  uint64_t h = contentHash(data, kEdge) ^ contentHash(data + bytes - kEdge, kEdge) * 3;
  uint64_t span = bytes - 2 * kEdge - kBlock;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    uint64_t at = kEdge + span / (kBlocks - 1) * i;
    h = contentHash(&h, 8) ^ contentHash(data + at, kBlock);
  }
  return contentHash(&h, 8) ^ bytes;
}

std::string hashText(uint64_t hash) {
  static const char digits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4)
    text[static_cast<size_t>(i)] = digits[hash & 15];
  return text;
}

namespace {
/// The fills of a manifest with weights_image (docs/artifact.md, "Weights
/// filled at load"): every weight has one, a stored one lies inside
/// weights.bin, a generated one has a float dtype, its bytes are its shape's,
/// and a normal fill comes with random_seed; a manifest without
/// weights_image has none.
Status checkFills(const Manifest &manifest, const std::vector<size_t> &filled,
                  const std::string &path) {
  using Fill = WeightEntry::Fill;
  if (!manifest.imageBytes) {
    if (!filled.empty())
      return Status::error(path + ": weight '" + manifest.weights[filled.front()].name +
                           "' has a fill, but the manifest has no weights_image");
    if (manifest.hasRandomSeed)
      return Status::error(path + ": random_seed without weights_image");
    return Status::ok();
  }
  if (filled.size() != manifest.weights.size()) {
    size_t missing = 0;
    while (missing < filled.size() && filled[missing] == missing)
      ++missing;
    return Status::error(path + ": weight '" + manifest.weights[missing].name +
                         "' has no fill (stored, constant or normal), which every weight of a "
                         "manifest with weights_image has");
  }
  bool normal = false;
  for (const WeightEntry &weight : manifest.weights) {
    std::string at = path + ": weight '" + weight.name + "': ";
    if (weight.offset % kWeightsAlignment != 0)
      return Status::error(at + "offset " + std::to_string(weight.offset) +
                           " is not a multiple of " + std::to_string(kWeightsAlignment));
    if (weight.shard && manifest.epSize < 1)
      return Status::error(at + "is a shard, but the manifest has no expert_parallel line");
    if (weight.fill == Fill::Stored) {
      // A shard's file bytes are every rank's slice, one after another.
      uint64_t slices = weight.shard ? static_cast<uint64_t>(manifest.epSize) : 1;
      uint64_t stored = 0;
      if (weight.source < kWeightsHeaderBytes || weight.source > manifest.weightsBytes ||
          __builtin_mul_overflow(weight.bytes, slices, &stored) ||
          stored > manifest.weightsBytes - weight.source)
        return Status::error(at + "stored at " + std::to_string(weight.source) + " (" +
                             std::to_string(weight.bytes) + " bytes" +
                             (weight.shard ? " for each of " + std::to_string(slices) + " ranks"
                                           : std::string()) +
                             "), outside weights of " + std::to_string(manifest.weightsBytes) +
                             " bytes");
      continue;
    }
    normal |= weight.fill == Fill::Normal;
    // MXFP4: random codes (normal) with a constant scale (constant).
    bool codes = weight.dtype == "f4e2m1", scales = weight.dtype == "f8e8m0";
    if (weight.dtype != "f32" && weight.dtype != "bf16" && weight.dtype != "f8e4m3" && !codes &&
        !scales)
      return Status::error(at + "a constant or normal fill needs dtype f32, bf16, f8e4m3, "
                                "f4e2m1 or f8e8m0, not " + weight.dtype);
    if (codes && (weight.fill != Fill::Normal || weight.shape.empty() ||
                  weight.shape.back() % 32 != 0))
      return Status::error(at + "an f4e2m1 fill is a normal fill of rows of whole 32-blocks");
    if (scales) {
      uint32_t bits;
      std::memcpy(&bits, &weight.value, 4);
      uint32_t exponent = (bits >> 23) & 0xFF;
      if (weight.fill != Fill::Constant || (bits & 0x807FFFFFu) != 0 || exponent == 0 ||
          exponent == 0xFF)
        return Status::error(at + "an f8e8m0 fill is a constant power of two (2^-126 to 2^127)");
    }
    uint64_t bytes = 0;
    // Codes: two a byte (the rows hold whole blocks, so no padding).
    if (!shapeBytes(weight.shape, codes ? 1 : weightDTypeBytes(weight.dtype), bytes))
      return Status::error(at + "shape " + printShape(weight.shape) + " is too large");
    if (codes)
      bytes /= 2;
    if (bytes != weight.bytes)
      return Status::error(at + "holds " + std::to_string(weight.bytes) + " bytes, but " +
                           weight.dtype + " " + printShape(weight.shape) + " needs " +
                           std::to_string(bytes));
    // A rank's normal shard starts the generator at a whole group of four.
    if (weight.shard && weight.fill == Fill::Normal &&
        (bytes / weightDTypeBytes(weight.dtype)) % 4 != 0)
      return Status::error(at + "a normal shard needs a multiple of 4 elements");
  }
  if (normal != manifest.hasRandomSeed)
    return Status::error(path + (normal ? ": normal fills need a random_seed line"
                                        : ": random_seed without a normal fill"));
  return Status::ok();
}
} // namespace

Status parseManifest(std::string_view text, const std::string &path, Manifest &out) {
  Manifest manifest;
  manifest.library.clear();
  manifest.weightsFile.clear();
  std::istringstream file{std::string(text)};
  std::string line;
  int lineNumber = 0;
  bool sawHeader = false, sawWorkspace = false, sawHashes = false, sawManifestHash = false;
  std::vector<size_t> filled; // weights with a fill field
  size_t lineStart = 0; // of `line` in `text`
  auto error = [&](const std::string &why) {
    return Status::error(path + ":" + std::to_string(lineNumber) + ": " + why);
  };
  for (; std::getline(file, line); lineStart += line.size() + 1) {
    ++lineNumber;
    if (sawManifestHash)
      return error("text after the manifest_hash line");
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (!sawHeader) {
      std::string version;
      if (key != kManifestMagic || !(fields >> version))
        return error(std::string("not a moec artifact manifest (no '") + kManifestMagic +
                     " VERSION' line first)");
      if (version != std::to_string(kManifestVersion))
        return error("manifest version " + version + " is not supported (this runtime reads " +
                     "version " + std::to_string(kManifestVersion) + ")");
      sawHeader = true;
      continue;
    }
    bool ok = true;
    std::string a, b, c, d, e;
    uint64_t count = 0;
    if (key == "target") {
      ok = static_cast<bool>(fields >> manifest.target);
    } else if (key == "library") {
      ok = static_cast<bool>(fields >> manifest.library);
      if (ok && !isPlainName(manifest.library))
        return error("'" + manifest.library + "' must name a file inside the artifact");
    } else if (key == "weights") {
      ok = fields >> manifest.weightsFile >> a && parseCount(a, manifest.weightsBytes);
      if (ok && !isPlainName(manifest.weightsFile))
        return error("'" + manifest.weightsFile + "' must name a file inside the artifact");
    } else if (key == "weights_image") {
      ok = fields >> a && parseCount(a, manifest.imageBytes) &&
           manifest.imageBytes >= kWeightsHeaderBytes;
    } else if (key == "expert_parallel") {
      ok = fields >> a && parseCount(a, count) && count >= 1 &&
           count <= static_cast<uint64_t>(kMaxRanks);
      manifest.epSize = static_cast<int64_t>(count);
    } else if (key == "random_seed") {
      ok = fields >> a && parseSeed(a, manifest.randomSeed);
      manifest.hasRandomSeed = ok;
    } else if (key == "workspace_bytes") {
      ok = fields >> a && parseCount(a, manifest.workspaceBytes);
      sawWorkspace = ok;
    } else if (key == "max_tokens") {
      ok = fields >> a && parseCount(a, count) && count >= 1 &&
           count <= static_cast<uint64_t>(kMaxTokensLimit);
      manifest.maxTokens = static_cast<int64_t>(count);
    } else if (key == "kv_cache") {
      uint64_t batch = 0, positions = 0;
      ok = fields >> a >> b && parseCount(a, batch) && parseCount(b, positions) && batch >= 1 &&
           positions >= 1 && batch <= static_cast<uint64_t>(kMaxTokensLimit) &&
           positions <= static_cast<uint64_t>(kMaxTokensLimit);
      manifest.maxBatch = static_cast<int64_t>(batch);
      manifest.maxSeq = static_cast<int64_t>(positions);
    } else if (key == "input" || key == "output") {
      TensorEntry tensor;
      ok = fields >> tensor.name >> tensor.dtype >> a && isTensorDType(tensor.dtype) &&
           parseShape(a, tensor.shape);
      int dynamic = 0;
      for (int64_t size : tensor.shape)
        dynamic += size < 0;
      ok = ok && dynamic <= 1;
      (key == "input" ? manifest.inputs : manifest.outputs).push_back(std::move(tensor));
    } else if (key == kManifestHashKey) {
      ok = static_cast<bool>(fields >> a) && a.size() == 16;
      if (ok && a != hashText(contentHash(text.data(), lineStart)))
        return error("the manifest's content does not match its manifest_hash (damaged or "
                     "edited)");
      sawManifestHash = true;
    } else if (key == "library_hash") {
      ok = fields >> a && parseHash(a, false, manifest.libraryHash);
      sawHashes = true;
    } else if (key == "weights_sample_hash") {
      ok = fields >> a && parseHash(a, true, manifest.weightsSampleHash);
    } else if (key == "weights_hash") {
      ok = fields >> a && parseHash(a, true, manifest.weightsHash);
    } else if (key == "weight") {
      WeightEntry weight;
      ok = fields >> weight.name >> weight.dtype >> a >> b >> c &&
           isWeightDType(weight.dtype) && parseShape(a, weight.shape) &&
           parseCount(b, weight.offset) && parseCount(c, weight.bytes);
      for (int64_t size : weight.shape)
        ok = ok && size >= 0;
      // A fill (manifests with weights_image, checked below): stored AT,
      // constant VALUE or normal STD.
      if (ok && fields >> d) {
        using Fill = WeightEntry::Fill;
        if (d == "stored") {
          weight.fill = Fill::Stored;
          ok = fields >> e && parseCount(e, weight.source);
        } else if (d == "constant" || d == "normal") {
          weight.fill = d == "constant" ? Fill::Constant : Fill::Normal;
          ok = fields >> e && parseValue(e, weight.value) &&
               (weight.fill == Fill::Constant || weight.value >= 0);
        } else {
          return error("unknown fill '" + d + "' of weight '" + weight.name +
                       "' (stored, constant, normal)");
        }
        e.clear();
        if (ok && fields >> e) {
          ok = e == "shard";
          weight.shard = ok;
          e.clear();
        }
        filled.push_back(manifest.weights.size());
      }
      manifest.weights.push_back(std::move(weight));
    } else {
      return error("unknown entry '" + key + "'");
    }
    if (!ok || fields >> e)
      return error("malformed '" + key + "' entry: " + line);
  }
  if (!sawHeader)
    return Status::error(path + ": empty manifest");
  // A CUDA artifact's model.so carries its own CUDA runtime (cudart_static),
  // so the loader needs none; only a driver and a device at run time.
  if (manifest.target != "cpu" && manifest.target != "cuda")
    return Status::error(path + ": target '" + manifest.target +
                         "' cannot run here (this runtime runs 'cpu' and 'cuda' artifacts)");
  if (manifest.library.empty() || manifest.weightsFile.empty() || manifest.maxTokens < 1 ||
      !sawWorkspace || manifest.outputs.empty())
    return Status::error(path + ": incomplete manifest (needs library, weights, workspace_bytes, "
                                "max_tokens and at least one output)");
  if (manifest.weightsBytes < kWeightsHeaderBytes)
    return Status::error(path + ": weights of " + std::to_string(manifest.weightsBytes) +
                         " bytes cannot hold the " + std::to_string(kWeightsHeaderBytes) +
                         "-byte header");
  if (Status fills = checkFills(manifest, filled, path); !fills)
    return fills;
  // The weights lie in the image: weights.bin, or the one weights_image sizes.
  uint64_t imageBytes = manifest.imageBytes ? manifest.imageBytes : manifest.weightsBytes;
  for (const WeightEntry &weight : manifest.weights)
    if (weight.offset < kWeightsHeaderBytes || weight.offset > imageBytes ||
        weight.bytes > imageBytes - weight.offset)
      return Status::error(path + ": weight '" + weight.name + "' at " +
                           std::to_string(weight.offset) + " (" + std::to_string(weight.bytes) +
                           " bytes) lies outside " +
                           (manifest.imageBytes ? "the weight image of " : "weights of ") +
                           std::to_string(imageBytes) + " bytes");
  if (!sawManifestHash || !sawHashes)
    return Status::error(path + ": no content hashes (library_hash ... manifest_hash): not "
                                "written by this moec, or cut short");
  if (manifest.maxBatch > 0) {
    // A whole model's run is a step of its generation loop (moec.h).
    auto isTokens = [](const TensorEntry &tensor, const char *name) {
      return tensor.name == name && tensor.dtype == "i64" && tensor.shape == std::vector<int64_t>{-1};
    };
    if (manifest.inputs.size() != 3 || !isTokens(manifest.inputs[0], "input_ids") ||
        !isTokens(manifest.inputs[1], "positions") || !isTokens(manifest.inputs[2], "sequences") ||
        manifest.outputs.size() != 1 || manifest.outputs[0].name != "logits" ||
        manifest.outputs[0].dtype != "f32" || manifest.outputs[0].shape.size() != 2 ||
        manifest.outputs[0].shape[0] != -1 || manifest.outputs[0].shape[1] < 1)
      return Status::error(path + ": a kv_cache artifact takes input_ids, positions and "
                                  "sequences (i64 [-1]) and returns logits (f32 [-1,V])");
  }
  if (manifest.weightsSampleHash.empty() != manifest.weightsHash.empty())
    return Status::error(path + ": weights_sample_hash and weights_hash are recorded together");
  out = std::move(manifest);
  return Status::ok();
}

void writeWeightsHeader(uint64_t tensorCount, uint64_t fileBytes, char out[kWeightsHeaderBytes]) {
  std::memset(out, 0, kWeightsHeaderBytes);
  std::memcpy(out, kWeightsMagic, sizeof(kWeightsMagic));
  std::memcpy(out + 8, &kWeightsVersion, sizeof(kWeightsVersion));
  std::memcpy(out + 16, &tensorCount, sizeof(tensorCount));
  std::memcpy(out + 24, &fileBytes, sizeof(fileBytes));
}

Status checkWeightsHeader(const unsigned char *header, uint64_t fileBytes,
                          const std::string &path) {
  if (fileBytes < kWeightsHeaderBytes)
    return Status::error(path + ": " + std::to_string(fileBytes) +
                         " bytes cannot hold the weights header");
  uint32_t version = 0;
  uint64_t recorded = 0;
  std::memcpy(&version, header + 8, sizeof(version));
  std::memcpy(&recorded, header + 24, sizeof(recorded));
  if (std::memcmp(header, kWeightsMagic, sizeof(kWeightsMagic)) != 0)
    return Status::error(path + ": not a moec weights file (bad magic)");
  if (version != kWeightsVersion)
    return Status::error(path + ": weights format version " + std::to_string(version) +
                         " is not supported (this runtime reads version " +
                         std::to_string(kWeightsVersion) + ")");
  if (recorded != fileBytes)
    return Status::error(path + ": header says " + std::to_string(recorded) +
                         " bytes, the file holds " + std::to_string(fileBytes));
  return Status::ok();
}

} // namespace moec::rt::artifact
