//===- moec-interp.cpp - runs a function with the reference interpreter ---===//
//
//   moec-interp FILE.mlir|FILE.onnx [--inputs IN.npz] [--outputs OUT.npz]
//               [--expected-outputs REF.npz [--rtol R] [--atol A] [--scale-atol]]
//               [--function NAME] [--print] [--ignore-extra-inputs] [--ep-rank R]
//
// Evaluates one func.func in f64 (interpreter/include/moec/Interpreter) on the
// arrays of IN.npz, keyed by argument name (HostIO.h says how names and dtypes
// are matched), writes the results to OUT.npz (atomically), compares them with
// REF.npz and prints them as text with --print. An .onnx file is imported
// first, as `moec-translate --import-onnx` would.
//
// Exit status: 0 on success, 1 when an output differs from REF.npz, 2 on any
// other error (bad input, unsupported op, ...), which is printed with the
// location of the op at fault.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler/InitAllDialects.h"
#include "moec/Frontends/ONNX/Import.h"
#include "moec/Interpreter/HostIO.h"
#include "moec/Interpreter/Interpreter.h"
#include "moec/runtime/Compare.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
namespace cl = llvm::cl;
namespace interp = moec::interp;

namespace {

cl::OptionCategory category("moec-interp options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir or .onnx file>"),
                               cl::Required, cl::cat(category));
cl::opt<std::string> inputsPath("inputs", cl::desc("arguments, one array per argument name"),
                                cl::value_desc("IN.npz"), cl::cat(category));
cl::opt<std::string> outputsPath("outputs", cl::desc("write the results here"),
                                 cl::value_desc("OUT.npz"), cl::cat(category));
cl::opt<std::string> expectedPath("expected-outputs",
                                  cl::desc("compare every result with the array of its name"),
                                  cl::value_desc("REF.npz"), cl::cat(category));
cl::opt<double> relTolerance("rtol", cl::desc("relative tolerance of --expected-outputs"),
                             cl::init(1e-5), cl::cat(category));
cl::opt<double> absTolerance("atol", cl::desc("absolute tolerance of --expected-outputs"),
                             cl::init(1e-6), cl::cat(category));
cl::opt<bool> scaleAtol("scale-atol",
                        cl::desc("multiply atol by max(1, max |expected|) per output, as "
                                 "test/fixtures/check_onnxruntime.py does"),
                        cl::cat(category));
cl::opt<std::string> functionName("function",
                                  cl::desc("the function to run (default: the only one)"),
                                  cl::value_desc("NAME"), cl::cat(category));
cl::opt<int64_t> epRank("ep-rank",
                        cl::desc("run a program partitioned for every expert-parallel rank "
                                 "(moec compile --ep-size=N) as rank R; moe.all_reduce then "
                                 "yields this rank's partial sum"),
                        cl::value_desc("R"), cl::init(-1), cl::cat(category));
cl::opt<bool> printResults("print", cl::desc("print the results as text"), cl::cat(category));
cl::opt<bool> ignoreExtraInputs(
    "ignore-extra-inputs",
    cl::desc("skip arrays of --inputs that name no argument (a prompt.npz's attention_mask "
             "for a model that takes input_ids alone)"),
    cl::cat(category));

constexpr int kError = 2;

int fail(const llvm::Twine &message) {
  llvm::errs() << "moec-interp: error: " << message << "\n";
  return kError;
}

/// Diagnostics of an imported .onnx model: there is no source text to quote, and
/// the op's location is the node's name (a NameLoc over the file), which
/// SourceMgrDiagnosticHandler would drop. Prints "model.onnx: node 'n': error: ...".
LogicalResult printONNXDiagnostic(Diagnostic &diagnostic) {
  std::string node;
  diagnostic.getLocation()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc); name && node.empty())
      node = name.getName().str();
    return WalkResult::advance();
  });
  auto print = [&](Diagnostic &d, StringRef severity) {
    llvm::errs() << inputFile << ": ";
    // The importer's own messages name the node already.
    if (!node.empty() && !llvm::StringRef(d.str()).starts_with("node '"))
      llvm::errs() << "node '" << node << "': ";
    llvm::errs() << severity << ": " << d.str() << "\n";
  };
  print(diagnostic, diagnostic.getSeverity() == DiagnosticSeverity::Error ? "error" : "note");
  for (Diagnostic &note : diagnostic.getNotes())
    print(note, "note");
  return success();
}

