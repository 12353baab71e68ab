//===- PFGradients.cpp - reverse-mode gradient rules of the pf ops ---------===//
//
// GradientOpInterface implementations. Every rule is expressed with pf tensor
// ops (no backward kernels), so a backward graph runs on any backend that runs
// the forward ops. Broadcasting is undone by `reduceTo` (reduce_sum with
// keepdims over the broadcast axes, then a reshape to the operand's static
// shape). Shapes must be static.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Dialect/PF/IR/PFShapeUtils.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::pf;

namespace {

RankedTensorType staticType(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() ? type : RankedTensorType();
}

/// Fails with a diagnostic unless every operand and result is static.
LogicalResult requireStatic(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  values.append(op->result_begin(), op->result_end());
  for (Value v : values)
    if (!staticType(v))
      return op->emitError("gradient: '")
             << op->getName() << "' needs static shapes, got " << v.getType()
             << " (run pf-infer-shapes with fixed dimensions first)";
  return success();
}

bool isFloat(Value v) {
  return isa<FloatType>(cast<ShapedType>(v.getType()).getElementType());
}

/// Small helpers that build pf ops at the builder's insertion point.
struct G {
  OpBuilder &b;
  Location loc;

  Value i64s(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return ConstantOp::create(b, loc, DenseIntElementsAttr::get(type, values));
  }
  /// A rank-0 constant of `element` type.
  Value scalar(double value, Type element) {
    auto type = RankedTensorType::get({}, element);
    return ConstantOp::create(b, loc,
                              DenseElementsAttr::get(type, FloatAttr::get(element, value)));
  }
  Value splat(double value, RankedTensorType type) {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), value)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value mulC(Value x, double c) { return mul(x, scalar(c, elem(x))); }
  Value addC(Value x, double c) { return add(x, scalar(c, elem(x))); }
  Type elem(Value x) { return cast<ShapedType>(x.getType()).getElementType(); }
  ArrayRef<int64_t> shape(Value x) { return cast<RankedTensorType>(x.getType()).getShape(); }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (this->shape(x) == shape)
      return x;
    auto type = RankedTensorType::get(shape, elem(x));
    return ReshapeOp::create(b, loc, type, x, i64s(shape), false);
  }
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    auto inShape = shape(x);
    SmallVector<int64_t> out;
    for (int64_t i = 0; i < int64_t(inShape.size()); ++i) {
      if (llvm::is_contained(axes, i)) {
        if (keepdims)
          out.push_back(1);
      } else {
        out.push_back(inShape[i]);
      }
    }
    auto type = RankedTensorType::get(out, elem(x));
    return ReduceSumOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(axes), keepdims, false);
  }
  Value reduceMeanKeep(Value x, ArrayRef<int64_t> axes) {
    SmallVector<int64_t> out(shape(x));
    for (int64_t a : axes)
      out[a] = 1;
    auto type = RankedTensorType::get(out, elem(x));
    return ReduceMeanOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(axes), true, false);
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> out;
    for (int64_t p : perm)
      out.push_back(shape(x)[p]);
    return TransposeOp::create(b, loc, RankedTensorType::get(out, elem(x)), x,
                               b.getDenseI64ArrayAttr(perm));
  }
  /// Swaps the last two dimensions.
  Value transposeLast2(Value x) {
    int64_t rank = shape(x).size();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(x, perm);
  }
  /// Sums a broadcast gradient `g` back onto `target`'s static shape.
  Value reduceTo(Value g, RankedTensorType target) {
    auto gShape = shape(g);
    ArrayRef<int64_t> tShape = target.getShape();
    int64_t lead = int64_t(gShape.size()) - int64_t(tShape.size());
    assert(lead >= 0 && "gradient of lower rank than its operand");
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < int64_t(gShape.size()); ++i)
      if (i < lead || (tShape[i - lead] == 1 && gShape[i] != 1))
        axes.push_back(i);
    if (!axes.empty())
      g = reduceSum(g, axes, /*keepdims=*/true);
    return reshape(g, tShape);
  }
  Value matmul(Value x, Value y) { return MatMulOp::create(b, loc, x, y); }
};

