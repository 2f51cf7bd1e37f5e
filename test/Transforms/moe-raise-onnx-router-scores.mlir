// moe-raise-onnx on a block that also returns its router scores, as
// transformers' GptOssMLP does: the block becomes moe.layer and the second
// result reads moe.route's weights of the same router (which CSE shares with
// the lowered layer's), so no onnx compute op is left for codegen.
//
// RUN: moec compile %fixtures/gpt_oss_router_scores/model.onnx --compile-to=moe | FileCheck %s --check-prefix=MOE
// MOE: moe.linear
// MOE: %expert_ids, %weights = moe.route %{{.*}} {routing = #moe.routing<topk_softmax>, top_k = 2 : i64}
// MOE: moe.layer
// MOE: return %{{.*}}, %weights
// RUN: moec compile %fixtures/gpt_oss_router_scores/model.onnx --compile-to=grouped | FileCheck %s --check-prefix=GROUPED
// One router after lowering and CSE.
// GROUPED-COUNT-1: moe.route
// GROUPED-NOT: onnx.Gemm
// GROUPED-NOT: onnx.TopK
// GROUPED-NOT: onnx.Softmax