OwningOpRef<ModuleOp> load(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(inputFile, &message);
  if (!buffer) {
    llvm::errs() << "moec-interp: error: " << message << "\n";
    return nullptr;
  }
  if (llvm::StringRef(inputFile).ends_with(".onnx")) {
    OwningOpRef<ModuleOp> module = moec::onnx::importModel(*buffer, inputFile, context);
    if (module && failed(verify(*module)))
      return nullptr;
    return module;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
}

/// The function to run: --function, else the module's only function with a body.
func::FuncOp selectFunction(ModuleOp module) {
  SmallVector<func::FuncOp> candidates;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      candidates.push_back(function);
  if (!functionName.empty()) {
    for (func::FuncOp function : candidates)
      if (function.getSymName() == functionName)
        return function;
    fail("no function @" + functionName + " with a body in " + inputFile);
    return nullptr;
  }
  if (candidates.size() == 1)
    return candidates.front();
  std::string names;
  for (func::FuncOp function : candidates)
    names += (names.empty() ? "@" : ", @") + function.getSymName().str();
  fail(llvm::formatv("{0} holds {1} functions ({2}); choose one with --function", inputFile,
                     candidates.size(), names.empty() ? "none" : names));
  return nullptr;
}

/// One element as text: f64 with 17 digits, other floats with 9 (enough to
/// tell f32 values apart), integers exactly, i1 as true/false.
void printElement(llvm::raw_ostream &os, interp::ElementType type, double value) {
  if (type == interp::ElementType::I1) {
    os << (value != 0.0 ? "true" : "false");
  } else if (!interp::isFloat(type)) {
    os << interp::toInt64(value);
  } else if (std::isnan(value)) {
    os << "nan";
  } else {
    char text[32];
    std::snprintf(text, sizeof(text), type == interp::ElementType::F64 ? "%.17g" : "%.9g", value);
    os << text;
  }
}

void printNested(llvm::raw_ostream &os, const interp::Tensor &tensor, size_t dim, int64_t &next) {
  if (dim == tensor.shape.size()) {
    printElement(os, tensor.elementType, tensor.values[next++]);
    return;
  }
  os << '[';
  for (int64_t i = 0; i < tensor.shape[dim]; ++i) {
    if (i)
      os << ", ";
    printNested(os, tensor, dim + 1, next);
  }
  os << ']';
}

/// "name = tensor<2x3xf32> [[1, 2, 3], [4, 5, 6]]"
void printTensor(llvm::raw_ostream &os, const std::string &name, const interp::Tensor &tensor) {
  os << name << " = tensor<";
  for (int64_t size : tensor.shape)
    os << size << 'x';
  os << interp::stringify(tensor.elementType) << "> ";
  int64_t next = 0;
  printNested(os, tensor, 0, next);
  os << '\n';
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "moec-interp: runs a function of moec's IR in f64 on .npz "
                              "inputs\n");
  // cl::opt<double> takes "nan", "inf", "1e999" and negative numbers.
  for (auto [flag, value] : {std::pair{"--rtol", relTolerance.getValue()},
                             std::pair{"--atol", absTolerance.getValue()}})
    if (!std::isfinite(value) || value < 0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", value);
      return fail(llvm::Twine(flag) + ": not a finite non-negative number: " + text);
    }

  DialectRegistry registry;
  moec::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::optional<ScopedDiagnosticHandler> onnxDiagnostics;
  if (llvm::StringRef(inputFile).ends_with(".onnx"))
    onnxDiagnostics.emplace(&context, printONNXDiagnostic);

  OwningOpRef<ModuleOp> module = load(context, sourceMgr);
  if (!module)
    return kError;
  func::FuncOp function = selectFunction(*module);
  if (!function)
    return kError;

  moec::rt::TensorMap inputs;
  if (!inputsPath.empty()) {
    moec::rt::Status status = moec::rt::readNpz(inputsPath, inputs);
    if (!status)
      return fail(status.message());
  } else if (function.getNumArguments() != 0) {
    return fail("@" + function.getSymName() + " takes " + llvm::Twine(function.getNumArguments()) +
                " arguments; give them with --inputs");
  }
  if (ignoreExtraInputs) {
    std::vector<std::string> argumentNames;
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
      argumentNames.push_back(interp::argumentName(function, i));
    for (auto it = inputs.begin(); it != inputs.end();)
      it = llvm::is_contained(argumentNames, it->first) ? std::next(it) : inputs.erase(it);
  }
  llvm::Expected<SmallVector<interp::Tensor>> arguments = interp::bindArguments(function, inputs);
  if (!arguments)
    return fail(inputsPath + ": " + llvm::toString(arguments.takeError()));

  FailureOr<SmallVector<interp::Tensor>> results =
      interp::interpret(function, *arguments, interp::InterpretOptions{epRank});
  if (failed(results))
    return kError;

  std::vector<std::string> names;
  for (unsigned i = 0; i < results->size(); ++i) {
    std::string name = interp::resultName(function, i);
    if (llvm::is_contained(names, name))
      return fail("results of @" + function.getSymName() + " share the name '" + name + "'");
    names.push_back(name);
  }

  if (printResults)
    for (auto [name, tensor] : llvm::zip(names, *results))
      printTensor(llvm::outs(), name, tensor);

  // Results as host tensors (exact: values are rounded to their element type),
  // for OUT.npz and for the comparison of moec-run (moec/runtime/Compare.h).
  std::vector<moec::rt::HostTensor> hostResults;
  for (const interp::Tensor &tensor : *results)
    hostResults.push_back(interp::toHostTensor(tensor));

  if (!outputsPath.empty()) {
    moec::rt::TensorMap outputs;
    for (auto [name, tensor] : llvm::zip(names, hostResults))
      outputs[name] = tensor.clone();
    moec::rt::Status status = moec::rt::writeNpz(outputsPath, outputs);
    if (!status)
      return fail(status.message());
  }

  if (expectedPath.empty())
    return 0;
  std::vector<moec::rt::NamedOutput> named;
  for (auto [name, tensor] : llvm::zip(names, hostResults))
    named.emplace_back(name, &tensor);
  moec::rt::Tolerance tolerance{relTolerance, absTolerance, scaleAtol};
  std::string report;
  bool passed = false;
  if (moec::rt::Status status =
          moec::rt::compareOutputsWithFile(named, expectedPath, tolerance, report, passed);
      !status)
    return fail(status.message());
  llvm::outs() << report;
  return passed ? 0 : moec::rt::kCompareMismatch;
}
