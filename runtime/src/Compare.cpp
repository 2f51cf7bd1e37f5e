//===- Compare.cpp - outputs against expected arrays ----------------------===//

#include "moec/runtime/Compare.h"
#include "moec/runtime/Float8.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace moec::rt {
namespace {

double fromF16(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  double magnitude;
  if (exponent == 0x1F)
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<double>(mantissa), -24); // subnormal: m * 2^-24
  else
    magnitude = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

double fromBF16(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

std::string printf2(const char *format, double a, double b) {
  char text[96];
  std::snprintf(text, sizeof(text), format, a, b);
  return text;
}

} // namespace

std::vector<double> valuesAsDoubles(const HostTensor &tensor) {
  std::vector<double> values(static_cast<size_t>(tensor.numElements()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (tensor.dtype()) {
    case DType::F16:
      values[i] = fromF16(tensor.dataAs<uint16_t>()[i]);
      break;
    case DType::BF16:
      values[i] = fromBF16(tensor.dataAs<uint16_t>()[i]);
      break;
    case DType::F32:
      values[i] = tensor.dataAs<float>()[i];
      break;
    case DType::F64:
      values[i] = tensor.dataAs<double>()[i];
      break;
    case DType::F8E4M3FN:
      values[i] = decodeE4M3(tensor.dataAs<uint8_t>()[i]);
      break;
    case DType::I8:
      values[i] = tensor.dataAs<int8_t>()[i];
      break;
    case DType::I32:
      values[i] = tensor.dataAs<int32_t>()[i];
      break;
    case DType::I64:
      values[i] = static_cast<double>(tensor.dataAs<int64_t>()[i]);
      break;
    case DType::U8:
      values[i] = tensor.dataAs<uint8_t>()[i];
      break;
    case DType::Bool:
      values[i] = tensor.dataAs<uint8_t>()[i] != 0 ? 1.0 : 0.0;
      break;
    }
  }
  return values;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

Comparison compare(const std::vector<int64_t> &shape, const std::vector<double> &got,
                   const HostTensor &expected, const Tolerance &tolerance) {
  Comparison result;
  if (shape != expected.shape()) {
    result.problem = "shape " + formatShape(shape) + " != expected " + formatShape(expected.shape());
    return result;
  }
  std::vector<double> want = valuesAsDoubles(expected);
  result.elements = static_cast<int64_t>(want.size());
  double maxExpected = 0.0, atol = tolerance.atol;
  for (double e : want)
    if (std::isfinite(e))
      maxExpected = std::max(maxExpected, std::fabs(e));
  if (tolerance.scaleAtol)
    atol *= std::max(1.0, maxExpected);
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    double g = got[i], e = want[i];
    if (g == e || (std::isnan(g) && std::isnan(e)))
      continue;
    double diff = std::fabs(g - e);
    if (std::isnan(diff))
      diff = std::numeric_limits<double>::infinity(); // NaN against a number
    result.maxAbsError = std::max(result.maxAbsError, diff);
    if (!(diff <= atol + tolerance.rtol * std::fabs(e)))
      ++result.mismatches;
  }
  result.maxRelError = result.maxAbsError / std::max(maxExpected, 1e-30);
  result.passed = result.mismatches == 0;
  return result;
}

Comparison compare(const HostTensor &got, const HostTensor &expected, const Tolerance &tolerance) {
  return compare(got.shape(), valuesAsDoubles(got), expected, tolerance);
}

bool compareOutputs(const std::vector<NamedOutput> &outputs, const TensorMap &expected,
                    const std::string &expectedPath, const Tolerance &tolerance,
                    std::string &report) {
  bool allPassed = true;
  for (const auto &[name, tensor] : outputs) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      report += name + ": MISSING from " + expectedPath + "\n";
      allPassed = false;
      continue;
    }
    Comparison comparison = compare(*tensor, it->second, tolerance);
    allPassed &= comparison.passed;
    report += name + " " + formatShape(tensor->shape()) + ": ";
    if (!comparison.problem.empty()) {
      report += "MISMATCH: " + comparison.problem + "\n";
      continue;
    }
    report += printf2("max abs err %.2e, max rel err %.2e", comparison.maxAbsError,
                      comparison.maxRelError);
    if (comparison.passed) {
      report += ": ok\n";
      continue;
    }
    report += ": MISMATCH in " + std::to_string(comparison.mismatches) + " of " +
              std::to_string(comparison.elements) + " elements " +
              printf2("(rtol %.1e, atol %.1e", tolerance.rtol, tolerance.atol) +
              (tolerance.scaleAtol ? " x max(1, max|expected|)" : "") + ")\n";
  }
  for (const auto &[name, array] : expected) {
    bool named = std::any_of(outputs.begin(), outputs.end(),
                             [&](const NamedOutput &output) { return output.first == name; });
    if (!named)
      report += "note: " + expectedPath + " array '" + name + "' names no output; not compared\n";
  }
  return allPassed;
}

Status compareOutputsWithFile(const std::vector<NamedOutput> &outputs,
                              const std::string &expectedPath, const Tolerance &tolerance,
                              std::string &report, bool &passed) {
  TensorMap expected;
  MOEC_RETURN_IF_ERROR(readNpz(expectedPath, expected));
  passed = compareOutputs(outputs, expected, expectedPath, tolerance, report);
  return Status::ok();
}

} // namespace moec::rt
