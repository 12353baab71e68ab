//===- PFKFACOps.td - K-FAC work ---------------------------*- tablegen -*-===//
#ifndef PF_KFAC_OPS_TD
#define PF_KFAC_OPS_TD

include "pf/Dialect/PF/IR/PFBase.td"

def PF_KFACFactorAOp : PF_TensorOp<"kfac.factor_a"> {
  let summary = "Kronecker factor A = xᵀx / n of a layer's input";
  let description = [{
    x is flattened to [n, in] (all leading dims are tokens). With `bias_column`
    a column of ones is appended, so A is (in+1)×(in+1).
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$input, UnitAttr:$bias_column);
  let results = (outs TensorOf<[AnyFloat]>:$factor);
}

def PF_KFACFactorBOp : PF_TensorOp<"kfac.factor_b"> {
  let summary = "Kronecker factor B = gᵀg / n · scale of a layer's output gradient";
  let description = [{
    g is flattened to [n, out]. `scale` undoes the 1/n of a mean loss (n²
    when g is the gradient of the mean over n rows), as the K-FAC literature does.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$output_grad,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs TensorOf<[AnyFloat]>:$factor);
}

def PF_KFACPiOp : PF_TensorOp<"kfac.pi"> {
  let summary = "π = sqrt((tr A / dim A) / (tr B / dim B)) for π-damping";
  let arguments = (ins TensorOf<[AnyFloat]>:$factor_a, TensorOf<[AnyFloat]>:$factor_b);
  let results = (outs 0DTensorOf<[AnyFloat]>:$pi);
}

def PF_KFACInverseOp : PF_TensorOp<"kfac.inverse"> {
  let summary = "damped inverse of a Kronecker factor (Cholesky)";
  let description = [{
    (F + √λ·π·I)⁻¹ for factor A and (F + √λ/π·I)⁻¹ for factor B, λ = `damping`.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$factor, 0DTensorOf<[AnyFloat]>:$pi,
                   DefaultValuedAttr<F64Attr, "1.0e-3">:$damping,
                   StrAttr:$side);
  let results = (outs TensorOf<[AnyFloat]>:$inverse);
  let hasVerifier = 1;
}

def PF_KFACPreconditionOp : PF_TensorOp<"kfac.precondition"> {
  let summary = "ΔW = B⁻¹ · ∇W · A⁻¹ (and B⁻¹ · ∇b)";
  let description = [{
    ∇W is [out, in]. When A⁻¹ is (in+1)×(in+1) the bias gradient is required
    and is preconditioned jointly with W as the extra column.
  }];
  let arguments = (ins TensorOf<[AnyFloat]>:$weight_grad, TensorOf<[AnyFloat]>:$a_inverse,
                   TensorOf<[AnyFloat]>:$b_inverse, Optional<TensorOf<[AnyFloat]>>:$bias_grad);
  let results = (outs TensorOf<[AnyFloat]>:$weight_update,
                 Optional<TensorOf<[AnyFloat]>>:$bias_update);
}

#endif // PF_KFAC_OPS_TD
