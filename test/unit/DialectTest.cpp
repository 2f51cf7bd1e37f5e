//===- DialectTest.cpp - the moe dialect's C++ API --------------------------===//
//
// What the textual tests cannot reach: building ops from C++ the way passes
// will (OpTy::create), and the attribute accessors passes rely on.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/MoE/MoEOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace moec::moe;

namespace {

class MoEDialectTest : public ::testing::Test {
protected:
  MoEDialectTest() { context.loadDialect<MoEDialect>(); }

  /// Verifies `op`, returning the diagnostics it emitted.
  std::string verifyAndCollect(Operation *op) {
    std::string messages;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      messages += diag.str() + "\n";
      return success();
    });
    (void)verify(op);
    return messages;
  }

  MLIRContext context;
};

TEST_F(MoEDialectTest, ActivationDefaultsAndSwiGLUParameters) {
  auto silu = ActivationAttr::get(&context, ActivationKind::SiLU);
  EXPECT_FALSE(silu.hasSwiGLUParameters());
  EXPECT_EQ(silu.getAlphaValue(), 1.0);
  EXPECT_EQ(silu.getBetaValue(), 0.0);
  EXPECT_TRUE(std::isinf(silu.getLimitValue()));

  auto gptOss = ActivationAttr::get(&context, ActivationKind::SiLU, 1.702, 1.0, 7.0);
  EXPECT_TRUE(gptOss.hasSwiGLUParameters());
  EXPECT_EQ(gptOss.getLimitValue(), 7.0);
  // Attributes are uniqued: the same parameters give the same attribute.
  EXPECT_EQ(gptOss, ActivationAttr::get(&context, ActivationKind::SiLU, 1.702, 1.0, 7.0));
  EXPECT_NE(gptOss, silu);
}

TEST_F(MoEDialectTest, ActivationPrintsOnlyNonDefaults) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << ActivationAttr::get(&context, ActivationKind::GELU) << " "
     << ActivationAttr::get(&context, ActivationKind::SiLU, 1.702, 1.0, 7.0);
  EXPECT_EQ(text, "#moe.activation<gelu> "
                  "#moe.activation<silu, alpha = 1.702000e+00, beta = 1.000000e+00, "
                  "limit = 7.000000e+00>");
}

TEST_F(MoEDialectTest, SortBuiltWithCreateVerifiesAndChecksSlots) {
  OpBuilder builder(&context);
  Location loc = builder.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  auto ids = RankedTensorType::get({4, 2}, builder.getI32Type());
  Value idsValue =
      UnrealizedConversionCastOp::create(builder, loc, TypeRange{ids}, ValueRange{})
          .getResult(0);
  auto i32 = builder.getI32Type();
  auto sort = SortOp::create(builder, loc, RankedTensorType::get({8}, i32),
                             RankedTensorType::get({6}, i32), RankedTensorType::get({}, i32),
                             idsValue, /*num_experts=*/6, /*first_expert=*/0, /*ep_size=*/nullptr);
  EXPECT_EQ(verifyAndCollect(sort), "");
  EXPECT_EQ(sort.getNumExperts(), 6u);

  // 4 tokens x top-2 = 8 slots; a 7-row permutation is wrong and is named.
  auto bad = SortOp::create(builder, loc, RankedTensorType::get({7}, i32),
                            RankedTensorType::get({6}, i32), RankedTensorType::get({}, i32),
                            idsValue, 6, 0, /*ep_size=*/nullptr);
  std::string messages = verifyAndCollect(bad);
  EXPECT_NE(messages.find("result permutation dimension 0 (S) is 7"), std::string::npos)
      << messages;
}

TEST_F(MoEDialectTest, LayerAccessorsReadTheWeights) {
  // Values come from an unregistered op so that no other dialect is needed.
  context.allowUnregisteredDialects();
  const char *source = R"mlir(
    %x, %wr, %wgu, %wd = "test.source"() : () -> (tensor<?x16xf32>, tensor<4x16xf32>,
                                                  tensor<4x64x16xf32>, tensor<4x16x32xf32>)
    %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
           gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
           {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
            activation = #moe.activation<silu>,
            gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  )mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  auto layers = module->getOps<LayerOp>();
  ASSERT_EQ(std::distance(layers.begin(), layers.end()), 1);
  LayerOp layer = *layers.begin();
  EXPECT_EQ(layer.getNumExperts(), 4);
  EXPECT_EQ(layer.getIntermediateSize(), 32);
  EXPECT_TRUE(layer.isGated());
  EXPECT_EQ(layer.getTopK(), 2u);
  EXPECT_FALSE(layer.getNormalize());
  EXPECT_EQ(layer.getNumGroups(), 1u);
  EXPECT_EQ(layer.getRoutedScalingFactor().convertToDouble(), 1.0);
  EXPECT_FALSE(layer.getRouterLogits());
}

} // namespace
