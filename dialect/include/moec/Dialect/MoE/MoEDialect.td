//===- MoEDialect.td - the moe dialect ---------------------*- tablegen -*-===//
//
// The `moe` dialect: Mixture-of-Experts computation at two levels. `moe.layer`
// carries a whole MoE block's meaning; the lowered ops (route, sort, permute,
// grouped_matmul, activation, combine, quantize, all_reduce) spell out the
// sorted grouped-GEMM pipeline. docs/dialect.md states the rules once.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_MOE_MOEDIALECT_TD
#define MOEC_DIALECT_MOE_MOEDIALECT_TD

include "mlir/IR/OpBase.td"

def MoE_Dialect : Dialect {
  let name = "moe";
  let summary = "Mixture-of-Experts blocks and the sorted grouped-GEMM pipeline";
  let description = [{
    `moe.layer` is one MoE block, whatever form it was found in. Lowering turns it
    into route -> sort by expert -> permute -> grouped matmul (gate and up, with the
    activation as epilogue) -> grouped matmul (down) -> combine. Expert ids that are
    invalid or not local become the sentinel (the number of local experts): they
    sort last, are never computed, and add nothing to the output.
  }];
  let cppNamespace = "::moec::moe";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Defined beside the attribute storage classes (MoEAttrs.cpp).
    void registerAttributes();
  }];
}

class MoE_Op<string mnemonic, list<Trait> traits = []>
    : Op<MoE_Dialect, mnemonic, traits>;

#endif // MOEC_DIALECT_MOE_MOEDIALECT_TD
