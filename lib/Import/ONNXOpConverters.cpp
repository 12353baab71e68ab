//===- ONNXOpConverters.cpp - one converter per ONNX op type ---------------===//
//
// Converters normalize opset differences (axes as attributes or inputs, Slice
// before/after opset 10, Softmax before/after 13) into the pf op semantics.
//
//===----------------------------------------------------------------------===//
#include "ImportContext.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::onnx_import;

//===--- NodeContext -----------------------------------------------------------===//

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::intAttr(StringRef name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}

float NodeContext::floatAttr(StringRef name, float fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeContext::stringAttr(StringRef name, StringRef fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback.str();
}

std::optional<SmallVector<int64_t>> NodeContext::intsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string onnx_import::displayName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  for (const auto &output : node.output())
    if (!output.empty())
      return output;
  return node.op_type();
}

InFlightDiagnostic NodeContext::error() const {
  return emitError(loc) << "node '" << displayName(node) << "' (" << node.op_type() << ", opset "
                        << opset << "): ";
}

FailureOr<SmallVector<Value>> NodeContext::finish(Operation *op) {
  if (isa<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(inferResultTypes(op, types))) {
      op->erase();
      return error() << "the operands do not fit the op (see above)";
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  // The op's own constraints (operand element types, attribute ranges) are
  // checked by its verifier, which nothing else runs during the import: a
  // Where with a float condition would otherwise become invalid IR.
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    op->erase();
    return error() << "the operands do not fit the op (see above)";
  }
  SmallVector<Value> results;
  if (succeeded(builder.tryFold(op, results)) && !results.empty()) {
    op->erase();
    return results;
  }
  return SmallVector<Value>(op->getResults());
}

FailureOr<std::optional<SmallVector<int64_t>>> NodeContext::constantInts(size_t i,
                                                                         StringRef what) {
  Value v = input(i);
  if (!v)
    return std::optional<SmallVector<int64_t>>();
  auto values = getConstantInts(v);
  if (!values)
    return error() << what << " (input " << i
                   << ") must be a constant after shape folding; fix the input shapes";
  return std::optional<SmallVector<int64_t>>(*values);
}

Value NodeContext::i64Constant(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({int64_t(values.size())}, builder.getI64Type());
  return ConstantOp::create(builder, loc, DenseIntElementsAttr::get(type, values));
}

//===--- Converters --------------------------------------------------------===//

namespace {
using Results = FailureOr<SmallVector<Value>>;

LogicalResult requireInputs(NodeContext &n, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!n.input(i))
      return n.error() << "expects at least " << count << " inputs, got "
                       << n.node.input_size();
  return success();
}

template <typename OpTy>
Results binary(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  return n.finish(OpTy::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1)));
}

template <typename OpTy>
Results unary(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  return n.finish(OpTy::create(n.builder, n.loc, n.placeholder(), n.input(0)));
}

/// Axes from an attribute (older opsets) or from a constant input (newer).
FailureOr<std::optional<SmallVector<int64_t>>> axesOf(NodeContext &n, int64_t inputSince,
                                                      size_t inputIndex) {
  // Reading the other form would silently drop the axes (and, for reductions
  // and Squeeze, act on every axis): reject models that mix the two up.
  if (n.opset >= inputSince) {
    if (n.attr("axes"))
      return n.error() << "axes is an input from opset " << inputSince
                       << " on, not an attribute";
    return n.constantInts(inputIndex, "axes");
  }
  if (n.input(inputIndex))
    return n.error() << "axes is an attribute before opset " << inputSince
                     << ", not an input";
  return n.intsAttr("axes");
}

/// Variadic Min/Max (opset 8+: one or more inputs, broadcasting): a chain of
/// binary ops, left to right; a single input is returned as it is.
template <typename OpTy>
Results variadic(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Value acc = n.input(0);
  for (int i = 1, e = n.node.input_size(); i < e; ++i) {
    if (!n.input(i))
      return n.error() << "input " << i << " is missing";
    auto results = n.finish(OpTy::create(n.builder, n.loc, n.placeholder(), acc, n.input(i)));
    if (failed(results))
      return failure();
    acc = results->front();
  }
  return SmallVector<Value>{acc};
}