/// The single result gradient of a one-result op.
Value onlyGrad(ArrayRef<Value> resultGrads) { return resultGrads.front(); }

} // namespace

//===--- Elementwise -----------------------------------------------------------===//

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value dy = onlyGrad(grads);
  out.push_back(g.reduceTo(dy, staticType(getLhs())));
  out.push_back(g.reduceTo(dy, staticType(getRhs())));
  return success();
}

LogicalResult SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value dy = onlyGrad(grads);
  out.push_back(wanted[0] ? g.reduceTo(dy, staticType(getLhs())) : Value());
  out.push_back(wanted[1] ? g.reduceTo(g.neg(dy), staticType(getRhs())) : Value());
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value dy = onlyGrad(grads);
  out.push_back(wanted[0] ? g.reduceTo(g.mul(dy, getRhs()), staticType(getLhs())) : Value());
  out.push_back(wanted[1] ? g.reduceTo(g.mul(dy, getLhs()), staticType(getRhs())) : Value());
  return success();
}

LogicalResult DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value t = g.div(onlyGrad(grads), getRhs()); // dy / r
  out.push_back(wanted[0] ? g.reduceTo(t, staticType(getLhs())) : Value());
  // d(l/r)/dr = -(l/r)/r
  out.push_back(wanted[1] ? g.reduceTo(g.neg(g.mul(t, getOutput())), staticType(getRhs()))
                          : Value());
  return success();
}

LogicalResult PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  if (wanted[1])
    return emitError("gradient: 'pf.pow' is differentiable only in its base; the "
                     "exponent must not depend on what gradients are taken for");
  G g{b, getLoc()};
  Value x = getLhs(), p = getRhs();
  Value dx;
  if (wanted[0]) {
    if (g.elem(p) != g.elem(x))
      p = CastOp::create(b, getLoc(), p, g.elem(x));
    // dy * p * x^(p-1)
    Value pm1 = g.sub(p, g.scalar(1.0, g.elem(x)));
    Value xp = PowOp::create(b, getLoc(), x, pm1);
    dx = g.reduceTo(g.mul(onlyGrad(grads), g.mul(p, xp)), staticType(x));
  }
  out.push_back(dx);
  out.push_back(Value());
  return success();
}

LogicalResult EqualOp::buildGradient(OpBuilder &, ArrayRef<Value>, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  out.append(2, Value()); // a boolean result: not differentiable
  return success();
}

// Comparisons and bool logic: boolean results are not differentiable.
#define PF_NO_GRADIENT(OP, OPERANDS)                                           \
  LogicalResult OP::buildGradient(OpBuilder &, ArrayRef<Value>, ArrayRef<bool>, \
                                  SmallVectorImpl<Value> &out) {               \
    out.append(OPERANDS, Value());                                             \
    return success();                                                          \
  }
PF_NO_GRADIENT(GreaterOp, 2)
PF_NO_GRADIENT(GreaterEqualOp, 2)
PF_NO_GRADIENT(LessOp, 2)
PF_NO_GRADIENT(LessEqualOp, 2)
PF_NO_GRADIENT(AndOp, 2)
PF_NO_GRADIENT(OrOp, 2)
PF_NO_GRADIENT(XorOp, 2)
PF_NO_GRADIENT(NotOp, 1)
// Sign is piecewise constant: its derivative is zero wherever it exists.
PF_NO_GRADIENT(SignOp, 1)
#undef PF_NO_GRADIENT

/// Min/Max route dy to the operand the result was taken from; `lhsWins` is
/// where that is lhs (ties go to lhs, so dy is counted once, as a
/// subgradient), broadcast to the result's shape.
static LogicalResult selectGradient(Operation *op, Value lhs, Value rhs, Value lhsWins,
                                    OpBuilder &b, ArrayRef<Value> grads,
                                    ArrayRef<bool> wanted, SmallVectorImpl<Value> &out) {
  G g{b, op->getLoc()};
  Value dy = onlyGrad(grads);
  if (!isFloat(dy)) {
    out.append(2, Value()); // integer min/max: nothing to differentiate
    return success();
  }
  Value zero = g.scalar(0.0, g.elem(dy));
  out.push_back(wanted[0] ? g.reduceTo(WhereOp::create(b, op->getLoc(), lhsWins, dy, zero),
                                       staticType(lhs))
                          : Value());
  out.push_back(wanted[1] ? g.reduceTo(WhereOp::create(b, op->getLoc(), lhsWins, zero, dy),
                                       staticType(rhs))
                          : Value());
  return success();
}

