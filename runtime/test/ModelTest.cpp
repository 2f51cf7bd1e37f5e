//===- ModelTest.cpp - the artifact loader's checks (moec.h) --------------===//
//
// The loader rejects what is not a usable artifact before anything runs. Full
// runs of generated artifacts are the e2e tests (test/Codegen), which need the
// compiler; these need only the runtime.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/ArtifactFormat.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern "C" const char *moecCApiHeaderCompilesAsC(void);

namespace {

namespace fs = std::filesystem;

class ModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("moec-model-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
           "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string &name, const std::string &text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  }
  std::string loadError() {
    moec_model *model = moec_load(dir.c_str());
    EXPECT_EQ(model, nullptr);
    moec_free(model);
    return moec_last_error();
  }
  fs::path dir;
};

const char *kEntries = "moec-artifact 4\n"
                       "target cpu\n"
                       "library model.so\n"
                       "weights weights.bin 64\n"
                       "workspace_bytes 0\n"
                       "max_tokens 16\n"
                       "input x f32 [-1,4]\n"
                       "output y f32 [-1,4]\n";

/// A manifest of `entries`, with the hash lines a compiled one ends with:
/// model.so's hash (of `library`), the weights' (`weights`, or not recorded),
/// and the manifest's own.
std::string withHashes(const std::string &entries, const std::string &library = "",
                       const std::string *weights = nullptr) {
  namespace artifact = moec::rt::artifact;
  std::string text = entries + "library_hash " +
                     artifact::hashText(artifact::contentHash(library.data(), library.size())) +
                     "\n";
  const auto *bytes = weights ? reinterpret_cast<const unsigned char *>(weights->data()) : nullptr;
  text += "weights_sample_hash " +
          (weights ? artifact::hashText(artifact::weightsSampleHash(bytes, weights->size()))
                   : std::string("-")) +
          "\n";
  text += "weights_hash " +
          (weights ? artifact::hashText(artifact::contentHash(bytes, weights->size()))
                   : std::string("-")) +
          "\n";
  return text + "manifest_hash " + artifact::hashText(artifact::contentHash(text.data(), text.size())) +
         "\n";
}

const std::string kManifest = withHashes(kEntries);

std::string weightsHeader(uint64_t size) {
  std::string header(64, '\0');
  header.replace(0, 8, std::string("MOECWTS\0", 8));
  header[8] = 1;
  std::memcpy(header.data() + 24, &size, 8);
  return header;
}

TEST_F(ModelTest, MissingDirectory) {
  EXPECT_EQ(moec_load((dir / "nowhere").c_str()), nullptr);
  EXPECT_NE(std::string(moec_last_error()).find("not an artifact directory"), std::string::npos)
      << moec_last_error();
  EXPECT_EQ(moec_load(nullptr), nullptr);
  EXPECT_STREQ(moec_last_error(), "moec_load: artifact directory is null");
}

TEST_F(ModelTest, MissingManifest) {
  EXPECT_NE(loadError().find("manifest.txt: cannot open"), std::string::npos);
}

TEST_F(ModelTest, NotAManifest) {
  write("manifest.txt", "hello\n");
  EXPECT_NE(loadError().find("manifest.txt:1: not a moec artifact manifest"), std::string::npos);
}

TEST_F(ModelTest, OtherManifestVersion) {
  write("manifest.txt", "moec-artifact 5\n");
  EXPECT_NE(loadError().find("manifest version 5 is not supported"), std::string::npos);
  write("manifest.txt", "moec-artifact 3\n");
  EXPECT_NE(loadError().find("manifest version 3 is not supported"), std::string::npos);
}

// Weights filled at load (docs/artifact.md): every new field is checked.
TEST_F(ModelTest, WeightFillsChecked) {
  std::string entries = std::string(kEntries) + "weights_image 8192\nrandom_seed 18446744073709551615\n";
  auto expect = [&](const std::string &lines, const std::string &error) {
    write("manifest.txt", withHashes(entries + lines));
    std::string message = loadError();
    EXPECT_NE(message.find(error), std::string::npos) << lines << " -> " << message;
  };
  std::string good = "weight w f32 [4,4] 256 64 normal 0x1.47ae14p-6\n";
  // A valid manifest gets as far as weights.bin.
  expect(good, "weights.bin: cannot open");
  expect("weight w f32 [4,4] 256 64 gaussian 1\n", "unknown fill 'gaussian' of weight 'w'");
  expect("weight w f32 [4,4] 256 64 normal\n", "malformed 'weight' entry");
  expect("weight w f32 [4,4] 256 64 normal -0x1p+0\n", "malformed 'weight' entry");
  expect("weight w f32 [4,4] 256 64 constant inf\n", "malformed 'weight' entry");
  expect("weight w f32 [4,4] 256 64 constant 0.1\n", "malformed 'weight' entry"); // not an f32
  expect("weight w f32 [4,4] 256 64 normal 0x1p+0 extra\n", "malformed 'weight' entry");
  expect("weight w f32 [4,4] 256 64\n", "weight 'w' has no fill");
  expect("weight w f32 [4,4] 8192 64 normal 0x1p+0\n", "lies outside the weight image of 8192");
  expect("weight w f32 [4,4] 300 64 normal 0x1p+0\n", "offset 300 is not a multiple of 256");
  expect("weight w f32 [4,4] 256 60 normal 0x1p+0\n", "holds 60 bytes, but f32 [4,4] needs 64");
  expect("weight w i32 [4,4] 256 64 constant 0x1p+0\n", "needs dtype f32, bf16, f8e4m3, f4e2m1");
  // MXFP4: codes a normal fill of whole 32-blocks (two a byte), scales a
  // constant power of two.
  expect("weight c f4e2m1 [2,64] 256 64 normal 0x1p+1\n", "weights.bin: cannot open");
  expect("weight c f4e2m1 [2,64] 256 128 normal 0x1p+1\n", "holds 128 bytes, but f4e2m1 [2,64] needs 64");
  expect("weight c f4e2m1 [2,40] 256 40 normal 0x1p+1\n", "normal fill of rows of whole 32-blocks");
  expect("weight c f4e2m1 [2,64] 256 64 constant 0x1p+1\n", "normal fill of rows of whole 32-blocks");
  expect("weight s f8e8m0 [2,2] 256 4 constant 0x1p-7\nweight w f32 [4,4] 512 64 normal 0x1p+0\n",
         "weights.bin: cannot open");
  expect("weight s f8e8m0 [2,2] 256 4 constant 0x1.8p-7\n", "constant power of two");
  expect("weight s f8e8m0 [2,2] 256 4 normal 0x1p-7\n", "constant power of two");
  expect("weight w f32 [4,4] 256 64 stored 32\n", "stored at 32 (64 bytes), outside weights of 64");
  expect("weight w f32 [4,4] 256 64 stored 64\n", "stored at 64 (64 bytes), outside weights of 64");
  expect("weight w f32 [4,4] 256 64 constant 0x1p+0\n", "random_seed without a normal fill");
  expect("weight w f32 [4294967296,4294967296] 256 64 normal 0x1p+0\n", "shape [4294967296,4294967296] is too large");
  entries = std::string(kEntries) + "weights_image 8192\n";
  expect(good, "normal fills need a random_seed line");
  entries = std::string(kEntries) + "weights_image 32\n";
  expect(good, "malformed 'weights_image' entry");
  entries = std::string(kEntries) + "weights_image 8192\nrandom_seed 18446744073709551616\n";
  expect(good, "malformed 'random_seed' entry");
  entries = std::string(kEntries) + "random_seed 1\n";
  expect("weight w f32 [4,4] 256 64 normal 0x1p+0\n", "has a fill, but the manifest has no weights_image");
  expect("", "random_seed without weights_image");
}

// One artifact for every expert-parallel rank: the expert_parallel line and
// the shards are checked before anything is read, and a plain load is refused.
TEST_F(ModelTest, ExpertParallelEntriesChecked) {
  std::string entries = std::string(kEntries) + "weights_image 8192\nexpert_parallel 2\n";
  auto expect = [&](const std::string &lines, const std::string &error) {
    write("manifest.txt", withHashes(entries + lines));
    std::string message = loadError();
    EXPECT_NE(message.find(error), std::string::npos) << lines << " -> " << message;
  };
  // weights.bin of 64 bytes holds no slice; a manifest that fits gets as far
  // as the group, which a plain load does not give.
  expect("weight w f32 [4,4] 256 64 stored 64 shard\n",
         "stored at 64 (64 bytes for each of 2 ranks), outside weights of 64");
  expect("weight w f32 [4,4] 256 64 stored 32 shard\n", "outside weights of 64");
  expect("weight w f32 [4,4] 256 64 stored 64 slice\n", "malformed 'weight' entry");
  expect("weight w f32 [4,4] 256 64 stored 64 shard shard\n", "malformed 'weight' entry");
  expect("weight w f32 [3] 256 12 constant 0x1p+0 shard\n", "weights.bin: cannot open");
  entries = std::string(kEntries) + "weights_image 8192\nexpert_parallel 2\nrandom_seed 1\n";
  expect("weight w f32 [3] 256 12 normal 0x1p+0 shard\n",
         "a normal shard needs a multiple of 4 elements");
  entries = std::string(kEntries) + "weights_image 8192\n";
  expect("weight w f32 [4,4] 256 64 constant 0x1p+0 shard\n",
         "is a shard, but the manifest has no expert_parallel line");
  for (const char *bad : {"expert_parallel 0\n", "expert_parallel 65537\n", "expert_parallel x\n"}) {
    entries = std::string(kEntries) + bad;
    expect("", "malformed 'expert_parallel' entry");
  }
}

// The manifest's own hash covers every byte before it; a manifest without the
// hash lines is refused.
TEST_F(ModelTest, ManifestHashChecked) {
  std::string manifest = kManifest;
  manifest.replace(manifest.find("max_tokens 16"), 13, "max_tokens 17");
  write("manifest.txt", manifest);
  EXPECT_NE(loadError().find("manifest.txt:12: the manifest's content does not match its "
                             "manifest_hash"),
            std::string::npos)
      << loadError();
  write("manifest.txt", kEntries);
  EXPECT_NE(loadError().find("no content hashes"), std::string::npos) << loadError();
  write("manifest.txt", kManifest + "max_tokens 4\n");
  EXPECT_NE(loadError().find("text after the manifest_hash line"), std::string::npos)
      << loadError();
}

TEST_F(ModelTest, MalformedEntries) {
  write("manifest.txt", withHashes(std::string(kEntries) + "input z f32 [4,x]\n"));
  EXPECT_NE(loadError().find("manifest.txt:9: malformed 'input' entry"), std::string::npos);
  write("manifest.txt", withHashes(std::string(kEntries) + "colour blue\n"));
  EXPECT_NE(loadError().find("manifest.txt:9: unknown entry 'colour'"), std::string::npos);
  write("manifest.txt", withHashes(std::string(kEntries) + "library_hash 12345\n"));
  EXPECT_NE(loadError().find("manifest.txt:9: malformed 'library_hash' entry"), std::string::npos);
  write("manifest.txt", withHashes(std::string(kEntries) + "library ../elsewhere.so\n"));
  EXPECT_NE(loadError().find("must name a file inside the artifact"), std::string::npos);
}

TEST_F(ModelTest, WeightsChecked) {
  write("manifest.txt", kManifest);
  EXPECT_NE(loadError().find("weights.bin: cannot open"), std::string::npos);
  write("weights.bin", std::string(10, '\0'));
  EXPECT_NE(loadError().find("weights.bin: holds 10 bytes, the manifest says 64"),
            std::string::npos);
  write("weights.bin", std::string(64, 'x'));
  EXPECT_NE(loadError().find("weights.bin: not a moec weights file (bad magic)"),
            std::string::npos);
  write("weights.bin", weightsHeader(64));
  EXPECT_NE(loadError().find("model.so: cannot open"), std::string::npos);
  // model.so is hashed before dlopen reads it.
  write("model.so", "not an ELF file");
  EXPECT_NE(loadError().find("model.so: does not match the manifest's library_hash"),
            std::string::npos)
      << loadError();
  write("manifest.txt", withHashes(kEntries, "not an ELF file"));
  EXPECT_NE(loadError().find("model.so: cannot load"), std::string::npos) << loadError();
}

// Weights with recorded hashes are checked: a sample always (here, being
// small, all of them), in full with MOEC_VERIFY_WEIGHTS=full.
TEST_F(ModelTest, WeightsHashChecked) {
  std::string weights = weightsHeader(64);
  write("manifest.txt", withHashes(kEntries, "", &weights));
  weights[40] = 1; // the header's padding: the header check passes
  write("weights.bin", weights);
  EXPECT_NE(loadError().find("weights.bin: the weights do not match the manifest's "
                             "weights_sample_hash"),
            std::string::npos)
      << loadError();
}

// The hashes of a large file: the sample reads a size-independent part, so a
// flip outside it is seen only by the full hash.
TEST_F(ModelTest, SampledWeightsHash) {
  namespace artifact = moec::rt::artifact;
  std::vector<unsigned char> data(4 << 20, 7);
  uint64_t sample = artifact::weightsSampleHash(data.data(), data.size());
  uint64_t full = artifact::contentHash(data.data(), data.size());
  data[200000] ^= 1; // between the sampled blocks
  EXPECT_EQ(artifact::weightsSampleHash(data.data(), data.size()), sample);
  EXPECT_NE(artifact::contentHash(data.data(), data.size()), full);
  data[100] ^= 1; // in the first 64 KiB
  EXPECT_NE(artifact::weightsSampleHash(data.data(), data.size()), sample);
  data.pop_back(); // the length counts
  EXPECT_NE(artifact::contentHash(data.data(), data.size()), full);
}

// A cuda artifact is checked like a cpu one; its model.so brings CUDA along,
// so this loader (built with or without CUDA) accepts the target.
TEST_F(ModelTest, CudaTargetAccepted) {
  std::string entries = kEntries;
  entries.replace(entries.find("target cpu"), 10, "target cuda");
  write("manifest.txt", withHashes(entries));
  write("weights.bin", weightsHeader(64));
  std::string error = loadError();
  EXPECT_EQ(error.find("cannot run here"), std::string::npos) << error;
  EXPECT_NE(error.find("model.so: cannot open"), std::string::npos) << error;
  entries.replace(entries.find("target cuda"), 11, "target rocm");
  write("manifest.txt", withHashes(entries));
  EXPECT_NE(loadError().find("target 'rocm' cannot run here (this runtime runs 'cpu' and 'cuda' "
                             "artifacts)"),
            std::string::npos);
}

TEST_F(ModelTest, NullModel) {
  EXPECT_EQ(moec_run(nullptr, nullptr, 0, nullptr, 0), -1);
  EXPECT_STREQ(moec_last_error(), "moec_run: model is null");
  EXPECT_EQ(moec_run_async(nullptr, nullptr, 0, nullptr, 0, nullptr), -1);
  EXPECT_STREQ(moec_last_error(), "moec_run_async: model is null");
  EXPECT_EQ(moec_target(nullptr), nullptr);
  EXPECT_EQ(moec_num_inputs(nullptr), 0u);
  EXPECT_EQ(moec_input_name(nullptr, 0), nullptr);
  moec_free(nullptr);
}

TEST_F(ModelTest, HeaderIsC) {
  EXPECT_NE(std::string(moecCApiHeaderCompilesAsC()).find("not an artifact directory"),
            std::string::npos);
}

} // namespace