Results convertIdentity(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto op = IdentityOp::create(n.builder, n.loc, n.input(0).getType(), n.input(0));
  // The output name survives so pf-untie-initializers can recreate the
  // parameter an exporter de-duplicated.
  if (n.node.output_size() > 0)
    op->setAttr(kNameAttrName, n.builder.getStringAttr(n.node.output(0)));
  return SmallVector<Value>{op.getResult()};
}

/// The value of a constant float scalar (or one-element tensor).
std::optional<double> constantFloat(Value v) {
  DenseFPElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  return (*attr.value_begin<APFloat>()).convertToDouble();
}

Results convertDropout(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  // Inference Dropout is the identity with an all-true mask. From opset 12 on
  // a training_mode input can ask for the random training behaviour, which
  // pf does not implement: the model must not be run as the identity then.
  if (n.opset >= 12 && n.input(2)) {
    auto mode = getConstantInts(n.input(2));
    if (!mode || mode->size() != 1)
      return n.error() << "training_mode (input 2) must be a constant scalar";
    if ((*mode)[0] != 0) {
      std::optional<double> ratio = n.input(1) ? constantFloat(n.input(1)) : 0.5;
      if (!ratio)
        return n.error() << "ratio (input 1) must be a constant scalar in training mode";
      if (*ratio != 0)
        return n.error() << "training-mode Dropout (ratio " << llvm::formatv("{0}", *ratio)
                         << ") is random and not supported; only inference (training_mode "
                            "false) or ratio 0";
    }
  }
  SmallVector<Value> results{n.input(0)};
  if (n.node.output_size() > 1 && !n.node.output(1).empty()) {
    auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
    if (!type || !type.hasStaticShape())
      return n.error() << "the mask output of Dropout needs an input of static shape";
    auto maskType = RankedTensorType::get(type.getShape(), n.builder.getI1Type());
    results.push_back(
        ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(maskType, true)));
  }
  return results;
}

Results convertConstant(NodeContext &n) {
  MLIRContext *ctx = n.builder.getContext();
  ElementsAttr value;
  if (const auto *a = n.attr("value")) {
    auto converted = convertTensor(ctx, a->t(), "", n.loc, /*asResource=*/false);
    if (failed(converted))
      return failure();
    value = *converted;
  } else if (const auto *a = n.attr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, n.builder.getF32Type()), a->f());
  } else if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(v.size())}, n.builder.getF32Type()),
                                   ArrayRef<float>(v));
  } else if (const auto *a = n.attr("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, n.builder.getI64Type()),
                                   static_cast<int64_t>(a->i()));
  } else if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(RankedTensorType::get({int64_t(v.size())}, n.builder.getI64Type()),
                                   ArrayRef<int64_t>(v));
  } else {
    return n.error() << "has no supported value attribute (value, value_float(s), value_int(s))";
  }
  return SmallVector<Value>{ConstantOp::create(n.builder, n.loc, value).getResult()};
}

Results convertCast(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  Type to = convertElementType(n.builder.getContext(), n.intAttr("to", 0));
  if (!to)
    return n.error() << "unsupported target type " << dataTypeName(n.intAttr("to", 0));
  return n.finish(CastOp::create(n.builder, n.loc, n.placeholder(), n.input(0), to));
}

/// CastLike casts to the element type of its second input (whose values are
/// not read): the dynamo exporter writes it when run with optimize=False.
Results convertCastLike(NodeContext &n) {
  if (n.opset < 15)
    return n.error() << "CastLike is defined from opset 15 on";
  if (failed(requireInputs(n, 2)))
    return failure();
  Type to = getElementTypeOrSelf(n.input(1).getType());
  return n.finish(CastOp::create(n.builder, n.loc, n.placeholder(), n.input(0), to));
}

Results convertPow(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  // ONNX lets the exponent's type differ from the base's; pf.pow's kernel
  // takes one dtype, so a float base gets its exponent cast to its type.
  Value exponent = n.input(1);
  Type base = getElementTypeOrSelf(n.input(0).getType());
  if (isa<FloatType>(base) && getElementTypeOrSelf(exponent.getType()) != base) {
    auto cast = n.finish(CastOp::create(n.builder, n.loc, n.placeholder(), exponent, base));
    if (failed(cast))
      return failure();
    exponent = (*cast)[0];
  }
  return n.finish(PowOp::create(n.builder, n.loc, n.placeholder(), n.input(0), exponent));
}