LogicalResult MinOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  Value lhsWins = LessEqualOp::create(b, getLoc(), getLhs(), getRhs());
  return selectGradient(*this, getLhs(), getRhs(), lhsWins, b, grads, wanted, out);
}

LogicalResult MaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                   SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  Value lhsWins = GreaterEqualOp::create(b, getLoc(), getLhs(), getRhs());
  return selectGradient(*this, getLhs(), getRhs(), lhsWins, b, grads, wanted, out);
}

LogicalResult AbsOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &out) {
  // dy * sign(x) (0 at x = 0, as in PyTorch)
  G g{b, getLoc()};
  out.push_back(g.mul(onlyGrad(grads), SignOp::create(b, getLoc(), getInput())));
  return success();
}

LogicalResult ReciprocalOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                          SmallVectorImpl<Value> &out) {
  // d(1/x)/dx = -1/x^2 = -y^2
  G g{b, getLoc()};
  Value y = getOutput();
  out.push_back(g.neg(g.mul(onlyGrad(grads), g.mul(y, y))));
  return success();
}

LogicalResult NegOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &out) {
  out.push_back(G{b, getLoc()}.neg(onlyGrad(grads)));
  return success();
}

LogicalResult SqrtOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  G g{b, getLoc()};
  out.push_back(g.div(g.mulC(onlyGrad(grads), 0.5), getOutput()));
  return success();
}

LogicalResult ExpOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &out) {
  out.push_back(G{b, getLoc()}.mul(onlyGrad(grads), getOutput()));
  return success();
}

LogicalResult TanhOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  G g{b, getLoc()};
  Value y = getOutput();
  // dy * (1 - y^2)
  Value d = g.sub(g.scalar(1.0, g.elem(y)), g.mul(y, y));
  out.push_back(g.mul(onlyGrad(grads), d));
  return success();
}

LogicalResult ErfOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &out) {
  G g{b, getLoc()};
  Value x = getInput();
  // dy * 2/sqrt(pi) * exp(-x^2)
  Value e = ExpOp::create(b, getLoc(), g.neg(g.mul(x, x)));
  out.push_back(g.mul(onlyGrad(grads), g.mulC(e, 2.0 / std::sqrt(M_PI))));
  return success();
}

LogicalResult WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value dy = onlyGrad(grads);
  Value zero = g.scalar(0.0, g.elem(dy));
  out.push_back(Value()); // the condition
  out.push_back(wanted[1] ? g.reduceTo(WhereOp::create(b, getLoc(), getCondition(), dy, zero),
                                       staticType(getX()))
                          : Value());
  out.push_back(wanted[2] ? g.reduceTo(WhereOp::create(b, getLoc(), getCondition(), zero, dy),
                                       staticType(getY()))
                          : Value());
  return success();
}

LogicalResult CastOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput()) || !isFloat(getOutput())) {
    out.push_back(Value()); // integer values carry no gradient
    return success();
  }
  Value dy = onlyGrad(grads);
  Type element = cast<ShapedType>(getInput().getType()).getElementType();
  out.push_back(element == G{b, getLoc()}.elem(dy) ? dy
                                                   : Value(CastOp::create(b, getLoc(), dy, element)));
  return success();
}

//===--- Views and data movement ---------------------------------------------===//

/// Gradient of an op that only changes the shape: reshape back.
static LogicalResult reshapeBack(Operation *op, OpBuilder &b, ArrayRef<Value> grads,
                                 SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(op)))
    return failure();
  G g{b, op->getLoc()};
  out.push_back(g.reshape(grads.front(), g.shape(op->getOperand(0))));
  out.append(op->getNumOperands() - 1, Value());
  return success();
}

