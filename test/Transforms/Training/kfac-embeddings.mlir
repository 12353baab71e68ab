// Embedding K-FAC: pf-insert-kfac embeddings=word|word-and-position gives
// each table a diagonal factor A [vocab] updated from the ids before the
// lookup (pf.kfac.update_embedding_factor) and B [h, h] from the per-token
// rows (pf.kfac.capture_output; the position embedding's on the add that
// broadcasts it over the batch); pf-kfac-precondition refreshes both with a
// 1-D A (pf.kfac.refresh_inverses) and replaces the table's whole gradient,
// the tied decoder's share included, by diag(A⁻¹)·∇W·B⁻¹; the lowering calls
// the three runtime kernels.
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word-and-position | FileCheck %s --check-prefix=INSERT
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word | FileCheck %s --check-prefix=WORD
// RUN: pf-opt %s --pf-insert-kfac | FileCheck %s --check-prefix=OFF
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word-and-position --pf-build-gradients | FileCheck %s --check-prefix=GRAD
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word-and-position --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0 export-factors=true" | FileCheck %s --check-prefix=PRECOND
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0 graft=none curvature-input=true basis=eigen" | FileCheck %s --check-prefix=EIGEN
// RUN: pf-opt %s --pf-insert-kfac=embeddings=word-and-position --pf-build-gradients --pf-kfac-precondition="damping=1e-3 kl-clip=0 graft=none" --pf-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: not pf-opt %s --pf-insert-kfac=embeddings=all 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not pf-opt %s --pf-insert-kfac=embeddings=word --pf-build-gradients --pf-kfac-precondition=bubbles=true 2>&1 | FileCheck %s --check-prefix=BUBBLES

