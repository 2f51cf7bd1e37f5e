//===- Compare.h - outputs against expected arrays --------------*- C++ -*-===//
//
// The check behind `--expected-outputs REF.npz [--rtol R] [--atol A]
// [--scale-atol]` of moec-run and moec-interp, written once: each output is
// compared elementwise with the array of its name,
//   |got - expected| <= atol + rtol * |expected|,
// where equal values (infinities too) and NaN against NaN pass, and
// --scale-atol multiplies atol by max(1, max |expected|) per output (the
// criterion of test/fixtures/check_onnxruntime.py, for references that are
// themselves f32 results). Arrays of any dtype of Tensor.h are compared by
// value (f16, bf16 and e4m3 decoded exactly).
//
// The report has one line per output,
//   NAME [2, 3]: max abs err 1.20e-07, max rel err 3.40e-08: ok
//   NAME [2, 3]: max abs err ..., max rel err ...: MISMATCH in 4 of 6 elements (rtol 1.0e-05, atol 1.0e-06)
//   NAME [2, 3]: MISMATCH: shape [2, 3] != expected [3, 2]
//   NAME: MISSING from REF.npz
// and a note for each array of REF.npz that names no output. Part of
// moec_tooling (moec::tooling).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_COMPARE_H
#define MOEC_RUNTIME_COMPARE_H

#include "moec/runtime/Npz.h"
#include "moec/runtime/Status.h"
#include "moec/runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace moec::rt {

/// Exit statuses of the tools that compare: 0 all outputs match, 1 some output
/// differs (kCompareMismatch), 2 anything else went wrong.
inline constexpr int kCompareMismatch = 1;

struct Tolerance {
  double rtol = 1e-5, atol = 1e-6;
  /// Multiply atol by max(1, max |expected|) per output.
  bool scaleAtol = false;
};

/// How one output compares with its expected array.
struct Comparison {
  bool passed = false;
  double maxAbsError = 0.0;
  /// max |got - expected| / max |expected| (as test/fixtures/check_onnxruntime.py).
  double maxRelError = 0.0;
  int64_t mismatches = 0, elements = 0;
  /// Why it failed beyond values (a shape); empty otherwise.
  std::string problem;
};

/// The values of `tensor` as doubles (exact for every dtype).
std::vector<double> valuesAsDoubles(const HostTensor &tensor);

/// Compares `got` with `expected` elementwise (see above).
Comparison compare(const HostTensor &got, const HostTensor &expected, const Tolerance &tolerance);
/// The same for values already in doubles, of shape `shape`.
Comparison compare(const std::vector<int64_t> &shape, const std::vector<double> &got,
                   const HostTensor &expected, const Tolerance &tolerance);

/// "[2, 3]".
std::string formatShape(const std::vector<int64_t> &shape);

/// One output: its name and a tensor that outlives the call.
using NamedOutput = std::pair<std::string, const HostTensor *>;

/// Compares `outputs` (in this order) with the arrays of `expected`, read from
/// `expectedPath` (named in the report), and appends the report to `report`.
/// Returns whether every output has its array and matches it.
bool compareOutputs(const std::vector<NamedOutput> &outputs, const TensorMap &expected,
                    const std::string &expectedPath, const Tolerance &tolerance,
                    std::string &report);

/// Reads `expectedPath` and compares as above; a file that cannot be read is
/// the Status's error, a mismatch is `passed` false.
Status compareOutputsWithFile(const std::vector<NamedOutput> &outputs,
                              const std::string &expectedPath, const Tolerance &tolerance,
                              std::string &report, bool &passed);

} // namespace moec::rt

#endif // MOEC_RUNTIME_COMPARE_H
