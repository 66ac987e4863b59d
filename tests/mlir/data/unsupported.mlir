// Valid MLIR with two ops mgt cannot map: tosa.reshape (line 7) and linalg.softmax (line 9).
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {mgt.param}) -> tensor<32xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tosa.reshape %h {new_shape = array<i64: 32>} : (tensor<4x8xf32>) -> tensor<32xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %s = linalg.softmax dimension(1) ins(%h : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<32xf32>
}
