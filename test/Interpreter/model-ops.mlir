// The ops of whole models against float64 numpy references computed by
// Inputs/make_model_inputs.py (transformers' RMSNorm and rotate-half, complex
// multiplication for interleaved rotary, and a cache-free causal attention of
// all tokens at once): embedding; rms_norm per group (K/G > 1) with
// weight_offset and per row; rotary on a slice of every head, interleaved or
// not, with scale; attention with GQA (4 query heads on 2 KV heads), a window,
// sinks and key_shared, run as a prefill of two interleaved sequences and a
// decode step on the same KV cache slot; one decoder layer with an MoE block.
// Then the run-time errors.

// RUN: moec-interp %s --function embedding --inputs %S/Inputs/model_embedding.inputs.npz --expected-outputs %S/Inputs/model_embedding.expected.npz | FileCheck %s --check-prefix=EMBED
// RUN: moec-interp %s --function rms_norm --inputs %S/Inputs/model_rms_norm.inputs.npz --expected-outputs %S/Inputs/model_rms_norm.expected.npz | FileCheck %s --check-prefix=NORM
// RUN: moec-interp %s --function rotary --inputs %S/Inputs/model_rotary.inputs.npz --expected-outputs %S/Inputs/model_rotary.expected.npz | FileCheck %s --check-prefix=ROTARY
// RUN: moec-interp %s --function attention --inputs %S/Inputs/model_attention.inputs.npz --expected-outputs %S/Inputs/model_attention.expected.npz | FileCheck %s --check-prefix=ATTN
// RUN: moec-interp %s --function attention_window_sinks --inputs %S/Inputs/model_attention_window_sinks.inputs.npz --expected-outputs %S/Inputs/model_attention_window_sinks.expected.npz | FileCheck %s --check-prefix=ATTN
// RUN: moec-interp %s --function attention_key_shared --inputs %S/Inputs/model_attention_key_shared.inputs.npz --expected-outputs %S/Inputs/model_attention_key_shared.expected.npz | FileCheck %s --check-prefix=SHARED
// RUN: moec-interp %s --function forward --inputs %S/Inputs/model_forward.inputs.npz --expected-outputs %S/Inputs/model_forward.expected.npz | FileCheck %s --check-prefix=FORWARD
// The references tell the variants apart: rotate-half against the interleaved
// expectation, and attention without the window and sinks.
// RUN: not moec-interp %s --function rotary_swapped --inputs %S/Inputs/model_rotary.inputs.npz --expected-outputs %S/Inputs/model_rotary.expected.npz | FileCheck %s --check-prefix=SWAPPED
// RUN: not moec-interp %s --function attention --inputs %S/Inputs/model_attention.inputs.npz --expected-outputs %S/Inputs/model_attention_window_sinks.expected.npz | FileCheck %s --check-prefix=NOWINDOW

// EMBED: out [5, 6]: max abs err {{.*}}: ok
// NORM-DAG: grouped [5, 12]: max abs err {{.*}}: ok
// NORM-DAG: row [5, 12]: max abs err {{.*}}: ok
// ROTARY-DAG: half [5, 32]: max abs err {{.*}}: ok
// ROTARY-DAG: interleaved [5, 32]: max abs err {{.*}}: ok
// ROTARY-DAG: full [5, 32]: max abs err {{.*}}: ok
// ATTN-DAG: prefill [6, 24]: max abs err {{.*}}: ok
// ATTN-DAG: decode [2, 24]: max abs err {{.*}}: ok
// SHARED-DAG: prefill [6, 20]: max abs err {{.*}}: ok
// SHARED-DAG: decode [2, 20]: max abs err {{.*}}: ok
// FORWARD: logits [6, 32]: max abs err {{.*}}: ok
// SWAPPED-DAG: half [5, 32]: max abs err {{.*}}: MISMATCH
// SWAPPED-DAG: interleaved [5, 32]: max abs err {{.*}}: MISMATCH
// NOWINDOW-DAG: prefill [6, 24]: max abs err {{.*}}: MISMATCH
// NOWINDOW-DAG: decode [2, 24]: max abs err {{.*}}: MISMATCH

func.func @embedding(%ids: tensor<?xi64> {onnx.name = "ids"}, %table: tensor<10x6xf32> {onnx.name = "table"})
    -> (tensor<?x6xf32> {onnx.name = "out"}) {
  %y = moe.embedding %ids, %table : tensor<?xi64>, tensor<10x6xf32> -> tensor<?x6xf32>
  return %y : tensor<?x6xf32>
}

