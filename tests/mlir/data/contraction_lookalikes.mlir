// Two-input linalg.generic ops with a reduction loop whose bodies are not multiply-adds and that
// MLIR 19's isaContractionOpInterface dereferences a null defining op on (libFuzzer finding): line 9
// yields a block argument, line 15 adds the accumulator to an input element without a multiply. mgt
// lists both as unsupported instead of asking MLIR.
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      linalg.yield %b : f32
  } -> tensor<4x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %t = arith.addf %acc, %a : f32
      linalg.yield %t : f32
  } -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}