Results convertMatMul(NodeContext &n) { return binary<MatMulOp>(n); }

UnitAttr unitIf(NodeContext &n, bool set) { return set ? n.builder.getUnitAttr() : UnitAttr(); }

Results convertGemm(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  return n.finish(GemmOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                 n.input(2), n.builder.getF32FloatAttr(n.floatAttr("alpha", 1)),
                                 n.builder.getF32FloatAttr(n.floatAttr("beta", 1)),
                                 unitIf(n, n.intAttr("transA", 0) != 0),
                                 unitIf(n, n.intAttr("transB", 0) != 0)));
}

Results convertShape(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  IntegerAttr start, end;
  if (n.attr("start"))
    start = n.builder.getI64IntegerAttr(n.intAttr("start", 0));
  if (n.attr("end"))
    end = n.builder.getI64IntegerAttr(n.intAttr("end", 0));
  return n.finish(ShapeOp::create(n.builder, n.loc, n.placeholder(), n.input(0), start, end));
}

Results convertReshape(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  return n.finish(ReshapeOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                    n.intAttr("allowzero", 0) != 0));
}

Results convertTranspose(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  DenseI64ArrayAttr perm;
  if (auto p = n.intsAttr("perm"))
    perm = n.builder.getDenseI64ArrayAttr(*p);
  return n.finish(TransposeOp::create(n.builder, n.loc, n.placeholder(), n.input(0), perm));
}

Results convertUnsqueeze(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto axes = axesOf(n, 13, 1);
  if (failed(axes))
    return failure();
  if (!*axes)
    return n.error() << "needs axes";
  return n.finish(UnsqueezeOp::create(n.builder, n.loc, n.placeholder(), n.input(0),
                                      n.builder.getDenseI64ArrayAttr(**axes)));
}

Results convertSqueeze(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto axes = axesOf(n, 13, 1);
  if (failed(axes))
    return failure();
  DenseI64ArrayAttr attr;
  if (*axes)
    attr = n.builder.getDenseI64ArrayAttr(**axes);
  return n.finish(SqueezeOp::create(n.builder, n.loc, n.placeholder(), n.input(0), attr));
}

Results convertConcat(NodeContext &n) {
  if (n.inputs.empty() || llvm::any_of(n.inputs, [](Value v) { return !v; }))
    return n.error() << "needs one or more inputs";
  if (!n.attr("axis"))
    return n.error() << "needs the axis attribute";
  return n.finish(ConcatOp::create(n.builder, n.loc, n.placeholder(), n.inputs,
                                   n.intAttr("axis", 0)));
}

Results convertSlice(NodeContext &n) {
  if (n.opset < 10) {
    if (failed(requireInputs(n, 1)))
      return failure();
    auto starts = n.intsAttr("starts"), ends = n.intsAttr("ends");
    if (!starts || !ends)
      return n.error() << "needs starts and ends";
    Value axes = n.intsAttr("axes") ? n.i64Constant(*n.intsAttr("axes")) : Value();
    return n.finish(SliceOp::create(n.builder, n.loc, n.placeholder(), n.input(0),
                                    n.i64Constant(*starts), n.i64Constant(*ends), axes, Value()));
  }
  if (failed(requireInputs(n, 3)))
    return failure();
  return n.finish(SliceOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                  n.input(2), n.input(3), n.input(4)));
}

Results convertGather(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  return n.finish(GatherOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                   n.intAttr("axis", 0)));
}

Results convertExpand(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  return n.finish(ExpandOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1)));
}

Results convertConstantOfShape(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  ElementsAttr value;
  if (const auto *a = n.attr("value")) {
    auto converted = convertTensor(n.builder.getContext(), a->t(), "", n.loc, false);
    if (failed(converted))
      return failure();
    value = *converted;
  }
  return n.finish(ConstantOfShapeOp::create(n.builder, n.loc, n.placeholder(), n.input(0), value));
}

template <typename OpTy>
Results reduce(NodeContext &n, int64_t axesInputSince) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto axes = axesOf(n, axesInputSince, 1);
  if (failed(axes))
    return failure();
  DenseI64ArrayAttr attr;
  if (*axes)
    attr = n.builder.getDenseI64ArrayAttr(**axes);
  return n.finish(OpTy::create(n.builder, n.loc, n.placeholder(), n.input(0), attr,
                               n.intAttr("keepdims", 1) != 0,
                               n.intAttr("noop_with_empty_axes", 0) != 0));
}