pf.param @"bert.embeddings.word_embeddings.weight" : tensor<10x4xf32>
pf.param @"bert.embeddings.position_embeddings.weight" : tensor<8x4xf32>
pf.param @"bert.encoder.layer.0.output.dense.weight" : tensor<4x4xf32>
func.func @main(%ids: tensor<2x3xi64> {pf.name = "input_ids"}) -> (tensor<f32> {pf.name = "objective"}) {
  %w = pf.param_ref @"bert.embeddings.word_embeddings.weight" : tensor<10x4xf32>
  %x = pf.gather %w, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %p = pf.param_ref @"bert.embeddings.position_embeddings.weight" : tensor<8x4xf32>
  %pid = pf.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %pe = pf.gather %p, %pid {axis = 0 : i64} : (tensor<8x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32>
  %s = pf.add %x, %pe : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %l = pf.param_ref @"bert.encoder.layer.0.output.dense.weight" : tensor<4x4xf32>
  %h = pf.linear %s, %l {transpose_weight} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %logits = pf.linear %h, %w {transpose_weight} : (tensor<2x3x4xf32>, tensor<10x4xf32>) -> tensor<2x3x10xf32>
  %r = pf.reduce_sum %logits {keepdims = false} : (tensor<2x3x10xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// INSERT-DAG: pf.param @bert.embeddings.word_embeddings.weight.kfac.A : tensor<10xf32> = dense<0.000000e+00> : tensor<10xf32> {pf.kfac_weight = "bert.embeddings.word_embeddings.weight"}
// INSERT-DAG: pf.param @bert.embeddings.word_embeddings.weight.kfac.B : tensor<4x4xf32>
// INSERT-DAG: pf.param @bert.embeddings.word_embeddings.weight.kfac.A_inv : tensor<10xf32>
// INSERT-DAG: pf.param @bert.embeddings.word_embeddings.weight.kfac.B_inv : tensor<4x4xf32>
// INSERT-DAG: pf.param @bert.embeddings.position_embeddings.weight.kfac.A : tensor<8xf32>
// INSERT-LABEL: func.func @main(
// INSERT: pf.kfac.update_embedding_factor @bert.embeddings.word_embeddings.weight.kfac.A from %arg0 step %arg1 {decay = 5.000000e-01 : f64} : tensor<2x3xi64>, tensor<i64>
// INSERT: %[[X:.*]] = pf.gather
// INSERT: %[[XC:.*]] = pf.kfac.capture_output %[[X]] into @bert.embeddings.word_embeddings.weight.kfac.B step %arg1 {decay = 5.000000e-01 : f64, scale = 3.600000e+01 : f64} : tensor<2x3x4xf32>
// INSERT: %[[PID:.*]] = pf.constant
// INSERT: pf.kfac.update_embedding_factor @bert.embeddings.position_embeddings.weight.kfac.A from %[[PID]]
// INSERT: %[[PE:.*]] = pf.gather
// INSERT: %[[S:.*]] = pf.add %[[XC]], %[[PE]]
// INSERT: %[[SC:.*]] = pf.kfac.capture_output %[[S]] into @bert.embeddings.position_embeddings.weight.kfac.B step %arg1 {decay = 5.000000e-01 : f64, scale = 3.600000e+01 : f64} : tensor<2x3x4xf32>
// INSERT: pf.linear %[[SC]]
// WORD-NOT: position_embeddings.weight.kfac
// WORD: pf.kfac.update_embedding_factor @bert.embeddings.word_embeddings.weight.kfac.A
// WORD-NOT: position_embeddings.weight.kfac
// OFF-NOT: embeddings.weight.kfac
// OFF-NOT: update_embedding_factor

// GRAD: pf.kfac.update_embedding_factor @bert.embeddings.word_embeddings.weight.kfac.A
// GRAD: pf.kfac.update_factor @bert.embeddings.position_embeddings.weight.kfac.B from %{{.*}} step %{{.*}} {decay = 5.000000e-01 : f64, scale = 3.600000e+01 : f64} : tensor<2x3x4xf32>, tensor<i64>
// GRAD: pf.kfac.update_factor @bert.embeddings.word_embeddings.weight.kfac.B

// PRECOND-LABEL: func.func @main(
// PRECOND-SAME: {pf.name = "grad/bert.embeddings.word_embeddings.weight"}
// PRECOND-SAME: tensor<10xf32> {pf.name = "kfac/A/bert.embeddings.word_embeddings.weight"}, tensor<4x4xf32> {pf.name = "kfac/B/bert.embeddings.word_embeddings.weight"}, tensor<10xf32> {pf.name = "kfac/A_inv/bert.embeddings.word_embeddings.weight"}
// PRECOND: pf.kfac.refresh_inverses(@bert.embeddings.word_embeddings.weight.kfac.A, @bert.embeddings.word_embeddings.weight.kfac.B) into (@bert.embeddings.word_embeddings.weight.kfac.A_inv, @bert.embeddings.word_embeddings.weight.kfac.B_inv) step %{{.*}} {warmup = 50 : i64}
// PRECOND: %[[U:.*]] = pf.kfac.precondition_embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<10x4xf32>, tensor<10xf32>, tensor<4x4xf32>) -> tensor<10x4xf32>
// PRECOND: pf.kfac.graft updates(%[[U]] : tensor<10x4xf32>)
// PRECOND: pf.kfac.precondition_embedding %{{.*}} : (tensor<8x4xf32>, tensor<8xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>

// The eigenbasis keeps the embedding's inverses (a diagonal A is its own
// eigenbasis); the factor updates take kfac_curvature.
// EIGEN-DAG: pf.param @bert.encoder.layer.0.output.dense.weight.kfac.A_vectors
// EIGEN-DAG: pf.param @bert.embeddings.word_embeddings.weight.kfac.A_inv : tensor<10xf32>
// EIGEN: pf.kfac.update_embedding_factor @bert.embeddings.word_embeddings.weight.kfac.A from %{{.*}} step %{{.*}} due(%{{.*}} : tensor<i64>)
// EIGEN: pf.kfac.refresh_inverses(@bert.embeddings.word_embeddings.weight.kfac.A, @bert.embeddings.word_embeddings.weight.kfac.B) into (@bert.embeddings.word_embeddings.weight.kfac.A_inv, @bert.embeddings.word_embeddings.weight.kfac.B_inv) step
// EIGEN: pf.kfac.precondition_embedding

// LOWER-DAG: call @pfrt_kfac_embedding_factor(
// LOWER-DAG: call @pfrt_kfac_embedding_inverses(
// LOWER-DAG: call @pfrt_kfac_precondition_embedding(
// LOWER-DAG: call @pfrt_kfac_damped_inverses(

// BAD: for the --embeddings option: embeddings must be none, word or word-and-position, got 'all'
// BUBBLES: pf-kfac-precondition: embedding factors (pf-insert-kfac embeddings=...) are single-process K-FAC for now: not on a split module nor with bubbles=true (--kfac-window)
