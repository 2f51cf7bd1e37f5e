// RUN: moec-opt %s -split-input-file -moe-raise-expert-loops -verify-diagnostics | FileCheck %s

// moe-raise-expert-loops: hand-written expert loops (docs/pipeline.md) become
// one moe.layer with precomputed routing; near misses, one changed op each,
// are left alone. The pass emits no diagnostics: what it does not recognise it
// does not touch. (Inputs/expert-loops holds bigger cases run end to end in
// the reference interpreter; ctest -L pipeline.)

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// The loop form: separate gate and up weights [E, I, H] sliced at the expert,
// i64 ids compared with index_cast(e). Everything in the loop becomes dead.
// CHECK-LABEL: func.func @loop
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[IDS:.*]]: tensor<?x2xi64>, %[[W:.*]]: tensor<?x2xf32>, %[[G:.*]]: tensor<4x2x4xf32>, %[[U:.*]]: tensor<4x2x4xf32>, %[[D:.*]]: tensor<4x4x2xf32>)
// CHECK-NEXT: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x4xf32> expert_ids(%[[IDS]] : tensor<?x2xi64>) expert_weights(%[[W]] : tensor<?x2xf32>) gate_up(%[[G]] : tensor<4x2x4xf32>) up(%[[U]] : tensor<4x2x4xf32>) down(%[[D]] : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<separate>, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @loop(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Gate and up as the two halves of one [E, 2I, H] tensor (the concatenated
// layout), i32 ids cast to index and compared with the induction variable.
// CHECK-LABEL: func.func @loop_concat
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[IDS:.*]]: tensor<?x2xi32>, %[[W:.*]]: tensor<?x2xf32>, %[[GU:.*]]: tensor<4x4x4xf32>, %[[D:.*]]: tensor<4x4x2xf32>)
// CHECK-NEXT: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x4xf32> expert_ids(%[[IDS]] : tensor<?x2xi32>) expert_weights(%[[W]] : tensor<?x2xf32>) gate_up(%[[GU]] : tensor<4x4x4xf32>) down(%[[D]] : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @loop_concat(%x: tensor<?x4xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
    %gate_up: tensor<4x4x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate_up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x4x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %gate_up[%e, 2, 0] [1, 2, 4] [1, 1, 1] : tensor<4x4x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi32>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i32, %wv: f32, %racc: f32):
      %id_index = arith.index_cast %id : i32 to index
      %hit = arith.cmpi eq, %id_index, %e : index
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Other spellings of the same program: a projection as a linalg.generic
// contraction, silu(g) as g * (1 / (1 + exp(-g))), and commuted operands and
// inputs of the activation, the routing weight and the accumulation.
// CHECK-LABEL: func.func @loop_spellings
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[IDS:.*]]: tensor<?x2xi64>, %[[W:.*]]: tensor<?x2xf32>, %[[G:.*]]: tensor<4x2x4xf32>, %[[U:.*]]: tensor<4x2x4xf32>, %[[D:.*]]: tensor<4x4x2xf32>)
// CHECK-NEXT: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x4xf32> expert_ids(%[[IDS]] : tensor<?x2xi64>) expert_weights(%[[W]] : tensor<?x2xf32>) gate_up(%[[G]] : tensor<4x2x4xf32>) up(%[[U]] : tensor<4x2x4xf32>) down(%[[D]] : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<separate>, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @loop_spellings(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.generic {indexing_maps = [#lhs, #rhs_t, #out], iterator_types = ["parallel", "parallel", "reduction"]}
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) {
    ^bb0(%ma: f32, %mb: f32, %mc: f32):
      %mp = arith.mulf %mb, %ma : f32
      %ms = arith.addf %mc, %mp : f32
      linalg.yield %ms : f32
    } -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%u, %g : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%uv: f32, %gv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %one, %exp : f32
      %sigmoid = arith.divf %one, %den : f32
      %silu = arith.mulf %sigmoid, %gv : f32
      %prod = arith.mulf %uv, %silu : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%w, %ids : tensor<?x2xf32>, tensor<?x2xi64>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%wv: f32, %id: i64, %racc: f32):
      %hit = arith.cmpi eq, %e_id, %id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %sel, %racc : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%r, %y : tensor<?xf32>, tensor<?x4xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%rv: f32, %yv: f32, %av: f32):
      %scaled = arith.mulf %rv, %yv : f32
      %asum = arith.addf %scaled, %av : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// The unrolled form: the body repeated for experts 0..3 over per-expert weight
