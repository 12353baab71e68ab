// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s

// Optimizer updates write parameters in place through their table entries;
// the learning rate and step are read from their 0-d tensors at run time by
// pfrt_read_scalar (they may live in device memory), once at the start for
// every update that uses them.
pf.param @w : tensor<4x3xf32>
pf.param @w.m : tensor<4x3xf32>
pf.param @w.v : tensor<4x3xf32>
pf.param @u : tensor<3xf32>
pf.param @u.m : tensor<3xf32>
pf.param @u.v : tensor<3xf32>
func.func @main(%logits: tensor<6x10xf32>, %labels: tensor<6xi64>, %g: tensor<4x3xf32>,
                %lr: tensor<f64>, %step: tensor<i64>, %gu: tensor<3xf32>) -> tensor<f32> {
  %loss, %d, %count = pf.softmax_cross_entropy %logits, %labels : (tensor<6x10xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x10xf32>, tensor<i64>)
  pf.adamw_update @w(@w.m, @w.v) grad %g lr %lr step %step : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  pf.adamw_update @u(@u.m, @u.v) grad %gu lr %lr step %step : tensor<3xf32>, tensor<f64>, tensor<i64>
  return %loss : tensor<f32>
}
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w">
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w.m">
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w.v">
// CHECK: %[[SLOT:.*]] = llvm.alloca %{{.*}} x f64
// CHECK: %[[LRE:.*]] = llvm.getelementptr %arg1[3]
// CHECK: call @pfrt_read_scalar(%arg0, %[[LRE]], %[[SLOT]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[LR:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: %[[STEPE:.*]] = llvm.getelementptr %arg1[4]
// CHECK: call @pfrt_read_scalar(%arg0, %[[STEPE]], %[[SLOT]])
// CHECK: %[[STEPF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f64
// CHECK: call @pfrt_softmax_cross_entropy(%arg0, {{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, f64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NOT: pfrt_read_scalar
// CHECK: %[[STEP:.*]] = arith.fptosi %[[STEPF]] : f64 to i64
// CHECK: call @pfrt_adamw_step(%arg0, {{.*}}, %[[LR]], {{.*}}, %[[STEP]], {{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, f64, f64, f64, i64, i32) -> i32
// CHECK-NOT: pfrt_read_scalar
// CHECK: %[[STEP2:.*]] = arith.fptosi %[[STEPF]] : f64 to i64
// CHECK: call @pfrt_adamw_step(%arg0, {{.*}}, %[[LR]], {{.*}}, %[[STEP2]], {{.*}})
// CHECK-NOT: call @pfrt_read_scalar
