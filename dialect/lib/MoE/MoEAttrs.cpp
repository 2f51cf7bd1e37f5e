//===- MoEAttrs.cpp - moe dialect attributes -------------------------------===//
//
// #moe.activation prints only the parameters that differ from their defaults,
// so the common cases read as #moe.activation<silu>.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace moec::moe;

#define GET_ATTRDEF_CLASSES
#include "moec/Dialect/MoE/MoEAttrs.cpp.inc"

void MoEDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "moec/Dialect/MoE/MoEAttrs.cpp.inc"
      >();
}

namespace {
constexpr double kDefaultAlpha = 1.0;
constexpr double kDefaultBeta = 0.0;
constexpr double kDefaultLimit = std::numeric_limits<double>::infinity();
} // namespace

ActivationAttr ActivationAttr::get(MLIRContext *context, ActivationKind kind,
                                   double alpha, double beta, double limit) {
  return Base::get(context, kind, llvm::APFloat(alpha), llvm::APFloat(beta),
                   llvm::APFloat(limit));
}

bool ActivationAttr::hasSwiGLUParameters() const {
  return getAlphaValue() != kDefaultAlpha || getBetaValue() != kDefaultBeta ||
         getLimitValue() != kDefaultLimit;
}

LogicalResult
ActivationAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ActivationKind kind, llvm::APFloat alpha, llvm::APFloat beta,
                       llvm::APFloat limit) {
  double a = alpha.convertToDouble(), b = beta.convertToDouble(),
         l = limit.convertToDouble();
  bool customized = a != kDefaultAlpha || b != kDefaultBeta || l != kDefaultLimit;
  if (customized && kind != ActivationKind::SiLU)
    return emitError() << "alpha, beta and limit apply only to 'silu' (SwiGLU), not '"
                       << stringifyActivationKind(kind) << "'";
  if (!std::isfinite(a) || !std::isfinite(b))
    return emitError() << "alpha and beta must be finite, got alpha = " << a
                       << ", beta = " << b;
  if (!(l > 0.0))
    return emitError() << "limit must be positive (or +inf for none), got " << l;
  return success();
}

// #moe.activation<kind (, alpha = A)? (, beta = B)? (, limit = L)?>
Attribute ActivationAttr::parse(AsmParser &parser, Type) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<ActivationKind> kind = symbolizeActivationKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown activation '" << keyword
                          << "'; expected silu, gelu, relu or identity";
    return {};
  }
  double alpha = kDefaultAlpha, beta = kDefaultBeta, limit = kDefaultLimit;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    double value;
    if (parser.parseKeyword(&key) || parser.parseEqual() || parser.parseFloat(value))
      return {};
    if (key == "alpha")
      alpha = value;
    else if (key == "beta")
      beta = value;
    else if (key == "limit")
      limit = value;
    else {
      parser.emitError(keyLoc) << "unknown activation parameter '" << key
                               << "'; expected alpha, beta or limit";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, context, *kind,
                    llvm::APFloat(alpha), llvm::APFloat(beta), llvm::APFloat(limit));
}

void ActivationAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyActivationKind(getKind());
  if (getAlphaValue() != kDefaultAlpha) {
    printer << ", alpha = ";
    printer.printFloat(getAlpha());
  }
  if (getBetaValue() != kDefaultBeta) {
    printer << ", beta = ";
    printer.printFloat(getBeta());
  }
  if (getLimitValue() != kDefaultLimit) {
    printer << ", limit = ";
    printer.printFloat(getLimit());
  }
  printer << ">";
}