Results convertSoftmax(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t axis = n.intAttr("axis", n.opset < 13 ? 1 : -1);
  if (n.opset < 13) {
    // Before opset 13 Softmax flattens to 2-D at `axis`; that equals the
    // single-axis form only when axis is the last dimension.
    auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
    if (!type)
      return n.error() << "Softmax before opset 13 needs an input of known rank";
    if (axis != -1 && axis != type.getRank() - 1)
      return n.error() << "Softmax before opset 13 is supported only over the last axis "
                       << "(axis " << axis << " of a rank-" << type.getRank()
                       << " input; the default axis is 1)";
  }
  return n.finish(SoftmaxOp::create(n.builder, n.loc, n.placeholder(), n.input(0), axis));
}

Results convertWhere(NodeContext &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  return n.finish(WhereOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                  n.input(2)));
}

Results convertLayerNormalization(NodeContext &n) {
  if (n.opset < 17)
    return n.error() << "LayerNormalization is defined from opset 17 on";
  if (failed(requireInputs(n, 2)))
    return failure();
  Type f = n.placeholder();
  auto op = LayerNormalizationOp::create(n.builder, n.loc, TypeRange{f, f, f}, n.input(0),
                                         n.input(1), n.input(2),
                                         n.builder.getI64IntegerAttr(n.intAttr("axis", -1)),
                                         n.builder.getF32FloatAttr(n.floatAttr("epsilon", 1e-5f)));
  return n.finish(op);
}

Results convertGelu(NodeContext &n) {
  if (n.opset < 20)
    return n.error() << "Gelu is defined from opset 20 on";
  if (failed(requireInputs(n, 1)))
    return failure();
  std::string approximate = n.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return n.error() << "approximate must be \"none\" or \"tanh\", got \"" << approximate << "\"";
  return n.finish(GeluOp::create(n.builder, n.loc, n.placeholder(), n.input(0),
                                 n.builder.getStringAttr(approximate)));
}

/// Flatten is a reshape to [prod(dims before axis), prod(dims from axis)]:
/// it reuses pf.reshape's folding, lowering (a view) and gradient.
Results convertFlatten(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
  if (!type)
    return n.error() << "needs an input of known rank";
  int64_t rank = type.getRank(), axis = n.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return n.error() << "axis " << axis << " is out of range [" << -rank << ", " << rank
                     << "] for a rank-" << rank << " input";
  if (axis < 0)
    axis += rank;
  // A side with a dynamic dimension becomes -1 (reshape infers it); two such
  // sides leave the split unknown.
  auto side = [&](ArrayRef<int64_t> dims) -> int64_t {
    if (llvm::any_of(dims, ShapedType::isDynamic))
      return -1;
    return *boundedProduct(dims); // within the limit: the input's type is
  };
  int64_t outer = side(type.getShape().take_front(axis));
  int64_t inner = side(type.getShape().drop_front(axis));
  if (outer < 0 && inner < 0)
    return n.error() << "needs static dimensions on at least one side of axis " << axis
                     << ", got " << type;
  return n.finish(ReshapeOp::create(n.builder, n.loc, n.placeholder(), n.input(0),
                                    n.i64Constant({outer, inner}), false));
}

/// The one value of a constant scalar (or one-element tensor) as a double.
std::optional<double> constantScalar(Value v) {
  ElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  Attribute e = attr.getValues<Attribute>()[0];
  if (auto f = dyn_cast<FloatAttr>(e))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(e))
    return double(i.getValue().getSExtValue());
  return std::nullopt;
}

