// A tosa MLP: tosa.matmul (batch 2, 16 tokens, 32 -> 64 -> 32), relu as clamp, residual add.
func.func @f(%x: tensor<2x16x32xf32>, %w1: tensor<2x32x64xf32> {mgt.param, mgt.name = "w1"},
             %w2: tensor<2x64x32xf32> {mgt.param, mgt.name = "w2"}) -> tensor<2x16x32xf32> {
  %h = tosa.matmul %x, %w1 : (tensor<2x16x32xf32>, tensor<2x32x64xf32>) -> tensor<2x16x64xf32>
  %r = tosa.clamp %h {min_fp = 0.0 : f32, max_fp = 3.40282347E+38 : f32, min_int = 0 : i64, max_int = 9223372036854775807 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %y = tosa.matmul %r, %w2 : (tensor<2x16x64xf32>, tensor<2x64x32xf32>) -> tensor<2x16x32xf32>
  %o = tosa.add %x, %y : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  return %o : tensor<2x16x32xf32>
}
