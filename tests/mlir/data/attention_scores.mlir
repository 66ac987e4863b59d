// Softmax-attention scores q.k^T of one sequence: the result's two dims are tied (line 10).
func.func @f(%x: tensor<16x8xf32>, %wq: tensor<8x8xf32> {mgt.param}, %wk: tensor<8x8xf32> {mgt.param}) -> tensor<16x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<16x8xf32>, tensor<8x8xf32>) outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  %k = linalg.matmul ins(%x, %wk : tensor<16x8xf32>, tensor<8x8xf32>) outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  %e2 = tensor.empty() : tensor<16x16xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = linalg.matmul_transpose_b ins(%q, %k : tensor<16x8xf32>, tensor<16x8xf32>) outs(%f2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}
