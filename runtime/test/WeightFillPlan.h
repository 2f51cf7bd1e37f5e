//===- WeightFillPlan.h - a weight plan of every fill, for the tests -*- C++ -*-===//
//
// One stored weight, normals in f32, bf16, e4m3 and e2m1 and constants in
// f32, bf16, e4m3 and e8m0, of
// sizes that end in partial Philox groups, at 256-byte offsets: what
// WeightFillTest fills on the host and WeightFillCudaTest on the device.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_TEST_WEIGHTFILLPLAN_H
#define MOEC_RUNTIME_TEST_WEIGHTFILLPLAN_H

#include "moec/runtime/WeightFill.h"

#include <string>
#include <vector>

namespace moec::rt {

/// A plan of every kind, and its image.
struct WeightFillPlan {
  std::vector<moec_weight_fill> fills;
  std::vector<unsigned char> stored;
  moec_weight_plan plan{};
};

inline WeightFillPlan makeWeightFillPlan() {
  WeightFillPlan p;
  p.stored.assign(1024, 0);
  for (int i = 0; i < 768; ++i)
    p.stored[256 + i] = static_cast<unsigned char>(i * 7 + 1);
  uint64_t next = 256;
  auto add = [&](uint64_t count, int32_t kind, int32_t dtype, float value,
                 const std::string &name, uint64_t source = 0) {
    moec_weight_fill f{};
    f.offset = (next + 255) / 256 * 256;
    f.count = count;
    f.kind = kind;
    f.dtype = dtype;
    f.value = value;
    f.source = source;
    f.stream = weightStream(name.data(), name.size());
    next = f.offset + (kind == MOEC_FILL_STORED ? count : fill::fillBytes(dtype, count));
    p.fills.push_back(f);
  };
  add(768, MOEC_FILL_STORED, MOEC_FILL_F32, 0, "rotary.inv_freq", 256);
  add(1000003, MOEC_FILL_NORMAL, MOEC_FILL_F32, 0.02f, "w.f32");
  add(1000001, MOEC_FILL_NORMAL, MOEC_FILL_BF16, 0.02f, "w.bf16");
  add(1000002, MOEC_FILL_NORMAL, MOEC_FILL_E4M3, 64.0f, "w.e4m3");
  add(4099, MOEC_FILL_CONSTANT, MOEC_FILL_F32, 1.0f, "norm.weight");
  add(4097, MOEC_FILL_CONSTANT, MOEC_FILL_BF16, 0.0f, "bias");
  add(1031, MOEC_FILL_CONSTANT, MOEC_FILL_E4M3, 0.3125f, "scales");
  // MXFP4: codes two a byte (an odd count: the last byte half filled), scales.
  add(1000005, MOEC_FILL_NORMAL, MOEC_FILL_E2M1, 2.0f, "w.e2m1");
  add(1029, MOEC_FILL_CONSTANT, MOEC_FILL_E8M0, 0x1p-7f, "w.e8m0_scales");
  p.plan = {next + 100, 0xfeedfacecafebeefull, p.fills.data(), p.fills.size()};
  return p;
}

} // namespace moec::rt

#endif // MOEC_RUNTIME_TEST_WEIGHTFILLPLAN_H