// constants (up and down are splats), accumulating in a chain. The constants
// are stacked at compile time into [E, ...] constants, expert e at index e:
// gate[e] holds e + 0.25 at [0, 0] and e + 0.5 elsewhere (0.25 = 0x3E800000,
// 0.5 = 0x3F000000, 1.25 = 0x3FA00000, ...; little-endian after the 4-byte
// alignment, 64).
// CHECK-LABEL: func.func @unrolled
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[IDS:.*]]: tensor<?x2xi64>, %[[W:.*]]: tensor<?x2xf32>)
// CHECK-NEXT: %[[G:.*]] = arith.constant dense_resource<gate_weight> : tensor<4x2x4xf32>
// CHECK-NEXT: %[[U:.*]] = arith.constant dense_resource<up_weight> : tensor<4x2x4xf32>
// CHECK-NEXT: %[[D:.*]] = arith.constant dense_resource<down_weight> : tensor<4x4x2xf32>
// CHECK-NEXT: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x4xf32> expert_ids(%[[IDS]] : tensor<?x2xi64>) expert_weights(%[[W]] : tensor<?x2xf32>) gate_up(%[[G]] : tensor<4x2x4xf32>) up(%[[U]] : tensor<4x2x4xf32>) down(%[[D]] : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<separate>, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x4xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK: gate_weight: "0x40000000
// CHECK-SAME: 0000803E0000003F0000003F0000003F0000003F0000003F0000003F0000003F
// CHECK-SAME: 0000A03F0000C03F0000C03F0000C03F0000C03F0000C03F0000C03F0000C03F
// CHECK-SAME: 0000104000002040000020400000204000002040000020400000204000002040
// CHECK-SAME: 0000504000006040000060400000604000006040000060400000604000006040"
func.func @unrolled(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %wg0 = arith.constant dense<[[0.25, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]> : tensor<2x4xf32>
  %wu0 = arith.constant dense<[[0.125, 0.125, 0.125, 0.125], [0.125, 0.125, 0.125, 0.125]]> : tensor<2x4xf32>
  %wd0 = arith.constant dense<[[0.75, 0.75], [0.75, 0.75], [0.75, 0.75], [0.75, 0.75]]> : tensor<4x2xf32>
  %e0 = arith.constant 0 : i64
  %i_init_0 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_0 = linalg.fill ins(%zero : f32) outs(%i_init_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_0, %u_0 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_0 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_0 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_0 = linalg.fill ins(%zero : f32) outs(%h_init_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_0, %wd0 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_0 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_0 = linalg.fill ins(%zero : f32) outs(%t_init_0 : tensor<?xf32>) -> tensor<?xf32>
  %r_0 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_0 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e0 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_0, %r_0 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc_zero : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg1 = arith.constant dense<[[1.25, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<2x4xf32>
  %wu1 = arith.constant dense<[[1.125, 1.125, 1.125, 1.125], [1.125, 1.125, 1.125, 1.125]]> : tensor<2x4xf32>
  %wd1 = arith.constant dense<[[1.75, 1.75], [1.75, 1.75], [1.75, 1.75], [1.75, 1.75]]> : tensor<4x2xf32>
  %e1 = arith.constant 1 : i64
  %i_init_1 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_1 = linalg.fill ins(%zero : f32) outs(%i_init_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_1, %u_1 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_1 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_1 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_1 = linalg.fill ins(%zero : f32) outs(%h_init_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_1, %wd1 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_1 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_1 = linalg.fill ins(%zero : f32) outs(%t_init_1 : tensor<?xf32>) -> tensor<?xf32>
  %r_1 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_1 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e1 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_1, %r_1 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc0 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg2 = arith.constant dense<[[2.25, 2.5, 2.5, 2.5], [2.5, 2.5, 2.5, 2.5]]> : tensor<2x4xf32>
  %wu2 = arith.constant dense<[[2.125, 2.125, 2.125, 2.125], [2.125, 2.125, 2.125, 2.125]]> : tensor<2x4xf32>
  %wd2 = arith.constant dense<[[2.75, 2.75], [2.75, 2.75], [2.75, 2.75], [2.75, 2.75]]> : tensor<4x2xf32>
  %e2 = arith.constant 2 : i64
  %i_init_2 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_2 = linalg.fill ins(%zero : f32) outs(%i_init_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_2, %u_2 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_2 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_2 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_2 = linalg.fill ins(%zero : f32) outs(%h_init_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_2, %wd2 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_2 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_2 = linalg.fill ins(%zero : f32) outs(%t_init_2 : tensor<?xf32>) -> tensor<?xf32>
  %r_2 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_2 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e2 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_2, %r_2 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc1 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg3 = arith.constant dense<[[3.25, 3.5, 3.5, 3.5], [3.5, 3.5, 3.5, 3.5]]> : tensor<2x4xf32>
  %wu3 = arith.constant dense<[[3.125, 3.125, 3.125, 3.125], [3.125, 3.125, 3.125, 3.125]]> : tensor<2x4xf32>
  %wd3 = arith.constant dense<[[3.75, 3.75], [3.75, 3.75], [3.75, 3.75], [3.75, 3.75]]> : tensor<4x2xf32>
  %e3 = arith.constant 3 : i64
  %i_init_3 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_3 = linalg.fill ins(%zero : f32) outs(%i_init_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_3, %u_3 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_3 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_3 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_3 = linalg.fill ins(%zero : f32) outs(%h_init_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_3, %wd3 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_3 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_3 = linalg.fill ins(%zero : f32) outs(%t_init_3 : tensor<?xf32>) -> tensor<?xf32>
  %r_3 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_3 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e3 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc3 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_3, %r_3 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc2 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// The experts may come in any order: they are stacked by their index.
// CHECK-LABEL: func.func @unrolled_any_order
// CHECK-NOT: linalg.generic
// CHECK: moe.layer
// CHECK: gate_weight: "0x40000000
// CHECK-SAME: 0000803E0000003F0000003F0000003F0000003F0000003F0000003F0000003F
// CHECK-SAME: 0000A03F0000C03F0000C03F0000C03F0000C03F0000C03F0000C03F0000C03F
// CHECK-SAME: 0000104000002040000020400000204000002040000020400000204000002040
// CHECK-SAME: 0000504000006040000060400000604000006040000060400000604000006040"
func.func @unrolled_any_order(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %wg0 = arith.constant dense<[[2.25, 2.5, 2.5, 2.5], [2.5, 2.5, 2.5, 2.5]]> : tensor<2x4xf32>
  %wu0 = arith.constant dense<[[2.125, 2.125, 2.125, 2.125], [2.125, 2.125, 2.125, 2.125]]> : tensor<2x4xf32>
  %wd0 = arith.constant dense<[[2.75, 2.75], [2.75, 2.75], [2.75, 2.75], [2.75, 2.75]]> : tensor<4x2xf32>
  %e0 = arith.constant 2 : i64
  %i_init_0 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_0 = linalg.fill ins(%zero : f32) outs(%i_init_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_0, %u_0 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_0 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_0 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_0 = linalg.fill ins(%zero : f32) outs(%h_init_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_0, %wd0 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_0 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_0 = linalg.fill ins(%zero : f32) outs(%t_init_0 : tensor<?xf32>) -> tensor<?xf32>
  %r_0 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_0 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e0 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_0, %r_0 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc_zero : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg1 = arith.constant dense<[[0.25, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]> : tensor<2x4xf32>
  %wu1 = arith.constant dense<[[0.125, 0.125, 0.125, 0.125], [0.125, 0.125, 0.125, 0.125]]> : tensor<2x4xf32>
  %wd1 = arith.constant dense<[[0.75, 0.75], [0.75, 0.75], [0.75, 0.75], [0.75, 0.75]]> : tensor<4x2xf32>
  %e1 = arith.constant 0 : i64
  %i_init_1 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_1 = linalg.fill ins(%zero : f32) outs(%i_init_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_1, %u_1 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_1 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_1 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_1 = linalg.fill ins(%zero : f32) outs(%h_init_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_1, %wd1 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_1 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_1 = linalg.fill ins(%zero : f32) outs(%t_init_1 : tensor<?xf32>) -> tensor<?xf32>
  %r_1 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_1 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e1 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_1, %r_1 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc0 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg2 = arith.constant dense<[[3.25, 3.5, 3.5, 3.5], [3.5, 3.5, 3.5, 3.5]]> : tensor<2x4xf32>
  %wu2 = arith.constant dense<[[3.125, 3.125, 3.125, 3.125], [3.125, 3.125, 3.125, 3.125]]> : tensor<2x4xf32>
  %wd2 = arith.constant dense<[[3.75, 3.75], [3.75, 3.75], [3.75, 3.75], [3.75, 3.75]]> : tensor<4x2xf32>
  %e2 = arith.constant 3 : i64
  %i_init_2 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_2 = linalg.fill ins(%zero : f32) outs(%i_init_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_2, %u_2 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_2 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_2 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_2 = linalg.fill ins(%zero : f32) outs(%h_init_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_2, %wd2 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_2 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_2 = linalg.fill ins(%zero : f32) outs(%t_init_2 : tensor<?xf32>) -> tensor<?xf32>
  %r_2 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_2 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e2 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_2, %r_2 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc1 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg3 = arith.constant dense<[[1.25, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<2x4xf32>
  %wu3 = arith.constant dense<[[1.125, 1.125, 1.125, 1.125], [1.125, 1.125, 1.125, 1.125]]> : tensor<2x4xf32>
  %wd3 = arith.constant dense<[[1.75, 1.75], [1.75, 1.75], [1.75, 1.75], [1.75, 1.75]]> : tensor<4x2xf32>
  %e3 = arith.constant 1 : i64
  %i_init_3 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_3 = linalg.fill ins(%zero : f32) outs(%i_init_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_3, %u_3 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_3 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_3 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_3 = linalg.fill ins(%zero : f32) outs(%h_init_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_3, %wd3 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_3 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_3 = linalg.fill ins(%zero : f32) outs(%t_init_3 : tensor<?xf32>) -> tensor<?xf32>
  %r_3 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_3 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e3 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc3 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_3, %r_3 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc2 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the loop covers 3 of the 4 stacked experts.
// CHECK-LABEL: func.func @bound_not_experts
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @bound_not_experts(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the loop starts at expert 1.
// CHECK-LABEL: func.func @lower_bound_one
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @lower_bound_one(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c1 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: every other expert.
// CHECK-LABEL: func.func @step_two
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @step_two(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c2 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the ids are compared with a constant, not the expert.
// CHECK-LABEL: func.func @compares_with_constant
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @compares_with_constant(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.constant 2 : i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the routing weight sums the slots of the other experts.
// CHECK-LABEL: func.func @compares_not_equal
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @compares_not_equal(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi ne, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: slots of other experts count as 1, not 0.
// CHECK-LABEL: func.func @select_not_zero
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @select_not_zero(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %one : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: g / (1 + exp(g)) is not silu(g).
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @not_silu(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %gv : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: ReLU-GLU, another activation.
// CHECK-LABEL: func.func @relu_glu
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @relu_glu(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %silu = arith.maximumf %gv, %zero : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the activation adds its init (NaN-filled tensor.empty).
// CHECK-LABEL: func.func @activation_reads_init
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @activation_reads_init(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod0 = arith.mulf %silu, %uv : f32
      %prod = arith.addf %prod0, %unused : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the gate weights of expert 0 serve every expert.
// CHECK-LABEL: func.func @fixed_slice
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @fixed_slice(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: accumulation by max instead of add.
// CHECK-LABEL: func.func @max_accumulate
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @max_accumulate(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.maximumf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the routing weight is always taken from slot k = 0.
// CHECK-LABEL: func.func @wrong_k
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @wrong_k(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0, 0)>, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the sum starts at ones.
// CHECK-LABEL: func.func @accumulator_not_zero
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @accumulator_not_zero(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%one : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss: the up projection reads the running sum, not the hidden states.
// CHECK-LABEL: func.func @up_reads_accumulator
// CHECK-NOT: moe.layer
// CHECK: scf.for
func.func @up_reads_accumulator(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>,
    %gate: tensor<4x2x4xf32>, %up: tensor<4x2x4xf32>, %down: tensor<4x4x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %res = scf.for %e = %c0 to %num_experts step %c1 iter_args(%acc = %acc_zero) -> (tensor<?x4xf32>) {
    %wg = tensor.extract_slice %gate[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wu = tensor.extract_slice %up[%e, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<4x2x4xf32> to tensor<2x4xf32>
    %wd = tensor.extract_slice %down[%e, 0, 0] [1, 4, 2] [1, 1, 1] : tensor<4x4x2xf32> to tensor<4x2xf32>
    %e_id = arith.index_cast %e : index to i64
    %i_init = tensor.empty(%t) : tensor<?x2xf32>
    %i_zero = linalg.fill ins(%zero : f32) outs(%i_init : tensor<?x2xf32>) -> tensor<?x2xf32>
    %g = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%x, %wg : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %u = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%acc, %wu : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero : tensor<?x2xf32>) -> tensor<?x2xf32>
    %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
           ins(%g, %u : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init : tensor<?x2xf32>) {
    ^bb0(%gv: f32, %uv: f32, %unused: f32):
      %neg = arith.negf %gv : f32
      %exp = math.exp %neg : f32
      %den = arith.addf %exp, %one : f32
      %silu = arith.divf %gv, %den : f32
      %prod = arith.mulf %silu, %uv : f32
      linalg.yield %prod : f32
    } -> tensor<?x2xf32>
    %h_init = tensor.empty(%t) : tensor<?x4xf32>
    %h_zero = linalg.fill ins(%zero : f32) outs(%h_init : tensor<?x4xf32>) -> tensor<?x4xf32>
    %y = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
           ins(%h, %wd : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero : tensor<?x4xf32>) -> tensor<?x4xf32>
    %t_init = tensor.empty(%t) : tensor<?xf32>
    %t_zero = linalg.fill ins(%zero : f32) outs(%t_init : tensor<?xf32>) -> tensor<?xf32>
    %r = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero : tensor<?xf32>) {
    ^bb0(%id: i64, %wv: f32, %racc: f32):
      %hit = arith.cmpi eq, %id, %e_id : i64
      %sel = arith.select %hit, %wv, %zero : f32
      %rsum = arith.addf %racc, %sel : f32
      linalg.yield %rsum : f32
    } -> tensor<?xf32>
    %next = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
           ins(%y, %r : tensor<?x4xf32>, tensor<?xf32>) outs(%acc : tensor<?x4xf32>) {
    ^bb0(%yv: f32, %rv: f32, %av: f32):
      %scaled = arith.mulf %yv, %rv : f32
      %asum = arith.addf %av, %scaled : f32
      linalg.yield %asum : f32
    } -> tensor<?x4xf32>
    scf.yield %next : tensor<?x4xf32>
  }
  return %res : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss (unrolled): experts 0, 1 and 3: no expert 2.
// CHECK-LABEL: func.func @unrolled_missing_expert
// CHECK-NOT: moe.layer
// CHECK: linalg.generic
func.func @unrolled_missing_expert(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %wg0 = arith.constant dense<[[0.25, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]> : tensor<2x4xf32>
  %wu0 = arith.constant dense<[[0.125, 0.125, 0.125, 0.125], [0.125, 0.125, 0.125, 0.125]]> : tensor<2x4xf32>
  %wd0 = arith.constant dense<[[0.75, 0.75], [0.75, 0.75], [0.75, 0.75], [0.75, 0.75]]> : tensor<4x2xf32>
  %e0 = arith.constant 0 : i64
  %i_init_0 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_0 = linalg.fill ins(%zero : f32) outs(%i_init_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_0, %u_0 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_0 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_0 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_0 = linalg.fill ins(%zero : f32) outs(%h_init_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_0, %wd0 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_0 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_0 = linalg.fill ins(%zero : f32) outs(%t_init_0 : tensor<?xf32>) -> tensor<?xf32>
  %r_0 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_0 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e0 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_0, %r_0 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc_zero : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg1 = arith.constant dense<[[1.25, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<2x4xf32>
  %wu1 = arith.constant dense<[[1.125, 1.125, 1.125, 1.125], [1.125, 1.125, 1.125, 1.125]]> : tensor<2x4xf32>
  %wd1 = arith.constant dense<[[1.75, 1.75], [1.75, 1.75], [1.75, 1.75], [1.75, 1.75]]> : tensor<4x2xf32>
  %e1 = arith.constant 1 : i64
  %i_init_1 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_1 = linalg.fill ins(%zero : f32) outs(%i_init_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_1, %u_1 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_1 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_1 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_1 = linalg.fill ins(%zero : f32) outs(%h_init_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_1, %wd1 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_1 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_1 = linalg.fill ins(%zero : f32) outs(%t_init_1 : tensor<?xf32>) -> tensor<?xf32>
  %r_1 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_1 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e1 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_1, %r_1 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc0 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg2 = arith.constant dense<[[3.25, 3.5, 3.5, 3.5], [3.5, 3.5, 3.5, 3.5]]> : tensor<2x4xf32>
  %wu2 = arith.constant dense<[[3.125, 3.125, 3.125, 3.125], [3.125, 3.125, 3.125, 3.125]]> : tensor<2x4xf32>
  %wd2 = arith.constant dense<[[3.75, 3.75], [3.75, 3.75], [3.75, 3.75], [3.75, 3.75]]> : tensor<4x2xf32>
  %e2 = arith.constant 3 : i64
  %i_init_2 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_2 = linalg.fill ins(%zero : f32) outs(%i_init_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_2, %u_2 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_2 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_2 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_2 = linalg.fill ins(%zero : f32) outs(%h_init_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_2, %wd2 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_2 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_2 = linalg.fill ins(%zero : f32) outs(%t_init_2 : tensor<?xf32>) -> tensor<?xf32>
  %r_2 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_2 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e2 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_2, %r_2 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc1 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  return %acc2 : tensor<?x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

// Near miss (unrolled): expert 1 twice.
// CHECK-LABEL: func.func @unrolled_duplicate_expert
// CHECK-NOT: moe.layer
// CHECK: linalg.generic
func.func @unrolled_duplicate_expert(%x: tensor<?x4xf32>, %ids: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %num_experts = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x4xf32>
  %acc_init = tensor.empty(%t) : tensor<?x4xf32>
  %acc_zero = linalg.fill ins(%zero : f32) outs(%acc_init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %wg0 = arith.constant dense<[[0.25, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]> : tensor<2x4xf32>
  %wu0 = arith.constant dense<[[0.125, 0.125, 0.125, 0.125], [0.125, 0.125, 0.125, 0.125]]> : tensor<2x4xf32>
  %wd0 = arith.constant dense<[[0.75, 0.75], [0.75, 0.75], [0.75, 0.75], [0.75, 0.75]]> : tensor<4x2xf32>
  %e0 = arith.constant 0 : i64
  %i_init_0 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_0 = linalg.fill ins(%zero : f32) outs(%i_init_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu0 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_0 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_0, %u_0 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_0 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_0 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_0 = linalg.fill ins(%zero : f32) outs(%h_init_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_0, %wd0 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_0 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_0 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_0 = linalg.fill ins(%zero : f32) outs(%t_init_0 : tensor<?xf32>) -> tensor<?xf32>
  %r_0 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_0 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e0 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_0, %r_0 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc_zero : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg1 = arith.constant dense<[[1.25, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<2x4xf32>
  %wu1 = arith.constant dense<[[1.125, 1.125, 1.125, 1.125], [1.125, 1.125, 1.125, 1.125]]> : tensor<2x4xf32>
  %wd1 = arith.constant dense<[[1.75, 1.75], [1.75, 1.75], [1.75, 1.75], [1.75, 1.75]]> : tensor<4x2xf32>
  %e1 = arith.constant 1 : i64
  %i_init_1 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_1 = linalg.fill ins(%zero : f32) outs(%i_init_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu1 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_1 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_1, %u_1 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_1 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_1 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_1 = linalg.fill ins(%zero : f32) outs(%h_init_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_1 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_1, %wd1 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_1 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_1 = linalg.fill ins(%zero : f32) outs(%t_init_1 : tensor<?xf32>) -> tensor<?xf32>
  %r_1 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_1 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e1 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_1, %r_1 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc0 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg2 = arith.constant dense<[[1.25, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]> : tensor<2x4xf32>
  %wu2 = arith.constant dense<[[1.125, 1.125, 1.125, 1.125], [1.125, 1.125, 1.125, 1.125]]> : tensor<2x4xf32>
  %wd2 = arith.constant dense<[[1.75, 1.75], [1.75, 1.75], [1.75, 1.75], [1.75, 1.75]]> : tensor<4x2xf32>
  %e2 = arith.constant 1 : i64
  %i_init_2 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_2 = linalg.fill ins(%zero : f32) outs(%i_init_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu2 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_2 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_2, %u_2 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_2 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_2 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_2 = linalg.fill ins(%zero : f32) outs(%h_init_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_2 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_2, %wd2 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_2 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_2 = linalg.fill ins(%zero : f32) outs(%t_init_2 : tensor<?xf32>) -> tensor<?xf32>
  %r_2 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_2 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e2 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_2, %r_2 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc1 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  %wg3 = arith.constant dense<[[3.25, 3.5, 3.5, 3.5], [3.5, 3.5, 3.5, 3.5]]> : tensor<2x4xf32>
  %wu3 = arith.constant dense<[[3.125, 3.125, 3.125, 3.125], [3.125, 3.125, 3.125, 3.125]]> : tensor<2x4xf32>
  %wd3 = arith.constant dense<[[3.75, 3.75], [3.75, 3.75], [3.75, 3.75], [3.75, 3.75]]> : tensor<4x2xf32>
  %e3 = arith.constant 3 : i64
  %i_init_3 = tensor.empty(%t) : tensor<?x2xf32>
  %i_zero_3 = linalg.fill ins(%zero : f32) outs(%i_init_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %g_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wg3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %u_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%x, %wu3 : tensor<?x4xf32>, tensor<2x4xf32>) outs(%i_zero_3 : tensor<?x2xf32>) -> tensor<?x2xf32>
  %h_3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%g_3, %u_3 : tensor<?x2xf32>, tensor<?x2xf32>) outs(%i_init_3 : tensor<?x2xf32>) {
  ^bb0(%gv: f32, %uv: f32, %unused: f32):
    %neg = arith.negf %gv : f32
    %exp = math.exp %neg : f32
    %den = arith.addf %exp, %one : f32
    %silu = arith.divf %gv, %den : f32
    %prod = arith.mulf %silu, %uv : f32
    linalg.yield %prod : f32
  } -> tensor<?x2xf32>
  %h_init_3 = tensor.empty(%t) : tensor<?x4xf32>
  %h_zero_3 = linalg.fill ins(%zero : f32) outs(%h_init_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %y_3 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
         ins(%h_3, %wd3 : tensor<?x2xf32>, tensor<4x2xf32>) outs(%h_zero_3 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %t_init_3 = tensor.empty(%t) : tensor<?xf32>
  %t_zero_3 = linalg.fill ins(%zero : f32) outs(%t_init_3 : tensor<?xf32>) -> tensor<?xf32>
  %r_3 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
         ins(%ids, %w : tensor<?x2xi64>, tensor<?x2xf32>) outs(%t_zero_3 : tensor<?xf32>) {
  ^bb0(%id: i64, %wv: f32, %racc: f32):
    %hit = arith.cmpi eq, %id, %e3 : i64
    %sel = arith.select %hit, %wv, %zero : f32
    %rsum = arith.addf %racc, %sel : f32
    linalg.yield %rsum : f32
  } -> tensor<?xf32>
  %acc3 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y_3, %r_3 : tensor<?x4xf32>, tensor<?xf32>) outs(%acc2 : tensor<?x4xf32>) {
  ^bb0(%yv: f32, %rv: f32, %av: f32):
    %scaled = arith.mulf %yv, %rv : f32
    %asum = arith.addf %av, %scaled : f32
    linalg.yield %asum : f32
  } -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}