LogicalResult IdentityOp::buildGradient(OpBuilder &, ArrayRef<Value> grads, ArrayRef<bool>,
                                        SmallVectorImpl<Value> &out) {
  out.push_back(grads.front());
  return success();
}
LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                       SmallVectorImpl<Value> &out) {
  return reshapeBack(*this, b, grads, out);
}
LogicalResult UnsqueezeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &out) {
  return reshapeBack(*this, b, grads, out);
}
LogicalResult SqueezeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                       SmallVectorImpl<Value> &out) {
  return reshapeBack(*this, b, grads, out);
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  int64_t rank = g.shape(getInput()).size();
  SmallVector<int64_t> perm;
  if (auto given = getPerm())
    perm.assign(given->begin(), given->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  out.push_back(g.transpose(grads.front(), inverse));
  return success();
}

LogicalResult ExpandOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                      SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  out.push_back(G{b, getLoc()}.reduceTo(grads.front(), staticType(getInput())));
  out.push_back(Value());
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value dy = grads.front();
  int64_t rank = g.shape(dy).size();
  int64_t axis = *normalizeAxis(getAxis(), rank);
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = g.shape(input)[axis];
    if (wanted[i]) {
      out.push_back(SliceOp::create(b, getLoc(), input.getType(), dy, g.i64s({offset}),
                                    g.i64s({offset + size}), g.i64s({axis}), Value()));
    } else {
      out.push_back(Value());
    }
    offset += size;
  }
  return success();
}

LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  auto starts = getConstantInts(getStarts()), ends = getConstantInts(getEnds());
  std::optional<SmallVector<int64_t>> axes, steps;
  if (getAxes())
    axes = getConstantInts(getAxes());
  if (getSteps())
    steps = getConstantInts(getSteps());
  if (!starts || !ends || (getAxes() && !axes) || (getSteps() && !steps))
    return emitError("gradient: 'pf.slice' needs constant bounds");
  auto inShape = g.shape(getData());
  auto params = normalizeSliceParams(getLoc(), inShape.size(), *starts, *ends,
                                     axes ? std::optional<ArrayRef<int64_t>>(*axes) : std::nullopt,
                                     steps ? std::optional<ArrayRef<int64_t>>(*steps) : std::nullopt);
  if (failed(params))
    return failure();
  // Pad the gradient with zeros, one sliced axis at a time (unit steps only).
  Value dx = grads.front();
  for (size_t i = 0; i < params->axes.size(); ++i) {
    if (params->steps[i] != 1)
      return emitError("gradient: 'pf.slice' with a step other than 1 is not supported");
    int64_t axis = params->axes[i];
    auto [first, count] = sliceRange(inShape[axis], params->starts[i], params->ends[i], 1);
    int64_t after = inShape[axis] - first - count;
    SmallVector<Value> parts;
    auto zeros = [&](int64_t n) {
      SmallVector<int64_t> shape(g.shape(dx));
      shape[axis] = n;
      return g.splat(0.0, RankedTensorType::get(shape, g.elem(dx)));
    };
    if (first > 0)
      parts.push_back(zeros(first));
    parts.push_back(dx);
    if (after > 0)
      parts.push_back(zeros(after));
    if (parts.size() > 1)
      dx = ConcatOp::create(b, getLoc(), parts, uint64_t(axis));
  }
  out.push_back(dx);
  out.append(getNumOperands() - 1, Value());
  return success();
}

/// Largest one-hot matrix (elements) the gather gradient builds.

LogicalResult GatherOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &out) {
  out.append(2, Value());
  if (!wanted[0])
    return success();
  if (failed(requireStatic(*this)))
    return failure();
  // A scatter-add of the output gradient into the data's shape (runtime
  // kernel pfrt_gather_backward; repeated indices sum).
  auto dataShape = cast<RankedTensorType>(getData().getType()).getShape();
  auto axis = normalizeAxis(getAxis(), dataShape.size());
  if (!axis)
    return emitError("gradient: gather axis out of range");
  out[0] = GatherGradOp::create(b, getLoc(), getData().getType(), getIndices(), grads.front(),
                                b.getI64IntegerAttr(*axis));
  return success();
}

