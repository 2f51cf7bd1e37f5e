//===- EnvironmentTest.cpp - the launchers' variables, checked -------------===//

#include "TestUtil.h"
#include "moec/runtime/dist/Environment.h"

#include <map>

namespace moec::rt::test {
namespace {

using dist::DistEnvironment;
using Variables = std::map<std::string, std::string>;

Status parse(const Variables &variables, DistEnvironment &env) {
  return dist::parseDistEnvironment(
      [&](const char *name) -> const char * {
        auto it = variables.find(name);
        return it == variables.end() ? nullptr : it->second.c_str();
      },
      env);
}

TEST(DistEnvironment, DefaultsToOneProcess) {
  DistEnvironment env;
  ASSERT_OK(parse({}, env));
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.worldSize, 1);
  EXPECT_EQ(env.localRank, 0);
  EXPECT_EQ(env.masterAddress, "127.0.0.1");
  EXPECT_EQ(env.masterPort, 29500);
  EXPECT_EQ(env.timeout.count(), 300000);
}

TEST(DistEnvironment, ReadsTorchrunAndOpenMPINames) {
  DistEnvironment env;
  ASSERT_OK(parse({{"RANK", "3"},
                   {"WORLD_SIZE", "8"},
                   {"LOCAL_RANK", "1"},
                   {"MASTER_ADDR", "node-0"},
                   {"MASTER_PORT", "12345"},
                   {"MOEC_DIST_TIMEOUT", "2.5"}},
                  env));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.worldSize, 8);
  EXPECT_EQ(env.localRank, 1);
  EXPECT_EQ(env.masterAddress, "node-0");
  EXPECT_EQ(env.masterPort, 12345);
  EXPECT_EQ(env.timeout.count(), 2500);

  ASSERT_OK(parse({{"OMPI_COMM_WORLD_RANK", "2"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}},
                  env));
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.worldSize, 4);
  EXPECT_EQ(env.localRank, 0);
  // Both spellings, agreeing; no LOCAL_RANK: the rank.
  ASSERT_OK(parse({{"RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"WORLD_SIZE", "2"}}, env));
  EXPECT_EQ(env.localRank, 1);
}

TEST(DistEnvironment, RefusesWhatDoesNotFit) {
  struct Case {
    Variables variables;
    const char *error;
  };
  std::vector<Case> cases = {
      {{{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK='one' is not a non-negative integer"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK='-1'"},
      {{{"RANK", " 1"}, {"WORLD_SIZE", "2"}}, "RANK=' 1'"},
      {{{"RANK", "1x"}, {"WORLD_SIZE", "2"}}, "RANK='1x'"},
      {{{"RANK", ""}, {"WORLD_SIZE", "2"}}, "RANK=''"},
      {{{"RANK", "99999999999999999999"}, {"WORLD_SIZE", "2"}}, "RANK="},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is not below WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 is outside 1..65536"},
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"WORLD_SIZE", "4"}}, "WORLD_SIZE=4 is set but RANK is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}, "LOCAL_RANK=2 is not below"},
      {{{"RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"WORLD_SIZE", "2"}},
       "RANK=1 and OMPI_COMM_WORLD_RANK=0 disagree"},
      {{{"MASTER_PORT", "0"}}, "MASTER_PORT=0 is outside 1..65535"},
      {{{"MASTER_PORT", "70000"}}, "MASTER_PORT=70000 is outside"},
      {{{"MASTER_PORT", "http"}}, "MASTER_PORT='http'"},
      {{{"MASTER_ADDR", ""}}, "MASTER_ADDR is empty"},
      {{{"MOEC_DIST_TIMEOUT", "0"}}, "MOEC_DIST_TIMEOUT='0'"},
      {{{"MOEC_DIST_TIMEOUT", "soon"}}, "MOEC_DIST_TIMEOUT='soon'"},
      {{{"MOEC_DIST_TIMEOUT", "nan"}}, "MOEC_DIST_TIMEOUT='nan'"},
  };
  for (const Case &c : cases) {
    DistEnvironment env;
    Status status = parse(c.variables, env);
    ASSERT_FALSE(status.isOk()) << c.error;
    EXPECT_NE(status.message().find(c.error), std::string::npos) << status.message();
  }
}

// A rank's GPU, through CUDA_VISIBLE_DEVICES: unset, its local rank; one
// entry, kept; several, the local rank's; empty (no GPU), kept.
TEST(DistEnvironment, VisibleDevicesForRank) {
  struct Case {
    const char *visible;
    int localRank;
    std::string expected;
  };
  const Case cases[] = {
      {nullptr, 0, "0"},      {nullptr, 3, "3"},          {"5", 0, "5"},
      {"5", 2, "5"},          {"4,5,6", 1, "5"},          {"4, 5 ,6", 2, "6"},
      {"GPU-a,GPU-b", 1, "GPU-b"}, {"", 1, ""},
  };
  for (const Case &c : cases) {
    std::string out = "unset";
    Status status = dist::visibleDevicesForRank(c.visible, c.localRank, out);
    ASSERT_TRUE(status.isOk()) << status.message();
    EXPECT_EQ(out, c.expected) << (c.visible ? c.visible : "(unset)") << " rank " << c.localRank;
  }
  std::string out;
  Status status = dist::visibleDevicesForRank("0,1", 2, out);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("CUDA_VISIBLE_DEVICES='0,1' names 2 devices, none for local "
                                  "rank 2"),
            std::string::npos)
      << status.message();
}

} // namespace
} // namespace moec::rt::test