// Four groups of 3 columns with Gemma's 1 + weight; one group of the whole row.
func.func @rms_norm(%x: tensor<?x12xf32> {onnx.name = "x"}, %wg: tensor<4xf32> {onnx.name = "w_group"},
                    %wr: tensor<12xf32> {onnx.name = "w_row"})
    -> (tensor<?x12xf32> {onnx.name = "grouped"}, tensor<?x12xf32> {onnx.name = "row"}) {
  %g = moe.rms_norm %x, %wg {epsilon = 1.0e-5 : f64, weight_offset = 1.0 : f64}
         : tensor<?x12xf32>, tensor<4xf32> -> tensor<?x12xf32>
  %r = moe.rms_norm %x, %wr {epsilon = 1.0e-6 : f64} : tensor<?x12xf32>, tensor<12xf32> -> tensor<?x12xf32>
  return %g, %r : tensor<?x12xf32>, tensor<?x12xf32>
}

// Two heads of 16: columns [4, 10) rotate (R = 6) with scale 1.25, in both
// pair orders; then the whole head with the defaults.
func.func @rotary(%x: tensor<?x32xf32> {onnx.name = "x"}, %pos: tensor<?xi64> {onnx.name = "positions"},
                  %f: tensor<3xf32> {onnx.name = "inv_freq"}, %ff: tensor<8xf32> {onnx.name = "inv_freq_full"})
    -> (tensor<?x32xf32> {onnx.name = "half"}, tensor<?x32xf32> {onnx.name = "interleaved"},
        tensor<?x32xf32> {onnx.name = "full"}) {
  %h = moe.rotary %x, %pos, %f {head_dim = 16 : i64, offset = 4 : i64, scale = 1.25 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<3xf32> -> tensor<?x32xf32>
  %i = moe.rotary %x, %pos, %f {head_dim = 16 : i64, offset = 4 : i64, interleaved = true, scale = 1.25 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<3xf32> -> tensor<?x32xf32>
  %a = moe.rotary %x, %pos, %ff {head_dim = 16 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<8xf32> -> tensor<?x32xf32>
  return %h, %i, %a : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

func.func @rotary_swapped(%x: tensor<?x32xf32> {onnx.name = "x"}, %pos: tensor<?xi64> {onnx.name = "positions"},
                          %f: tensor<3xf32> {onnx.name = "inv_freq"}, %ff: tensor<8xf32> {onnx.name = "inv_freq_full"})
    -> (tensor<?x32xf32> {onnx.name = "half"}, tensor<?x32xf32> {onnx.name = "interleaved"},
        tensor<?x32xf32> {onnx.name = "full"}) {
  %h = moe.rotary %x, %pos, %f {head_dim = 16 : i64, offset = 4 : i64, interleaved = true, scale = 1.25 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<3xf32> -> tensor<?x32xf32>
  %i = moe.rotary %x, %pos, %f {head_dim = 16 : i64, offset = 4 : i64, scale = 1.25 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<3xf32> -> tensor<?x32xf32>
  %a = moe.rotary %x, %pos, %ff {head_dim = 16 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<8xf32> -> tensor<?x32xf32>
  return %h, %i, %a : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// GQA: 4 query heads of 8 on 2 KV heads, values of 6. The prefill holds
// sequences 0 (positions 0..3) and 1000 (0..1) interleaved; the decode step
// continues 1000 at 2 and 0 at 4, reading what the prefill wrote in slot 0.
// Slot 1 is another layer's: the same tokens there change nothing in slot 0.
func.func @attention(%q: tensor<?x32xf32> {onnx.name = "query"}, %k: tensor<?x16xf32> {onnx.name = "key"},
                     %v: tensor<?x12xf32> {onnx.name = "value"}, %pos: tensor<?xi64> {onnx.name = "positions"},
                     %seq: tensor<?xi64> {onnx.name = "sequences"},
                     %q2: tensor<?x32xf32> {onnx.name = "query_decode"}, %k2: tensor<?x16xf32> {onnx.name = "key_decode"},
                     %v2: tensor<?x12xf32> {onnx.name = "value_decode"},
                     %pos2: tensor<?xi64> {onnx.name = "positions_decode"},
                     %seq2: tensor<?xi64> {onnx.name = "sequences_decode"})
    -> (tensor<?x24xf32> {onnx.name = "prefill"}, tensor<?x24xf32> {onnx.name = "decode"}) {
  %a = moe.attention %q, %k, %v, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x12xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x24xf32>
  %other = moe.attention %q, %q, %q, %pos, %seq {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.35 : f64}
         : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  %b = moe.attention %q2, %k2, %v2, %pos2, %seq2 {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x12xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x24xf32>
  return %a, %b : tensor<?x24xf32>, tensor<?x24xf32>
}

// The same steps with a window of 2 positions and gpt-oss's sinks.
func.func @attention_window_sinks(%q: tensor<?x32xf32> {onnx.name = "query"}, %k: tensor<?x16xf32> {onnx.name = "key"},
                     %v: tensor<?x12xf32> {onnx.name = "value"}, %pos: tensor<?xi64> {onnx.name = "positions"},
                     %seq: tensor<?xi64> {onnx.name = "sequences"}, %sinks: tensor<4xf32> {onnx.name = "sinks"},
                     %q2: tensor<?x32xf32> {onnx.name = "query_decode"}, %k2: tensor<?x16xf32> {onnx.name = "key_decode"},
                     %v2: tensor<?x12xf32> {onnx.name = "value_decode"},
                     %pos2: tensor<?xi64> {onnx.name = "positions_decode"},
                     %seq2: tensor<?xi64> {onnx.name = "sequences_decode"})
    -> (tensor<?x24xf32> {onnx.name = "prefill"}, tensor<?x24xf32> {onnx.name = "decode"}) {
  %a = moe.attention %q, %k, %v, %pos, %seq sinks(%sinks : tensor<4xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64, window = 2 : i64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x12xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x24xf32>
  %b = moe.attention %q2, %k2, %v2, %pos2, %seq2 sinks(%sinks : tensor<4xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64, window = 2 : i64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x12xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x24xf32>
  return %a, %b : tensor<?x24xf32>, tensor<?x24xf32>
}

// DeepSeek-V3's decoupled rope key: query heads of 6 + 4 columns, the last 4
// against key_shared, which every head shares; with sinks and a window of 3.
func.func @attention_key_shared(%q: tensor<?x40xf32> {onnx.name = "query"}, %k: tensor<?x12xf32> {onnx.name = "key"},
                     %v: tensor<?x10xf32> {onnx.name = "value"}, %ks: tensor<?x4xf32> {onnx.name = "key_shared"},
                     %pos: tensor<?xi64> {onnx.name = "positions"}, %seq: tensor<?xi64> {onnx.name = "sequences"},
                     %sinks: tensor<4xf32> {onnx.name = "sinks"},
                     %q2: tensor<?x40xf32> {onnx.name = "query_decode"}, %k2: tensor<?x12xf32> {onnx.name = "key_decode"},
                     %v2: tensor<?x10xf32> {onnx.name = "value_decode"},
                     %ks2: tensor<?x4xf32> {onnx.name = "key_shared_decode"},
                     %pos2: tensor<?xi64> {onnx.name = "positions_decode"},
                     %seq2: tensor<?xi64> {onnx.name = "sequences_decode"})
    -> (tensor<?x20xf32> {onnx.name = "prefill"}, tensor<?x20xf32> {onnx.name = "decode"}) {
  %a = moe.attention %q, %k, %v, %pos, %seq key_shared(%ks : tensor<?x4xf32>) sinks(%sinks : tensor<4xf32>)
         {layer = 2 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.3 : f64, window = 3 : i64}
         : tensor<?x40xf32>, tensor<?x12xf32>, tensor<?x10xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x20xf32>
  %b = moe.attention %q2, %k2, %v2, %pos2, %seq2 key_shared(%ks2 : tensor<?x4xf32>) sinks(%sinks : tensor<4xf32>)
         {layer = 2 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.3 : f64, window = 3 : i64}
         : tensor<?x40xf32>, tensor<?x12xf32>, tensor<?x10xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x20xf32>
  return %a, %b : tensor<?x20xf32>, tensor<?x20xf32>
}

// A Qwen3-MoE-like decoder layer and the head: the model program's three
// inputs, then the weights (arguments here, constants in a real program).
func.func @forward(%input_ids: tensor<?xi64> {onnx.name = "input_ids"},
                   %positions: tensor<?xi64> {onnx.name = "positions"},
                   %sequences: tensor<?xi64> {onnx.name = "sequences"},
                   %inv_freq: tensor<2xf32> {onnx.name = "inv_freq"},
                   %embed: tensor<32x16xf32> {onnx.name = "embed"},
                   %input_norm: tensor<16xf32> {onnx.name = "input_norm"},
                   %wq: tensor<16x16xf32> {onnx.name = "wq"}, %wk: tensor<8x16xf32> {onnx.name = "wk"},
                   %wv: tensor<8x16xf32> {onnx.name = "wv"}, %q_norm: tensor<4xf32> {onnx.name = "q_norm"},
                   %k_norm: tensor<4xf32> {onnx.name = "k_norm"}, %wo: tensor<16x16xf32> {onnx.name = "wo"},
                   %post_norm: tensor<16xf32> {onnx.name = "post_norm"},
                   %router: tensor<8x16xf32> {onnx.name = "router"},
                   %gate_up: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                   %down: tensor<8x16x8xf32> {onnx.name = "down"},
                   %final_norm: tensor<16xf32> {onnx.name = "final_norm"},
                   %lm_head: tensor<32x16xf32> {onnx.name = "lm_head"})
    -> (tensor<?x32xf32> {onnx.name = "logits"}) {
  %x = moe.embedding %input_ids, %embed : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %h = moe.rms_norm %x, %input_norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %q = moe.linear %h, %wq : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %k = moe.linear %h, %wk : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %v = moe.linear %h, %wv : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %qn = moe.rms_norm %q, %q_norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<4xf32> -> tensor<?x16xf32>
  %kn = moe.rms_norm %k, %k_norm {epsilon = 1.0e-6 : f64} : tensor<?x8xf32>, tensor<4xf32> -> tensor<?x8xf32>
  %qr = moe.rotary %qn, %positions, %inv_freq {head_dim = 4 : i64}
          : tensor<?x16xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x16xf32>
  %kr = moe.rotary %kn, %positions, %inv_freq {head_dim = 4 : i64}
          : tensor<?x8xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x8xf32>
  %a = moe.attention %qr, %kr, %v, %positions, %sequences
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
         : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x16xf32>
  %o = moe.linear %a, %wo : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %r = arith.addf %x, %o : tensor<?x16xf32>
  %p = moe.rms_norm %r, %post_norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %m = moe.layer %p : tensor<?x16xf32> router_weight(%router : tensor<8x16xf32>)
         gate_up(%gate_up : tensor<8x16x16xf32>) down(%down : tensor<8x16x8xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  %s = arith.addf %r, %m : tensor<?x16xf32>
  %f = moe.rms_norm %s, %final_norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %logits = moe.linear %f, %lm_head : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// Positions fill from 0 without gaps, even where a window of 1 would read
// only the token's own: sequence 3 starting at position 7 is an error.
// RUN: not moec-interp %s --function window_start 2>&1 | FileCheck %s --check-prefix=WSTART
// WSTART: error: 'moe.attention' op token 0 writes sequence 3 at position 7, which holds 0 positions: a gap
func.func @window_start() -> tensor<2x4xf32> {
  %q = arith.constant dense<0.0> : tensor<2x4xf32>
  %k = arith.constant dense<0.0> : tensor<2x2xf32>
  %v = arith.constant dense<[[1.0, 2.0], [6.0, 7.0]]> : tensor<2x2xf32>
  %pos = arith.constant dense<[7, 8]> : tensor<2xi64>
  %seq = arith.constant dense<3> : tensor<2xi64>
  %a = moe.attention %q, %k, %v, %pos, %seq {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64, window = 1 : i64}
         : tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}

// Run-time errors name the op's location and what it read.
// RUN: not moec-interp %s --function embedding_out_of_range 2>&1 | FileCheck %s --check-prefix=EMBEDRANGE
// RUN: not moec-interp %s --function never_written 2>&1 | FileCheck %s --check-prefix=UNWRITTEN
// RUN: not moec-interp %s --function never_written_window 2>&1 | FileCheck %s --check-prefix=UNWRITTENW
// RUN: not moec-interp %s --function negative_sequence 2>&1 | FileCheck %s --check-prefix=NEGSEQ
// RUN: not moec-interp %s --function negative_position 2>&1 | FileCheck %s --check-prefix=NEGPOS
// RUN: not moec-interp %s --function same_entry 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: not moec-interp %s --function slot_widths 2>&1 | FileCheck %s --check-prefix=WIDTHS

// EMBEDRANGE: model-ops.mlir:[[@LINE+4]]:8: error: 'moe.embedding' op ids[1] = 10 is not a row of the table: outside [0, 10)
func.func @embedding_out_of_range() -> tensor<2x2xf32> {
  %ids = arith.constant dense<[9, 10]> : tensor<2xi64>
  %table = arith.constant dense<1.0> : tensor<10x2xf32>
  %y = moe.embedding %ids, %table : tensor<2xi64>, tensor<10x2xf32> -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// The prefill writes positions 0 and 1 of sequence 5; the decode token at
// position 3 would leave position 2 unwritten: a gap.
// UNWRITTEN: model-ops.mlir:[[@LINE+10]]:8: error: 'moe.attention' op token 0 writes sequence 5 at position 3, which holds 2 positions: a gap
func.func @never_written() -> tensor<1x2xf32> {
  %x = arith.constant dense<1.0> : tensor<2x2xf32>
  %pos = arith.constant dense<[0, 1]> : tensor<2xi64>
  %seq = arith.constant dense<5> : tensor<2xi64>
  %a = moe.attention %x, %x, %x, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<2x2xf32>
  %y = arith.constant dense<1.0> : tensor<1x2xf32>
  %p3 = arith.constant dense<3> : tensor<1xi64>
  %s5 = arith.constant dense<5> : tensor<1xi64>
  %b = moe.attention %y, %y, %y, %p3, %s5 {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<1x2xf32>
  return %b : tensor<1x2xf32>
}

// Sequence 1 fills positions 0..3, but sequence 0 starts at 3, although a
// window of 2 would read only positions 2 and 3: the cache is per sequence,
// and each fills from 0.
// UNWRITTENW: model-ops.mlir:[[@LINE+5]]:8: error: 'moe.attention' op token 4 writes sequence 0 at position 3, which holds 0 positions: a gap
func.func @never_written_window() -> tensor<5x2xf32> {
  %x = arith.constant dense<1.0> : tensor<5x2xf32>
  %pos = arith.constant dense<[0, 1, 2, 3, 3]> : tensor<5xi64>
  %seq = arith.constant dense<[1, 1, 1, 1, 0]> : tensor<5xi64>
  %a = moe.attention %x, %x, %x, %pos, %seq {layer = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64, window = 2 : i64}
         : tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>, tensor<5xi64>, tensor<5xi64> -> tensor<5x2xf32>
  return %a : tensor<5x2xf32>
}

// NEGSEQ: model-ops.mlir:[[@LINE+5]]:8: error: 'moe.attention' op sequences[1] = -1 is negative
func.func @negative_sequence() -> tensor<2x2xf32> {
  %x = arith.constant dense<1.0> : tensor<2x2xf32>
  %pos = arith.constant dense<[0, 0]> : tensor<2xi32>
  %seq = arith.constant dense<[0, -1]> : tensor<2xi32>
  %a = moe.attention %x, %x, %x, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi32>, tensor<2xi32> -> tensor<2x2xf32>
  return %a : tensor<2x2xf32>
}

// NEGPOS: model-ops.mlir:[[@LINE+5]]:8: error: 'moe.attention' op positions[0] = -2 is negative
func.func @negative_position() -> tensor<2x2xf32> {
  %x = arith.constant dense<1.0> : tensor<2x2xf32>
  %pos = arith.constant dense<[-2, 0]> : tensor<2xi64>
  %seq = arith.constant dense<[0, 1]> : tensor<2xi64>
  %a = moe.attention %x, %x, %x, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<2x2xf32>
  return %a : tensor<2x2xf32>
}

// Two tokens of one step at one (sequence, position): which write wins would
// be unspecified, so it is an error.
// SAME: model-ops.mlir:[[@LINE+5]]:8: error: 'moe.attention' op token 2 writes sequence 1, position 0, which an earlier token of the same step writes too
func.func @same_entry() -> tensor<3x2xf32> {
  %x = arith.constant dense<1.0> : tensor<3x2xf32>
  %pos = arith.constant dense<[0, 1, 0]> : tensor<3xi64>
  %seq = arith.constant dense<1> : tensor<3xi64>
  %a = moe.attention %x, %x, %x, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3xi64>, tensor<3xi64> -> tensor<3x2xf32>
  return %a : tensor<3x2xf32>
}

// One slot holds rows of one width: a second op on layer 0 with other key
// widths is an error, not a reinterpretation of the first one's rows.
// WIDTHS: model-ops.mlir:[[@LINE+8]]:8: error: 'moe.attention' op writes keys of 4 (+ 0 shared) and values of 4 columns to the slot of layer 0, which holds 2 (+ 0) and 2 from an earlier op
func.func @slot_widths() -> tensor<1x4xf32> {
  %x = arith.constant dense<1.0> : tensor<1x2xf32>
  %pos = arith.constant dense<0> : tensor<1xi64>
  %a = moe.attention %x, %x, %x, %pos, %pos {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<1x2xf32>
  %y = arith.constant dense<1.0> : tensor<1x4xf32>
  %p1 = arith.constant dense<1> : tensor<1xi64>
  %b = moe.attention %y, %y, %y, %p1, %pos {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<1x4xf32>
  return %b : tensor<1x4xf32>
}

// The cache stores its rows as moe.kv_cache's element_type says (the runtime's
// storage, moe-cast-model-bf16): a token attending to itself alone reads its
// value row back rounded to bf16 (1.001 -> 1, 3.3 -> 3.296875) in a function
// planned with a bf16 cache, as its f32 values in one without element_type.
// RUN: moec-interp %s --function cache_bf16 --print | FileCheck %s --check-prefix=CACHEBF16
// RUN: moec-interp %s --function cache_exact --print | FileCheck %s --check-prefix=CACHEEXACT
// CACHEBF16: result0 = tensor<1x2xf32> {{\[}}[1, 3.296875]]
// CACHEEXACT: result0 = tensor<1x2xf32> {{\[}}[1.00100005, 3.29999995]]
func.func @cache_bf16() -> tensor<1x2xf32> attributes {moe.kv_cache = {element_type = bf16, max_batch = 1 : i64, max_seq = 4 : i64}} {
  %x = arith.constant dense<0.0> : tensor<1x2xf32>
  %v = arith.constant dense<[[1.001, 3.3]]> : tensor<1x2xf32>
  %pos = arith.constant dense<0> : tensor<1xi64>
  %seq = arith.constant dense<0> : tensor<1xi64>
  %a = moe.attention %x, %x, %v, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<1x2xf32>
  return %a : tensor<1x2xf32>
}
func.func @cache_exact() -> tensor<1x2xf32> attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 4 : i64}} {
  %x = arith.constant dense<0.0> : tensor<1x2xf32>
  %v = arith.constant dense<[[1.001, 3.3]]> : tensor<1x2xf32>
  %pos = arith.constant dense<0> : tensor<1xi64>
  %seq = arith.constant dense<0> : tensor<1xi64>
  %a = moe.attention %x, %x, %v, %pos, %seq {layer = 0 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f64}
         : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1xi64>, tensor<1xi64> -> tensor<1x2xf32>
  return %a : tensor<1x2xf32>
}

// moe.add_rms_norm: the sum (rounded to f32, as arith.addf's) and its norm.
// Row 0: [1, 1] + [1, 3] = [2, 4], mean square 10; row 1: [0.5, -2] + [1.5, 2]
// = [2, 0], mean square 2. Normed with epsilon 0 and weight_offset + weight =
// [1, 2]: row 0 [2/sqrt(10), 8/sqrt(10)], row 1 [2/sqrt(2), 0].
// RUN: moec-interp %s --function add_rms_norm --print | FileCheck %s --check-prefix=ADDNORM
// ADDNORM: result0 = tensor<2x2xf32> {{\[}}[2, 4], [2, 0]]
// ADDNORM: result1 = tensor<2x2xf32> {{\[}}[0.632455528, 2.52982211], [1.41421354, 0]]
func.func @add_rms_norm() -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %h = arith.constant dense<[[1.0, 1.0], [0.5, -2.0]]> : tensor<2x2xf32>
  %a = arith.constant dense<[[1.0, 3.0], [1.5, 2.0]]> : tensor<2x2xf32>
  %w = arith.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %s, %n = moe.add_rms_norm %h, %a, %w {epsilon = 0.0 : f64, weight_offset = 1.0 : f64}
      : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32> -> tensor<2x2xf32>, tensor<2x2xf32>
  return %s, %n : tensor<2x2xf32>, tensor<2x2xf32>
}
