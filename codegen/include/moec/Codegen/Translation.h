//===- Translation.h - the printers as MLIR translations -------*- C++ -*-===//
//
// `--emit-cpp` and `--emit-cuda` for moec-translate: a module in the grouped
// (or fp8) phase printed as the CPU or CUDA target's source, to stdout or -o,
// without writing an artifact or running a compiler. Options of the printers:
// --max-tokens and --weights=external. The precision and the stream plan are
// the IR's (moec compile --target=... --emit=mlir writes it).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CODEGEN_TRANSLATION_H
#define MOEC_CODEGEN_TRANSLATION_H

namespace moec::codegen {

/// Registers the translations and their command-line options. Call it once,
/// before parsing the command line (the options exist only in tools that
/// call it, so they do not clash with moec compile's own).
void registerEmitTranslations();

} // namespace moec::codegen

#endif // MOEC_CODEGEN_TRANSLATION_H
