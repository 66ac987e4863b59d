// linalg.generic with a non-string iterator type (line 7, column 84). MLIR 19's custom parser reads
// such an element as a string of garbage length (mlir-opt-19 segfaults on this file); mgt refuses it
// first. The commented-out `iterator_types = [1]` and the doc string below must not be flagged.
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       doc = "iterator_types = [1]", iterator_types = ["parallel", 24]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %c0 = arith.constant 0.0 : f32
      %m = arith.maximumf %a, %c0 : f32
      linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
