// Valid linalg.generic ops whose text mentions iterator_types in places MLIR 19 parses safely: a
// comment (iterator_types = [1]), a doc string, a typed string element, and the generic form with
// #linalg.iterator_type attributes (converted with checked casts). All import as two relu ops.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  // linalg.generic {iterator_types = [1]}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       doc = "linalg.generic {iterator_types = [1]}",
                       iterator_types = ["parallel" : none, "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %c0 = arith.constant 0.0 : f32
      %m = arith.maximumf %a, %c0 : f32
      linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %s = "linalg.generic"(%r, %e) <{indexing_maps = [#map, #map],
      iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>],
      operandSegmentSizes = array<i32: 1, 1>}> ({
    ^bb0(%a: f32, %o: f32):
      %c0 = arith.constant 0.0 : f32
      %m = arith.maximumf %a, %c0 : f32
      linalg.yield %m : f32
  }) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