//===--- Reductions, linear algebra, normalization ---------------------------===//

/// The axes a reduction reduces: the given ones, or with none given every
/// axis (none with noop_with_empty_axes).
template <typename ReduceOpT>
static SmallVector<int64_t> reducedAxes(ReduceOpT op, int64_t rank) {
  SmallVector<int64_t> axes;
  if (auto given = op.getAxes(); given && !given->empty()) {
    for (int64_t a : *given)
      axes.push_back(*normalizeAxis(a, rank));
  } else if (!op.getNoopWithEmptyAxes()) {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  return axes;
}

template <typename ReduceOpT>
static LogicalResult reduceGradient(ReduceOpT op, OpBuilder &b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value> &out, bool mean) {
  if (failed(requireStatic(op)))
    return failure();
  G g{b, op.getLoc()};
  auto inType = staticType(op.getInput());
  int64_t rank = inType.getRank();
  SmallVector<int64_t> axes = reducedAxes(op, rank);
  SmallVector<int64_t> keep(inType.getShape());
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= keep[a];
    keep[a] = 1;
  }
  Value dy = g.reshape(grads.front(), keep);
  if (mean)
    dy = g.mulC(dy, 1.0 / double(count));
  if (g.shape(dy) != inType.getShape())
    dy = ExpandOp::create(b, op.getLoc(), inType, dy, g.i64s(inType.getShape()));
  out.push_back(dy);
  return success();
}

LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &out) {
  return reduceGradient(*this, b, grads, out, /*mean=*/false);
}
LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                          SmallVectorImpl<Value> &out) {
  return reduceGradient(*this, b, grads, out, /*mean=*/true);
}

LogicalResult MatMulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value a = getLhs(), bb = getRhs(), dy = grads.front();
  auto aType = staticType(a), bType = staticType(bb);
  // Promote 1-D operands as numpy does and give dy the promoted dims back.
  SmallVector<int64_t> aShape(aType.getShape()), bShape(bType.getShape());
  SmallVector<int64_t> dyShape(g.shape(dy));
  if (aShape.size() == 1) {
    aShape.insert(aShape.begin(), 1);
    dyShape.insert(dyShape.end() - (bShape.size() == 1 ? 0 : 1), 1);
  }
  if (bShape.size() == 1) {
    bShape.push_back(1);
    dyShape.push_back(1);
  }
  Value a2 = g.reshape(a, aShape), b2 = g.reshape(bb, bShape), dy2 = g.reshape(dy, dyShape);
  Value da, db;
  if (wanted[0]) {
    Value full = g.matmul(dy2, g.transposeLast2(b2)); // [..., M, K]
    da = g.reshape(g.reduceTo(full, RankedTensorType::get(aShape, aType.getElementType())),
                   aType.getShape());
  }
  if (wanted[1]) {
    Value full = g.matmul(g.transposeLast2(a2), dy2); // [..., K, N]
    db = g.reshape(g.reduceTo(full, RankedTensorType::get(bShape, bType.getElementType())),
                   bType.getShape());
  }
  out.push_back(da);
  out.push_back(db);
  return success();
}

LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  Value x = getInput(), w = getWeight(), dy = grads.front();
  bool transposed = getTransposeWeight();
  auto wShape = g.shape(w);
  int64_t in = transposed ? wShape[1] : wShape[0];
  int64_t outF = transposed ? wShape[0] : wShape[1];
  int64_t tokens = staticType(x).getNumElements() / in;
  Value dx, dw, db;
  if (wanted[0]) // dy · Wᵀ ([in,out] weight) or dy · W ([out,in] weight)
    dx = LinearOp::create(b, getLoc(), x.getType(), dy, w, Value(), !transposed);
  if (wanted[1]) {
    Value x2 = g.reshape(x, {tokens, in}), dy2 = g.reshape(dy, {tokens, outF});
    Value lhs = transposed ? dy2 : x2, rhs = transposed ? x2 : dy2;
    dw = GemmOp::create(b, getLoc(), w.getType(), lhs, rhs, Value(), APFloat(1.0f),
                        APFloat(0.0f), /*transA=*/true, false);
  }
  if (getBias() && wanted.size() > 2 && wanted[2]) {
    SmallVector<int64_t> axes(g.shape(dy).size() - 1);
    std::iota(axes.begin(), axes.end(), 0);
    db = axes.empty() ? dy : g.reduceSum(dy, axes, /*keepdims=*/false);
  }
  out.push_back(dx);
  out.push_back(dw);
  if (getBias())
    out.push_back(db);
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool> wanted,
                                         SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  Value x = getInput(), dy = grads.front();
  auto xType = staticType(x);
  int64_t axis = *normalizeAxis(getAxis(), xType.getRank());
  auto scaleType = dyn_cast<RankedTensorType>(getScale().getType());
  if (!scaleType || scaleType.getShape() != xType.getShape().drop_front(axis))
    return emitError("gradient: the scale must have the normalized dimensions' shape ")
           << xType.getShape().drop_front(axis) << ", got " << getScale().getType();
  // One fused kernel recomputes the statistics and yields all three.
  auto grad = LayerNormGradOp::create(b, getLoc(), x.getType(), getScale().getType(),
                                      getScale().getType(), x, getScale(), dy,
                                      b.getI64IntegerAttr(axis), getEpsilonAttr());
  out.push_back(wanted[0] ? grad.getGradInput() : Value());
  out.push_back(wanted[1] ? grad.getGradScale() : Value());
  if (getBias())
    out.push_back(wanted[2] ? grad.getGradBias() : Value());
  return success();
}

LogicalResult GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  out.push_back(GeluGradOp::create(b, getLoc(), getInput().getType(), getInput(), grads.front(),
                                   getApproximateAttr()));
  return success();
}

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                       SmallVectorImpl<Value> &out) {
  if (failed(requireStatic(*this)))
    return failure();
  Value y = getOutput();
  int64_t axis = *normalizeAxis(getAxis(), staticType(y).getRank());
  out.push_back(SoftmaxGradOp::create(b, getLoc(), y.getType(), y, grads.front(),
                                      b.getI64IntegerAttr(axis)));
  return success();
}

//===--- IsNaN/IsInf, GatherND/ScatterND, CumSum, Trilu, ReduceMax/Min --------===//

// NaN/infinity tests give masks: no gradient flows through a bool.
LogicalResult IsNaNOp::buildGradient(OpBuilder &, ArrayRef<Value>, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(Value());
  return success();
}
LogicalResult IsInfOp::buildGradient(OpBuilder &, ArrayRef<Value>, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(Value());
  return success();
}

/// GatherND with batch_dims b picks what GatherND with none picks once each
/// index tuple starts with its batch coordinates: those form a constant (the
/// shapes are static), concatenated in front of the tuples.
static Value prefixBatchCoords(OpBuilder &b, Location loc, Value indices, int64_t batchDims) {
  auto type = staticType(indices);
  ArrayRef<int64_t> lead = type.getShape().drop_back();
  auto element = cast<IntegerType>(type.getElementType());
  SmallVector<int64_t> coordShape(lead);
  coordShape.push_back(batchDims);
  SmallVector<APInt> coords;
  SmallVector<int64_t> index(lead.size(), 0);
  for (int64_t flat = 0, n = ShapedType::getNumElements(lead); flat < n; ++flat) {
    for (int64_t d = lead.size() - 1, rest = flat; d >= 0; --d) {
      index[d] = rest % lead[d];
      rest /= lead[d];
    }
    for (int64_t d = 0; d < batchDims; ++d)
      coords.push_back(APInt(element.getWidth(), index[d], /*isSigned=*/true));
  }
  auto coordType = RankedTensorType::get(coordShape, element);
  Value prefix = ConstantOp::create(b, loc, DenseElementsAttr::get(coordType, coords));
  return ConcatOp::create(b, loc, ValueRange{prefix, indices}, uint64_t(lead.size()));
}

