//===- CompareTest.cpp - outputs against expected arrays (Compare.h) ------===//

#include "moec/runtime/Compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace moec::rt;

namespace {

template <typename T> HostTensor tensorOf(DType dtype, std::vector<int64_t> shape,
                                          std::vector<T> values) {
  HostTensor tensor(dtype, std::move(shape));
  std::memcpy(tensor.data(), values.data(), values.size() * sizeof(T));
  return tensor;
}

TEST(Compare, DecodesEveryDtypeExactly) {
  // f16 1.5, -2^-24 (subnormal), inf; bf16 -3.0; e4m3 448, -2^-9; bool.
  EXPECT_EQ(valuesAsDoubles(tensorOf<uint16_t>(DType::F16, {3}, {0x3E00, 0x8001, 0x7C00})),
            (std::vector<double>{1.5, -0x1p-24, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(valuesAsDoubles(tensorOf<uint16_t>(DType::BF16, {1}, {0xC040})),
            std::vector<double>{-3.0});
  EXPECT_EQ(valuesAsDoubles(tensorOf<uint8_t>(DType::F8E4M3FN, {2}, {0x7E, 0x81})),
            (std::vector<double>{448.0, -0x1p-9}));
  EXPECT_EQ(valuesAsDoubles(tensorOf<uint8_t>(DType::Bool, {2}, {0, 7})),
            (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(valuesAsDoubles(tensorOf<int64_t>(DType::I64, {1}, {-(int64_t(1) << 40)})),
            std::vector<double>{-0x1p40});
}

TEST(Compare, AppliesTolerancesAndNaNRules) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor want = tensorOf<double>(DType::F64, {4}, {1.0, nan, 100.0, 0.0});
  // Within atol + rtol·|e| (1e-6 + 1e-5·100 = 1.001e-3) and NaN against NaN.
  Comparison ok = compare(tensorOf<float>(DType::F32, {4}, {1.0f, NAN, 100.0009f, 0.0f}), want, {});
  EXPECT_TRUE(ok.passed);
  EXPECT_EQ(ok.elements, 4);
  // NaN against a number: an infinite error, a mismatch.
  Comparison bad = compare(tensorOf<float>(DType::F32, {4}, {NAN, NAN, 100.0f, 1e-3f}), want, {});
  EXPECT_FALSE(bad.passed);
  EXPECT_EQ(bad.mismatches, 2);
  EXPECT_TRUE(std::isinf(bad.maxAbsError));
  // --scale-atol: atol 1e-6 times max |expected| = 100.
  Tolerance scaled{0.0, 1e-6, true};
  EXPECT_TRUE(compare(tensorOf<float>(DType::F32, {4}, {1.00005f, NAN, 100.0f, 5e-5f}), want,
                      scaled)
                  .passed);
  Comparison shape = compare(tensorOf<float>(DType::F32, {2, 2}, {0, 0, 0, 0}), want, {});
  EXPECT_FALSE(shape.passed);
  EXPECT_EQ(shape.problem, "shape [2, 2] != expected [4]");
}

TEST(Compare, ReportsEachOutputAndUnusedArrays) {
  TensorMap expected;
  expected["a"] = tensorOf<float>(DType::F32, {1, 2}, {1.0f, 2.0f});
  expected["b"] = tensorOf<int32_t>(DType::I32, {2}, {3, 4});
  expected["extra"] = tensorOf<int32_t>(DType::I32, {1}, {0});
  HostTensor a = tensorOf<float>(DType::F32, {1, 2}, {1.0f, 2.0f});
  HostTensor b = tensorOf<int64_t>(DType::I64, {2}, {3, 5});
  HostTensor c = tensorOf<float>(DType::F32, {1}, {0.0f});
  std::string report;
  EXPECT_FALSE(compareOutputs({{"a", &a}, {"b", &b}, {"c", &c}}, expected, "ref.npz", {}, report));
  EXPECT_EQ(report, "a [1, 2]: max abs err 0.00e+00, max rel err 0.00e+00: ok\n"
                    "b [2]: max abs err 1.00e+00, max rel err 2.50e-01: MISMATCH in 1 of 2 "
                    "elements (rtol 1.0e-05, atol 1.0e-06)\n"
                    "c: MISSING from ref.npz\n"
                    "note: ref.npz array 'extra' names no output; not compared\n");
}

} // namespace
