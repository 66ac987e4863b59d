// A 2-layer MLP in linalg on tensors: y = relu(x . w1) . w2, 4096 tokens, width 1024, hidden 4096.
// Weights carry {mgt.param}; destinations use the usual tensor.empty + linalg.fill idiom.
//   mgt-plan import examples/mlir/mlp.mlir --json      mgt-plan examples/mlir/mlp.mlir --gpus 8
func.func @mlp(%x: tensor<4096x1024xf32>,
               %w1: tensor<1024x4096xf32> {mgt.param, mgt.name = "w1"},
               %w2: tensor<4096x1024xf32> {mgt.param, mgt.name = "w2"}) -> tensor<4096x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4096x4096xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4096x1024xf32>, tensor<1024x4096xf32>)
                     outs(%z1 : tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %e2 = tensor.empty() : tensor<4096x4096xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4096x4096xf32>) outs(%e2 : tensor<4096x4096xf32>) {
    ^bb0(%a: f32, %o: f32):
      %c0 = arith.constant 0.0 : f32
      %m = arith.maximumf %a, %c0 : f32
      linalg.yield %m : f32
  } -> tensor<4096x4096xf32>
  %e3 = tensor.empty() : tensor<4096x1024xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<4096x4096xf32>, tensor<4096x1024xf32>)
                     outs(%z3 : tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  return %y : tensor<4096x1024xf32>
}