/// Range's length depends on its values, so with static shapes its inputs
/// must be constants (BERT's position ids: Range(0, seq_len, 1) after shape
/// folding); the result is computed here as a constant.
Results convertRange(NodeContext &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  Type element = getElementTypeOrSelf(n.input(0).getType());
  static constexpr const char *names[] = {"start", "limit", "delta"};
  double v[3];
  for (int i = 0; i < 3; ++i) {
    if (getElementTypeOrSelf(n.input(i).getType()) != element)
      return n.error() << names[i] << " has element type "
                       << getElementTypeOrSelf(n.input(i).getType()) << ", start has " << element;
    auto value = constantScalar(n.input(i));
    if (!value)
      return n.error() << names[i] << " (input " << i
                       << ") must be a constant scalar after shape folding; the output's length "
                          "depends on it";
    v[i] = *value;
  }
  if (!isa<FloatType>(element) && !element.isInteger(16) && !element.isInteger(32) &&
      !element.isInteger(64))
    return n.error() << "unsupported element type " << element
                     << " (float types, int16, int32, int64)";
  auto [start, limit, delta] = std::tuple(v[0], v[1], v[2]);
  if (delta == 0 || std::isnan(delta) || std::isnan(start) || std::isnan(limit))
    return n.error() << "delta must be non-zero and the bounds numbers";
  double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(count <= double(kMaxTensorElements)))
    return n.error() << "the output would have " << count << " elements (limit "
                     << kMaxTensorElements << ")";
  auto type = RankedTensorType::get({int64_t(count)}, element);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < int64_t(count); ++i) {
    double x = start + double(i) * delta;
    values.push_back(isa<FloatType>(element) ? Attribute(FloatAttr::get(element, x))
                                             : IntegerAttr::get(element, int64_t(x)));
  }
  return SmallVector<Value>{
      ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(type, values)).getResult()};
}

/// Clip(x, lo, hi) = min(max(x, lo), hi): pf.max/pf.min give the folds, the
/// kernels and the gradient (dy where lo <= x <= hi). With lo > hi the result
/// is hi everywhere, as ONNX specifies.
Results convertClip(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  if (n.attr("min") || n.attr("max"))
    return n.error() << "min and max are inputs from opset 11 on, not attributes";
  Type element = getElementTypeOrSelf(n.input(0).getType());
  Value acc = n.input(0);
  for (int i : {1, 2}) {
    Value bound = n.input(i);
    if (!bound)
      continue;
    const char *name = i == 1 ? "min" : "max";
    auto type = dyn_cast<RankedTensorType>(bound.getType());
    if (!type || !type.hasStaticShape() || type.getNumElements() != 1 || type.getRank() > 1)
      return n.error() << name << " (input " << i << ") must be a scalar, got " << bound.getType();
    if (type.getElementType() != element)
      return n.error() << name << " has element type " << type.getElementType()
                       << ", the input has " << element;
    if (type.getRank() == 1) { // a one-element vector must not add a dimension
      auto scalar = n.finish(ReshapeOp::create(n.builder, n.loc, n.placeholder(), bound,
                                               n.i64Constant({}), false));
      if (failed(scalar))
        return failure();
      bound = scalar->front();
    }
    Operation *op = i == 1 ? MaxOp::create(n.builder, n.loc, n.placeholder(), acc, bound)
                           : MinOp::create(n.builder, n.loc, n.placeholder(), acc, bound);
    auto results = n.finish(op);
    if (failed(results))
      return failure();
    acc = results->front();
  }
  return SmallVector<Value>{acc};
}

Results convertIsInf(NodeContext &n) {
  if (failed(requireInputs(n, 1)))
    return failure();
  return n.finish(IsInfOp::create(n.builder, n.loc, n.placeholder(), n.input(0),
                                  n.intAttr("detect_negative", 1) != 0,
                                  n.intAttr("detect_positive", 1) != 0));
}

/// A scalar integer input that must be constant (CumSum's axis, Trilu's k).
FailureOr<int64_t> constantIntScalar(NodeContext &n, size_t i, StringRef what) {
  auto values = n.constantInts(i, what);
  if (failed(values))
    return failure();
  if (!*values || (*values)->size() != 1)
    return n.error() << what << " (input " << i << ") must be a scalar";
  return (**values)[0];
}

Results convertCumSum(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto axis = constantIntScalar(n, 1, "axis");
  if (failed(axis))
    return failure();
  return n.finish(CumSumOp::create(n.builder, n.loc, n.placeholder(), n.input(0), *axis,
                                   n.intAttr("exclusive", 0) != 0, n.intAttr("reverse", 0) != 0));
}

