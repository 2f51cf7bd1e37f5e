// Inputs the importer's fuzzer (scripts/fuzz.sh onnx-import) found to crash it,
// each with the error it must give instead.

// An initializer whose shape claims ~1.9e18 elements but whose typed field holds
// none: the importer once allocated the claimed size before comparing counts.
// RUN: not moec-translate --import-onnx %S/Regressions/typed-field-count-overflow.onnx 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: tensor 'g\x0Ai' holds 0 values, but shape [8, 1, 6, 65, 41, 102, 102, 115, 125, 116, 18, 1, 48] needs 1917424972569600000
// COUNT-NOT: Stack dump
