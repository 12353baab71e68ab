// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s

// Factor B of a masked-LM step is scaled by count² at run time: the count is
// read from its tensor, squared and multiplied into the static scale.
pf.param @F : tensor<3x3xf32>
func.func @main(%x: tensor<4x3xf32>, %step: tensor<i64>, %count: tensor<i64>) {
  pf.kfac.update_factor @F from %x step %step count %count {scale = 2.0 : f64, every = 3 : i64} : tensor<4x3xf32>, tensor<i64>, tensor<i64>
  return
}
// CHECK: arith.remsi
// CHECK: %[[N:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: %[[NF:.*]] = arith.sitofp %[[N]] : i64 to f64
// CHECK: %[[SQ:.*]] = arith.mulf %[[NF]], %[[NF]] : f64
// CHECK: %[[SCALE:.*]] = arith.mulf %{{.*}}, %[[SQ]] : f64
// CHECK: cf.cond_br
// CHECK: call @pfrt_kfac_factor(%arg0, %{{.*}}, %{{.*}}, %[[SCALE]], %{{.*}}, %{{.*}}, %{{.*}})