Results convertTrilu(NodeContext &n) {
  if (n.opset < 14)
    return n.error() << "Trilu is defined from opset 14 on";
  if (failed(requireInputs(n, 1)))
    return failure();
  int64_t k = 0;
  if (n.input(1)) {
    auto given = constantIntScalar(n, 1, "k");
    if (failed(given))
      return failure();
    k = *given;
  }
  return n.finish(TriluOp::create(n.builder, n.loc, n.placeholder(), n.input(0), k,
                                  n.intAttr("upper", 1) != 0));
}

Results convertGatherND(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  int64_t batchDims = n.intAttr("batch_dims", 0);
  if (batchDims < 0)
    return n.error() << "batch_dims must be non-negative, got " << batchDims;
  return n.finish(GatherNDOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                     batchDims));
}

/// GatherElements(data, indices, axis) is a GatherND over index tuples: the
/// tuple of output position p is p itself with p[axis] replaced by
/// indices[p]. With static shapes the other coordinates are constants, so it
/// reuses pf.gather_nd's folding, kernel (negative indices, bounds checked at
/// run time) and gradient (scatter-add). RoBERTa's embeddings use it to pick
/// the buffered token_type_ids by position ids when none are passed.
Results convertGatherElements(NodeContext &n) {
  if (failed(requireInputs(n, 2)))
    return failure();
  auto dataType = dyn_cast<RankedTensorType>(n.input(0).getType());
  auto indexType = dyn_cast<RankedTensorType>(n.input(1).getType());
  if (!dataType || !indexType || !indexType.hasStaticShape())
    return n.error() << "needs data of known rank and indices of a static shape, got "
                     << n.input(0).getType() << " and " << n.input(1).getType()
                     << "; fix the input shapes";
  Type indexElement = indexType.getElementType();
  if (!indexElement.isInteger(32) && !indexElement.isInteger(64))
    return n.error() << "indices must be int32 or int64, got " << indexElement;
  int64_t rank = dataType.getRank(), axis = n.intAttr("axis", 0);
  if (rank < 1 || indexType.getRank() != rank)
    return n.error() << "indices must have the rank of data (at least 1), got " << indexType
                     << " and " << dataType;
  if (axis < -rank || axis >= rank)
    return n.error() << "axis " << axis << " is out of range [" << -rank << ", " << rank - 1
                     << "] for a rank-" << rank << " input";
  if (axis < 0)
    axis += rank;
  ArrayRef<int64_t> shape = indexType.getShape();
  for (int64_t j = 0; j < rank; ++j)
    if (j != axis && !dataType.isDynamicDim(j) && shape[j] > dataType.getDimSize(j))
      return n.error() << "indices dimension " << j << " (" << shape[j]
                       << ") exceeds data's (" << dataType.getDimSize(j) << ") off the axis "
                       << axis;
  int64_t count = indexType.getNumElements();
  if (!(double(count) * double(rank) <= double(kMaxTensorElements)))
    return n.error() << "the index tuples would have " << count << " x " << rank
                     << " elements (limit " << kMaxTensorElements << ")";
  SmallVector<int64_t> columnShape(shape);
  columnShape.push_back(1);
  auto columnType = RankedTensorType::get(columnShape, indexElement);
  SmallVector<Value> columns;
  for (int64_t j = 0; j < rank; ++j) {
    if (j == axis) {
      auto unsqueezed = n.finish(UnsqueezeOp::create(n.builder, n.loc, n.placeholder(),
                                                     n.input(1),
                                                     n.builder.getDenseI64ArrayAttr({rank})));
      if (failed(unsqueezed))
        return failure();
      columns.push_back(unsqueezed->front());
      continue;
    }
    // Coordinate j of every position, in row-major order.
    int64_t inner = 1;
    for (int64_t k = j + 1; k < rank; ++k)
      inner *= shape[k];
    SmallVector<APInt> values;
    values.reserve(count);
    for (int64_t e = 0; e < count; ++e)
      values.emplace_back(indexElement.getIntOrFloatBitWidth(), (e / inner) % shape[j]);
    columns.push_back(ConstantOp::create(n.builder, n.loc,
                                         DenseIntElementsAttr::get(columnType, values)));
  }
  Value tuples = columns.front();
  if (rank > 1) {
    auto concat = n.finish(ConcatOp::create(n.builder, n.loc, n.placeholder(), columns, rank));
    if (failed(concat))
      return failure();
    tuples = concat->front();
  }
  return n.finish(GatherNDOp::create(n.builder, n.loc, n.placeholder(), n.input(0), tuples, 0));
}