/// GatherND's data gradient is a scatter-add of dy into zeros (repeated
/// index tuples sum).
LogicalResult GatherNDOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                        ArrayRef<bool> wanted, SmallVectorImpl<Value> &out) {
  out.append(2, Value());
  if (!wanted[0] || !isFloat(getData()))
    return success();
  if (failed(requireStatic(*this)))
    return failure();
  G g{b, getLoc()};
  auto type = staticType(getData());
  Value indices = getIndices();
  if (getBatchDims() != 0)
    indices = prefixBatchCoords(b, getLoc(), indices, getBatchDims());
  out[0] = ScatterNDOp::create(b, getLoc(), type, g.splat(0.0, type), indices, grads.front(),
                               ScatterReduction::Add);
  return success();
}

/// ScatterND without reduction: the overwritten elements take no data
/// gradient and the updates get dy there; with add, data passes dy through.
LogicalResult ScatterNDOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads,
                                         ArrayRef<bool> wanted, SmallVectorImpl<Value> &out) {
  out.append(3, Value());
  if (!isFloat(getData()))
    return success();
  if (failed(requireStatic(*this)))
    return failure();
  ScatterReduction kind = getReduction();
  if (kind != ScatterReduction::None && kind != ScatterReduction::Add)
    return emitError("gradient: 'pf.scatter_nd' with reduction '")
           << stringifyScatterReduction(kind) << "' is not supported (only none and add)";
  G g{b, getLoc()};
  Value dy = grads.front();
  if (wanted[0])
    out[0] = kind == ScatterReduction::Add
                 ? dy
                 : ScatterNDOp::create(b, getLoc(), dy.getType(), dy, getIndices(),
                                       g.splat(0.0, staticType(getUpdates())),
                                       ScatterReduction::None);
  if (wanted[2])
    out[2] = GatherNDOp::create(b, getLoc(), getUpdates().getType(), dy, getIndices(), 0);
  return success();
}

/// The gradient of a cumulative sum is the cumulative sum of dy the other
/// way (same exclusiveness).
LogicalResult CumSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                      SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(CumSumOp::create(b, getLoc(), getType(), grads.front(), getAxis(),
                                 getExclusive(), !getReverse()));
  return success();
}

/// Trilu is a fixed mask: dy keeps the same triangle.
LogicalResult TriluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(TriluOp::create(b, getLoc(), getType(), grads.front(), getK(), getUpper()));
  return success();
}

/// ReduceMax/Min route dy to the elements equal to the result, split evenly
/// among ties (as torch.amax/amin do).
template <typename ReduceOpT>
static LogicalResult extremeGradient(ReduceOpT op, OpBuilder &b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value> &out) {
  if (!isFloat(op.getInput())) {
    out.push_back(Value());
    return success();
  }
  if (failed(requireStatic(op)))
    return failure();
  G g{b, op.getLoc()};
  auto inType = staticType(op.getInput());
  int64_t rank = inType.getRank();
  SmallVector<int64_t> axes = reducedAxes(op, rank);
  if (axes.empty()) { // noop_with_empty_axes: the op is the identity
    out.push_back(g.reshape(grads.front(), inType.getShape()));
    return success();
  }
  SmallVector<int64_t> keep(inType.getShape());
  for (int64_t a : axes)
    keep[a] = 1;
  Value y = g.reshape(op.getOutput(), keep), dy = g.reshape(grads.front(), keep);
  Value hit = EqualOp::create(b, op.getLoc(), op.getInput(), y);
  Value ties = g.reduceSum(CastOp::create(b, op.getLoc(), hit, g.elem(dy)), axes, true);
  Value share = g.div(dy, ties);
  out.push_back(WhereOp::create(b, op.getLoc(), hit, share, g.scalar(0.0, g.elem(dy))));
  return success();
}

LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &out) {
  return extremeGradient(*this, b, grads, out);
}
LogicalResult ReduceMinOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &out) {
  return extremeGradient(*this, b, grads, out);
}
