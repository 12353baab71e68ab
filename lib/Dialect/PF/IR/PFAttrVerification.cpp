//===- PFAttrVerification.cpp - pf's discardable attributes ---------------===//
//
// The pf dialect's verifiers of `pf.*` attributes on any op, function argument
// or function result: each name of PFAttrNames.h has a value type (and range)
// and the ops that may carry it; any other `pf.*` name is an error.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFAttrNames.h"
#include "pf/Dialect/PF/IR/PFAttrs.h"
#include "pf/Dialect/PF/IR/PFOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::pf;

namespace {

bool isNonEmptyString(Attribute value) {
  auto string = dyn_cast<StringAttr>(value);
  return string && !string.getValue().empty();
}

bool isI64(Attribute value, int64_t min) {
  auto integer = dyn_cast<IntegerAttr>(value);
  return integer && integer.getType().isSignlessInteger(64) && integer.getInt() >= min;
}
bool isNonNegativeI64(Attribute value) { return isI64(value, 0); }
bool isPositiveI64(Attribute value) { return isI64(value, 1); }

bool isNonNegativeF64(Attribute value) {
  auto real = dyn_cast<FloatAttr>(value);
  return real && real.getType().isF64() && real.getValueAsDouble() >= 0;
}

bool isPositiveF64(Attribute value) {
  auto real = dyn_cast<FloatAttr>(value);
  return real && real.getType().isF64() && real.getValueAsDouble() > 0;
}

bool isDeviceList(Attribute value) {
  auto devices = dyn_cast<DenseI64ArrayAttr>(value);
  if (!devices || devices.empty())
    return false;
  llvm::SmallSet<int64_t, 4> seen;
  return llvm::all_of(devices.asArrayRef(),
                      [&](int64_t device) { return device >= 0 && seen.insert(device).second; });
}

bool isUnit(Attribute value) { return isa<UnitAttr>(value); }

bool isStringList(Attribute value) {
  auto array = dyn_cast<ArrayAttr>(value);
  return array && !array.empty() && llvm::all_of(array, [](Attribute a) {
    auto s = dyn_cast<StringAttr>(a);
    return s && !s.getValue().empty();
  });
}

bool isBlockList(Attribute value) {
  auto blocks = dyn_cast<DenseI64ArrayAttr>(value);
  return blocks && !blocks.empty() &&
         llvm::all_of(blocks.asArrayRef(), [](int64_t block) { return block >= 0; });
}

bool isRuntimePlan(Attribute value) { return isa<RuntimePlanAttr>(value); }

bool isAnyOp(Operation *) { return true; }
bool isModule(Operation *op) { return isa<ModuleOp>(op); }
bool isFunction(Operation *op) { return isa<FunctionOpInterface>(op); }
bool isPipeline(Operation *op) { return isa<PipelineOp>(op); }
bool isStage(Operation *op) { return isa<StageOp>(op); }
bool isParam(Operation *op) { return isa<ParamOp>(op); }

/// One `pf.*` attribute: its value and the ops that may carry it.
struct AttrRule {
  llvm::StringLiteral name;
  bool (*isValid)(Attribute);
  llvm::StringLiteral expected;
  bool (*mayHold)(Operation *);
  llvm::StringLiteral holder; // empty: any op
};

const AttrRule kOpAttrRules[] = {
    {kNameAttrName, isNonEmptyString, "a non-empty string", isAnyOp, ""},
    {kBlockAttrName, isNonNegativeI64, "a non-negative i64", isAnyOp, ""},
    {kDevicesAttrName, isDeviceList, "a non-empty array<i64> of distinct non-negative devices",
     isStage, "a pf.stage"},
    {kKfacWeightAttrName, isNonEmptyString, "a non-empty string (a parameter's name)", isParam,
     "a pf.param"},
    {kKfacBiasAttrName, isNonEmptyString, "a non-empty string (a parameter's name)", isParam,
     "a pf.param"},
    {kEncoderBlockAttrName, isNonNegativeI64, "a non-negative i64", isParam, "a pf.param"},
    {kOnnxNameAttrName, isNonEmptyString, "a non-empty string (an initializer's name)", isParam,
     "a pf.param"},
    {kOnnxTransposedCopiesAttrName, isStringList, "an array of initializer names", isParam,
     "a pf.param"},
    {kKfacWeightInOutAttrName, isUnit, "a unit attribute", isParam, "a pf.param"},
    {kKfacPendingAttrName, isUnit, "a unit attribute", isParam, "a pf.param"},
    {kSourceAttrName, isNonEmptyString, "a non-empty string", isModule, "a module"},
    {kOnnxOpsetAttrName, isPositiveI64, "a positive i64", isModule, "a module"},
    {kOnnxProducerAttrName, isNonEmptyString, "a non-empty string", isModule, "a module"},
    {kMicrobatchesAttrName, isPositiveI64, "a positive i64", isFunction, "a function"},
    {kKfacPolicyAttrName, isNonEmptyString, "a non-empty string", isPipeline, "a pf.pipeline"},
    {kRefreshStepsAttrName, isNonNegativeI64, "a non-negative i64", isPipeline, "a pf.pipeline"},
    {kStepTimeMsAttrName, isNonNegativeF64, "a non-negative f64", isPipeline, "a pf.pipeline"},
    {kUtilizationAttrName, isNonNegativeF64, "a non-negative f64", isPipeline, "a pf.pipeline"},
    {kGradIdAttrName, isNonNegativeI64, "a non-negative i64", isAnyOp, ""},
    {kGradOfAttrName, isNonNegativeI64, "a non-negative i64", isAnyOp, ""},
    {kGradSumAttrName, isUnit, "a unit attribute", isAnyOp, ""},
    {kStageAttrName, isNonNegativeI64, "a non-negative i64", isFunction, "a function"},
    {kKfacAfterAttrName, isNonEmptyString, "a non-empty string (a function's name)",
     isFunction, "a function"},
    {kStageBlocksAttrName, isBlockList, "a non-empty array<i64> of non-negative blocks",
     isFunction, "a function"},
    {kStageUnitsAttrName, isStringList, "a non-empty array of non-empty strings", isFunction,
     "a function"},
    {kStepGradientsAttrName, isStringList, "a non-empty array of non-empty strings", isModule,
     "a module"},
    {kKfacKLClipAttrName, isPositiveF64, "a positive f64", isModule, "a module"},
    {kKfacKLOrderAttrName, isStringList, "a non-empty array of non-empty strings", isModule,
     "a module"},
    // The runtime lowering's plan of the entry function (read by the host);
    // the typed attribute verifies its own fields.
    {RuntimePlanAttr::kAttrName, isRuntimePlan, "a #pf.runtime_plan", isFunction, "a function"},
};

const AttrRule *findRule(StringRef name) {
  const auto *it = llvm::find_if(kOpAttrRules, [&](const AttrRule &r) { return r.name == name; });
  return it == std::end(kOpAttrRules) ? nullptr : it;
}

/// Function arguments and results carry only their name. `what` is e.g.
/// "argument 2".
LogicalResult verifyValueAttr(Operation *op, const Twine &what, NamedAttribute attr) {
  if (attr.getName() != kNameAttrName)
    return op->emitOpError() << what << " has unknown pf attribute '"
                             << attr.getName().getValue() << "' (only '" << kNameAttrName << "' names an argument or result)";
  if (!isNonEmptyString(attr.getValue()))
    return op->emitOpError() << what << " attribute '" << kNameAttrName
                             << "' must be a non-empty string, got " << attr.getValue();
  return success();
}

} // namespace

LogicalResult PFDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  const AttrRule *rule = findRule(attr.getName());
  if (!rule)
    return op->emitOpError() << "has unknown pf attribute '" << attr.getName().getValue() << "'";
  if (!rule->mayHold(op))
    return op->emitOpError() << "may not carry '" << rule->name << "': it belongs on "
                             << rule->holder;
  if (!rule->isValid(attr.getValue()))
    return op->emitOpError() << "attribute '" << rule->name << "' must be " << rule->expected
                             << ", got " << attr.getValue();
  return success();
}

LogicalResult PFDialect::verifyRegionArgAttribute(Operation *op, unsigned /*regionIndex*/,
                                                  unsigned argIndex, NamedAttribute attr) {
  return verifyValueAttr(op, "argument " + Twine(argIndex), attr);
}

LogicalResult PFDialect::verifyRegionResultAttribute(Operation *op, unsigned /*regionIndex*/,
                                                     unsigned resultIndex, NamedAttribute attr) {
  return verifyValueAttr(op, "result " + Twine(resultIndex), attr);
}
