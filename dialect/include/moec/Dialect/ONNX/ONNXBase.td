//===- ONNXBase.td - moec's onnx dialect -------------------*- tablegen -*-===//
//
// The `onnx` dialect holds ONNX operators exactly as a model states them, one
// op per ONNX operator at its newest version up to opset 21 (ONNXOps.td is
// generated from onnx's schemas). Raise patterns match MoE structure here,
// where it is plainest. Attribute and operand names are ONNX's own; optional
// inputs that a node omits are the value of `onnx.NoValue`.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_ONNX_ONNXBASE_TD
#define MOEC_DIALECT_ONNX_ONNXBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX operators, as imported";
  let cppNamespace = "::moec::onnx";
}

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits>;

def ONNX_Tensor : AnyTypeOf<[AnyTensor]>;
def ONNX_TensorOrNone : AnyTypeOf<[AnyTensor, NoneType]>;

def ONNX_NoValueOp : ONNX_Op<"NoValue", [Pure]> {
  let summary = "the absent value of an omitted optional input";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict";
}

#endif // MOEC_DIALECT_ONNX_ONNXBASE_TD
