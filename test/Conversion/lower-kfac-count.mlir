// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s

// Factor B of a masked-LM step is scaled by count² at run time: the count is
// read from its tensor, squared and multiplied into the static scale.
pf.param @F : tensor<3x3xf32>
func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>, %count: tensor<i64>) {
  pf.kfac.update_factor @F from %x step %step count %count {scale = 2.0 : f64, every = 3 : i64} : tensor<4x3xf32>, tensor<i64>, tensor<i64>
  return
}
// CHECK: %[[NE:.*]] = llvm.getelementptr %arg1[2]
// CHECK: call @pfrt_read_scalar(%arg0, %[[NE]], %[[SLOT:[0-9a-z_]+]])
// CHECK: %[[NF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: arith.remsi
// CHECK: %[[SQ:.*]] = arith.mulf %[[NF]], %[[NF]] : f64
// CHECK: %[[SCALE:.*]] = arith.mulf %{{.*}}, %[[SQ]] : f64
// CHECK: cf.cond_br
// CHECK: call @pfrt_kfac_factor(%arg0, %{{.*}}, %{{.*}}, %[[SCALE]], %{{.*}}, %{{.*}}, %{{.*}})
