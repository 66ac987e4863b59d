// A small transformer block in linalg on tensors: multi-head linear attention (Katharopoulos et al.
// 2020, non-causal, relu feature map, without the normaliser) and a GELU MLP, each with a residual.
// batch 8, sequence 512, width 512, 8 heads of 64, ffn 2048. Linear attention keeps every tensor's dims
// distinct (softmax attention's q.k^T ties two sequence dims of one tensor, which mgt.graph/1 cannot
// name; docs/mlir.md "Limits"). Generated once by a script; edit freely.
//   mgt-plan import examples/mlir/transformer_block.mlir     mgt-plan examples/mlir/transformer_block.mlir --gpus 8
func.func @block(%x: tensor<8x512x512xf32>,
                 %wq: tensor<512x8x64xf32> {mgt.param, mgt.name = "wq"},
                 %wk: tensor<512x8x64xf32> {mgt.param, mgt.name = "wk"},
                 %wv: tensor<512x8x64xf32> {mgt.param, mgt.name = "wv"},
                 %wo: tensor<8x64x512xf32> {mgt.param, mgt.name = "wo"},
                 %w1: tensor<512x2048xf32> {mgt.param, mgt.name = "w1"},
                 %w2: tensor<2048x512xf32> {mgt.param, mgt.name = "w2"}) -> tensor<8x512x512xf32> {
  %zero = arith.constant 0.0 : f32
  %q.e = tensor.empty() : tensor<8x512x8x64xf32>
  %q.z = linalg.fill ins(%zero : f32) outs(%q.e : tensor<8x512x8x64xf32>) -> tensor<8x512x8x64xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(b, s, a, d, h) -> (b, s, h)>, affine_map<(b, s, a, d, h) -> (h, a, d)>, affine_map<(b, s, a, d, h) -> (b, s, a, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wq : tensor<8x512x512xf32>, tensor<512x8x64xf32>) outs(%q.z : tensor<8x512x8x64xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x8x64xf32>
  %k.e = tensor.empty() : tensor<8x512x8x64xf32>
  %k.z = linalg.fill ins(%zero : f32) outs(%k.e : tensor<8x512x8x64xf32>) -> tensor<8x512x8x64xf32>
  %k = linalg.generic {indexing_maps = [affine_map<(b, s, a, d, h) -> (b, s, h)>, affine_map<(b, s, a, d, h) -> (h, a, d)>, affine_map<(b, s, a, d, h) -> (b, s, a, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wk : tensor<8x512x512xf32>, tensor<512x8x64xf32>) outs(%k.z : tensor<8x512x8x64xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x8x64xf32>
  %v.e = tensor.empty() : tensor<8x512x8x64xf32>
  %v.z = linalg.fill ins(%zero : f32) outs(%v.e : tensor<8x512x8x64xf32>) -> tensor<8x512x8x64xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(b, s, a, d, h) -> (b, s, h)>, affine_map<(b, s, a, d, h) -> (h, a, d)>, affine_map<(b, s, a, d, h) -> (b, s, a, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %wv : tensor<8x512x512xf32>, tensor<512x8x64xf32>) outs(%v.z : tensor<8x512x8x64xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x8x64xf32>
  %qf.e = tensor.empty() : tensor<8x512x8x64xf32>
  %qf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<8x512x8x64xf32>) outs(%qf.e : tensor<8x512x8x64xf32>) {
    ^bb0(%_i0: f32, %_o: f32):
      %_c0 = arith.constant 0.0 : f32
      %_m = arith.maximumf %_i0, %_c0 : f32
      linalg.yield %_m : f32
  } -> tensor<8x512x8x64xf32>
  %kf.e = tensor.empty() : tensor<8x512x8x64xf32>
  %kf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<8x512x8x64xf32>) outs(%kf.e : tensor<8x512x8x64xf32>) {
    ^bb0(%_i0: f32, %_o: f32):
      %_c0 = arith.constant 0.0 : f32
      %_m = arith.maximumf %_i0, %_c0 : f32
      linalg.yield %_m : f32
  } -> tensor<8x512x8x64xf32>
  %kv.e = tensor.empty() : tensor<8x8x64x64xf32>
  %kv.z = linalg.fill ins(%zero : f32) outs(%kv.e : tensor<8x8x64x64xf32>) -> tensor<8x8x64x64xf32>
  %kv = linalg.generic {indexing_maps = [affine_map<(b, a, d, e, s) -> (b, s, a, d)>, affine_map<(b, a, d, e, s) -> (b, s, a, e)>, affine_map<(b, a, d, e, s) -> (b, a, d, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%kf, %v : tensor<8x512x8x64xf32>, tensor<8x512x8x64xf32>) outs(%kv.z : tensor<8x8x64x64xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x8x64x64xf32>
  %o.e = tensor.empty() : tensor<8x512x8x64xf32>
  %o.z = linalg.fill ins(%zero : f32) outs(%o.e : tensor<8x512x8x64xf32>) -> tensor<8x512x8x64xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, s, a, e, d) -> (b, s, a, d)>, affine_map<(b, s, a, e, d) -> (b, a, d, e)>, affine_map<(b, s, a, e, d) -> (b, s, a, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%qf, %kv : tensor<8x512x8x64xf32>, tensor<8x8x64x64xf32>) outs(%o.z : tensor<8x512x8x64xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x8x64xf32>
  %attn.e = tensor.empty() : tensor<8x512x512xf32>
  %attn.z = linalg.fill ins(%zero : f32) outs(%attn.e : tensor<8x512x512xf32>) -> tensor<8x512x512xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(b, s, h, a, e) -> (b, s, a, e)>, affine_map<(b, s, h, a, e) -> (a, e, h)>, affine_map<(b, s, h, a, e) -> (b, s, h)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%o, %wo : tensor<8x512x8x64xf32>, tensor<8x64x512xf32>) outs(%attn.z : tensor<8x512x512xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x512xf32>
  %r1.e = tensor.empty() : tensor<8x512x512xf32>
  %r1 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %attn : tensor<8x512x512xf32>, tensor<8x512x512xf32>) outs(%r1.e : tensor<8x512x512xf32>) {
    ^bb0(%_i0: f32, %_i1: f32, %_o: f32):
      %_sum = arith.addf %_i0, %_i1 : f32
      linalg.yield %_sum : f32
  } -> tensor<8x512x512xf32>
  %f1.e = tensor.empty() : tensor<8x512x2048xf32>
  %f1.z = linalg.fill ins(%zero : f32) outs(%f1.e : tensor<8x512x2048xf32>) -> tensor<8x512x2048xf32>
  %f1 = linalg.generic {indexing_maps = [affine_map<(b, s, f, h) -> (b, s, h)>, affine_map<(b, s, f, h) -> (h, f)>, affine_map<(b, s, f, h) -> (b, s, f)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%r1, %w1 : tensor<8x512x512xf32>, tensor<512x2048xf32>) outs(%f1.z : tensor<8x512x2048xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x2048xf32>
  %g.e = tensor.empty() : tensor<8x512x2048xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%f1 : tensor<8x512x2048xf32>) outs(%g.e : tensor<8x512x2048xf32>) {
    ^bb0(%_i0: f32, %_o: f32):
      %_half = arith.constant 0.5 : f32
      %_one = arith.constant 1.0 : f32
      %_rs2 = arith.constant 0.70710678 : f32
      %_u = arith.mulf %_i0, %_rs2 : f32
      %_e = math.erf %_u : f32
      %_v = arith.addf %_e, %_one : f32
      %_w = arith.mulf %_i0, %_half : f32
      %_g = arith.mulf %_w, %_v : f32
      linalg.yield %_g : f32
  } -> tensor<8x512x2048xf32>
  %f2.e = tensor.empty() : tensor<8x512x512xf32>
  %f2.z = linalg.fill ins(%zero : f32) outs(%f2.e : tensor<8x512x512xf32>) -> tensor<8x512x512xf32>
  %f2 = linalg.generic {indexing_maps = [affine_map<(b, s, h, f) -> (b, s, f)>, affine_map<(b, s, h, f) -> (f, h)>, affine_map<(b, s, h, f) -> (b, s, h)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g, %w2 : tensor<8x512x2048xf32>, tensor<2048x512xf32>) outs(%f2.z : tensor<8x512x512xf32>) {
    ^bb0(%_l: f32, %_r: f32, %_acc: f32):
      %_p = arith.mulf %_l, %_r : f32
      %_s = arith.addf %_acc, %_p : f32
      linalg.yield %_s : f32
  } -> tensor<8x512x512xf32>
  %y.e = tensor.empty() : tensor<8x512x512xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r1, %f2 : tensor<8x512x512xf32>, tensor<8x512x512xf32>) outs(%y.e : tensor<8x512x512xf32>) {
    ^bb0(%_i0: f32, %_i1: f32, %_o: f32):
      %_sum = arith.addf %_i0, %_i1 : f32
      linalg.yield %_sum : f32
  } -> tensor<8x512x512xf32>
  return %y : tensor<8x512x512xf32>
}
