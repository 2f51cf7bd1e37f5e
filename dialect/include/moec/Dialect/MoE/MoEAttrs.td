//===- MoEAttrs.td - moe dialect attributes ----------------*- tablegen -*-===//

#ifndef MOEC_DIALECT_MOE_MOEATTRS_TD
#define MOEC_DIALECT_MOE_MOEATTRS_TD

include "moec/Dialect/MoE/MoEDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def MoE_RoutingKind : I32EnumAttr<"RoutingKind",
    "how router logits become expert ids and routing weights", [
  // Mixtral, Qwen2/3-MoE, ERNIE: p = softmax(logits); top-k of p.
  I32EnumAttrCase<"SoftmaxTopK", 0, "softmax_topk">,
  // gpt-oss: top-k of the logits, then softmax over the k chosen.
  I32EnumAttrCase<"TopKSoftmax", 1, "topk_softmax">,
  // DeepSeek-V3: s = sigmoid(logits); group-limited top-k of s + correction bias;
  // weights are the unbiased s of the chosen experts.
  I32EnumAttrCase<"SigmoidGroupTopK", 2, "sigmoid_group_topk">
]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}
def MoE_RoutingKindAttr : EnumAttr<MoE_Dialect, MoE_RoutingKind, "routing"> {
  let assemblyFormat = "`<` $value `>`";
}

def MoE_GateUpLayout : I32EnumAttr<"GateUpLayout",
    "how the gate and up projections are stored", [
  // Not gated: one up projection followed by the activation.
  I32EnumAttrCase<"None", 0, "none">,
  // One [2I, H] matrix per expert: rows [0, I) are the gate, [I, 2I) the up.
  I32EnumAttrCase<"Concatenated", 1, "concatenated">,
  // One [2I, H] matrix per expert: even rows are the gate, odd rows the up (gpt-oss).
  I32EnumAttrCase<"Interleaved", 2, "interleaved">,
  // Two [I, H] matrices per expert: gate and up are separate operands.
  I32EnumAttrCase<"Separate", 3, "separate">
]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}
def MoE_GateUpLayoutAttr : EnumAttr<MoE_Dialect, MoE_GateUpLayout, "gate_up_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

def MoE_ActivationKind : I32EnumAttr<"ActivationKind",
    "the element-wise function applied to the gate (or to the up projection when not gated)", [
  I32EnumAttrCase<"SiLU", 0, "silu">,
  // GELU with the exact erf form.
  I32EnumAttrCase<"GELU", 1, "gelu">,
  I32EnumAttrCase<"ReLU", 2, "relu">,
  I32EnumAttrCase<"Identity", 3, "identity">
]> {
  let cppNamespace = "::moec::moe";
  let genSpecializedAttr = 0;
}

def MoE_ActivationAttr : AttrDef<MoE_Dialect, "Activation"> {
  let mnemonic = "activation";
  let summary = "an expert activation, with gpt-oss's clamped-SwiGLU parameters";
  let description = [{
    The function applied to the gate `g` (gated layouts) or to the projection
    (layout `none`). Gated: `h = f(g) * (u + beta)`. For `silu`, `f(g) = g *
    sigmoid(alpha * g)`, and with a finite `limit` the inputs are first clamped:
    `g = min(g, limit)`, `u = clamp(u, -limit, limit)` (gpt-oss: alpha 1.702,
    beta 1, limit 7; onnxruntime's SwiGLU attributes). alpha, beta and limit keep
    their defaults (1, 0, +inf) for every other function.

    ```mlir
    #moe.activation<silu>
    #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>
    ```
  }];
  let parameters = (ins
    EnumParameter<MoE_ActivationKind>:$kind,
    APFloatParameter<"multiplier inside the sigmoid of silu">:$alpha,
    APFloatParameter<"added to the up projection before the product">:$beta,
    APFloatParameter<"clamp bound of gate and up; +inf for none">:$limit
  );
  let builders = [
    AttrBuilder<(ins "ActivationKind":$kind, CArg<"double", "1.0">:$alpha,
                     CArg<"double", "0.0">:$beta,
                     CArg<"double", "std::numeric_limits<double>::infinity()">:$limit)>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    double getAlphaValue() const { return getAlpha().convertToDouble(); }
    double getBetaValue() const { return getBeta().convertToDouble(); }
    double getLimitValue() const { return getLimit().convertToDouble(); }
    /// True when any of alpha, beta, limit differs from its default.
    bool hasSwiGLUParameters() const;
  }];
}

#endif // MOEC_DIALECT_MOE_MOEATTRS_TD
