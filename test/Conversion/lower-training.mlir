// RUN: pf-opt %s --pf-lower-to-runtime | FileCheck %s

// Optimizer updates write parameters in place through their table entries;
// the learning rate and step are read from their 0-d tensors at run time.
pf.param @w : tensor<4x3xf32>
pf.param @w.m : tensor<4x3xf32>
pf.param @w.v : tensor<4x3xf32>
func.func @main(%logits: tensor<6x10xf32>, %labels: tensor<6xi64>, %g: tensor<4x3xf32>,
                %lr: tensor<f64>, %step: tensor<i64>) -> tensor<f32> {
  %loss, %d, %count = pf.softmax_cross_entropy %logits, %labels : (tensor<6x10xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x10xf32>, tensor<i64>)
  pf.adamw_update @w(@w.m, @w.v) grad %g lr %lr step %step : tensor<4x3xf32>, tensor<f64>, tensor<i64>
  return %loss : tensor<f32>
}
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w">
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w.m">
// CHECK-DAG: #pf.buffer<kind = param, bytes = 48, name = "w.v">
// CHECK: call @pfrt_softmax_cross_entropy(%arg0, {{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, f64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[LRD:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[LR:.*]] = llvm.load %[[LRD]] : !llvm.ptr -> f64
// CHECK: %[[STEPD:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[STEP:.*]] = llvm.load %[[STEPD]] : !llvm.ptr -> i64
// CHECK: call @pfrt_adamw_step(%arg0, {{.*}}, %[[LR]], {{.*}}, %[[STEP]], {{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, f64, f64, f64, i64, i32) -> i32
