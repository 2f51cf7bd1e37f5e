//===- CheckpointTestUtil.h - shared by the checkpoint reader's tests ---===//

#ifndef MOEC_TEST_UNIT_CHECKPOINTTESTUTIL_H
#define MOEC_TEST_UNIT_CHECKPOINTTESTUTIL_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

/// `message` holds `part`.
#define EXPECT_HAS(message, part)                                                                  \
  EXPECT_NE(std::string(message).find(part), std::string::npos) << (message)

namespace moec::checkpoint::test {

/// The fixtures' checkpoint directories: test/fixtures/models/<model>/<name>
/// for each name starting with "checkpoint", sorted.
inline std::vector<std::string> fixtureCheckpoints() {
  llvm::SmallString<256> models(MOEC_SOURCE_DIR);
  llvm::sys::path::append(models, "test", "fixtures", "models");
  std::vector<std::string> dirs;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator model(models, ec), end; !ec && model != end;
       model.increment(ec)) {
    std::error_code inner;
    for (llvm::sys::fs::directory_iterator entry(model->path(), inner); !inner && entry != end;
         entry.increment(inner))
      if (llvm::sys::path::filename(entry->path()).starts_with("checkpoint") &&
          llvm::sys::fs::is_directory(entry->path()))
        dirs.push_back(entry->path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

} // namespace moec::checkpoint::test

#endif // MOEC_TEST_UNIT_CHECKPOINTTESTUTIL_H