Results convertScatterND(NodeContext &n) {
  if (failed(requireInputs(n, 3)))
    return failure();
  std::string name = n.stringAttr("reduction", "none");
  auto kind = symbolizeScatterReduction(name);
  // add and mul came in opset 16, max and min in 18.
  int64_t since = !kind || *kind == ScatterReduction::None  ? 11
                  : *kind == ScatterReduction::Add || *kind == ScatterReduction::Mul ? 16
                                                                                      : 18;
  if (!kind || n.opset < since)
    return n.error() << "unsupported reduction \"" << name << "\" at this opset";
  return n.finish(ScatterNDOp::create(n.builder, n.loc, n.placeholder(), n.input(0), n.input(1),
                                      n.input(2), *kind));
}

llvm::StringMap<Converter> buildConverters() {
  llvm::StringMap<Converter> table;
  table["Add"] = binary<AddOp>;
  table["Sub"] = binary<SubOp>;
  table["Mul"] = binary<MulOp>;
  table["Div"] = binary<DivOp>;
  table["Pow"] = convertPow;
  table["Equal"] = binary<EqualOp>;
  table["Greater"] = binary<GreaterOp>;
  table["GreaterOrEqual"] = binary<GreaterEqualOp>;
  table["Less"] = binary<LessOp>;
  table["LessOrEqual"] = binary<LessEqualOp>;
  table["And"] = binary<AndOp>;
  table["Or"] = binary<OrOp>;
  table["Xor"] = binary<XorOp>;
  table["Not"] = unary<NotOp>;
  table["Min"] = variadic<MinOp>;
  table["Max"] = variadic<MaxOp>;
  table["Abs"] = unary<AbsOp>;
  table["Sign"] = unary<SignOp>;
  table["Reciprocal"] = unary<ReciprocalOp>;
  table["Sqrt"] = unary<SqrtOp>;
  table["Erf"] = unary<ErfOp>;
  table["Tanh"] = unary<TanhOp>;
  table["Exp"] = unary<ExpOp>;
  table["Neg"] = unary<NegOp>;
  table["Identity"] = convertIdentity;
  table["Dropout"] = convertDropout;
  table["Constant"] = convertConstant;
  table["Cast"] = convertCast;
  table["CastLike"] = convertCastLike;
  table["MatMul"] = convertMatMul;
  table["Gemm"] = convertGemm;
  table["Shape"] = convertShape;
  table["Reshape"] = convertReshape;
  table["Transpose"] = convertTranspose;
  table["Unsqueeze"] = convertUnsqueeze;
  table["Squeeze"] = convertSqueeze;
  table["Concat"] = convertConcat;
  table["Slice"] = convertSlice;
  table["Gather"] = convertGather;
  table["Expand"] = convertExpand;
  table["ConstantOfShape"] = convertConstantOfShape;
  table["ReduceMean"] = [](NodeContext &n) { return reduce<ReduceMeanOp>(n, 18); };
  table["ReduceSum"] = [](NodeContext &n) { return reduce<ReduceSumOp>(n, 13); };
  table["Softmax"] = convertSoftmax;
  table["Where"] = convertWhere;
  table["LayerNormalization"] = convertLayerNormalization;
  table["Gelu"] = convertGelu;
  table["Flatten"] = convertFlatten;
  table["Range"] = convertRange;
  table["Clip"] = convertClip;
  table["IsNaN"] = unary<IsNaNOp>;
  table["IsInf"] = convertIsInf;
  table["ReduceMax"] = [](NodeContext &n) { return reduce<ReduceMaxOp>(n, 18); };
  table["ReduceMin"] = [](NodeContext &n) { return reduce<ReduceMinOp>(n, 18); };
  table["CumSum"] = convertCumSum;
  table["Trilu"] = convertTrilu;
  table["GatherND"] = convertGatherND;
  table["GatherElements"] = convertGatherElements;
  table["ScatterND"] = convertScatterND;
  return table;
}
} // namespace

const llvm::StringMap<Converter> &onnx_import::getConverters() {
  static const llvm::StringMap<Converter> table = buildConverters();
  return table;
}
