//===- ONNXImporter.cpp - ONNX model -> pf dialect ------------------------===//
#include "pf/Import/ONNXImporter.h"
#include "ImportContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/defs/parser.h>

#include <exception>

using namespace mlir;
using namespace mlir::pf;
using namespace mlir::pf::onnx_import;

namespace {
constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 22;

/// Reads a binary or text ONNX model; reports why it is not one.
LogicalResult loadModel(StringRef path, Location loc, onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(loc) << "cannot read '" << path << "': " << buffer.getError().message();
  StringRef data = (*buffer)->getBuffer();
  if (data.empty())
    return emitError(loc) << "'" << path << "' is empty, not an ONNX model";
  StringRef ext = llvm::sys::path::extension(path);
  try {
    if (ext == ".onnxtext" || ext == ".txt") {
      std::string text = data.str();
      onnx::OnnxParser parser(text.c_str());
      auto status = parser.Parse(model);
      if (!status.IsOK())
        return emitError(loc) << "not a valid ONNX text model: " << status.ErrorMessage();
    } else if (!model.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      return emitError(loc) << "not a valid ONNX model (the protobuf does not parse; "
                               "truncated or not an .onnx file?)";
    }
  } catch (const std::exception &e) {
    return emitError(loc) << "not a valid ONNX model: " << e.what();
  }
  if (!model.has_graph() || model.ir_version() <= 0)
    return emitError(loc) << "not a valid ONNX model (no graph or IR version; "
                             "is this an .onnx file?)";
  return success();
}

/// Version of the default ("" / "ai.onnx") opset.
FailureOr<int64_t> defaultOpset(const onnx::ModelProto &model, Location loc) {
  for (const auto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") {
      int64_t version = opset.version();
      if (version < kMinOpset || version > kMaxOpset)
        return emitError(loc) << "opset " << version << " is not supported (pf imports opsets "
                              << kMinOpset << " to " << kMaxOpset << ")";
      return version;
    }
  return emitError(loc) << "the model imports no version of the default ONNX opset";
}

bool isFloat(Type type) { return isa<FloatType>(type); }

class GraphImporter {
public:
  GraphImporter(MLIRContext *ctx, StringRef path, const ONNXImportOptions &options)
      : ctx(ctx), path(path.str()), options(options), builder(ctx),
        fileLoc(FileLineColLoc::get(ctx, path, 0, 0)) {
    baseDir = llvm::sys::path::parent_path(path).str();
  }

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model, int64_t opset);

private:
  Location nodeLoc(const onnx::NodeProto &node) {
    return NameLoc::get(StringAttr::get(ctx, displayName(node)), fileLoc);
  }
  LogicalResult importInitializers(const onnx::GraphProto &graph, ModuleOp module);
  LogicalResult importInputs(const onnx::GraphProto &graph, SmallVectorImpl<Type> &types,
                             SmallVectorImpl<std::string> &names);
  LogicalResult importNodes(const onnx::GraphProto &graph, int64_t opset);
  LogicalResult checkDeclaredOutput(const onnx::ValueInfoProto &output, Value value);
  Value lookup(const std::string &name) {
    auto it = values.find(name);
    if (it != values.end())
      return it->second;
    // Initializers are read where they are first used.
    auto init = initializerValues.find(name);
    if (init == initializerValues.end())
      return {};
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(entryBlock);
    Value value;
    if (auto param = dyn_cast<ParamOp>(init->second))
      value = ParamRefOp::create(builder, param.getLoc(), param.getType(), param.getSymName());
    else
      value = ConstantOp::create(builder, init->second->getLoc(),
                                 cast<ElementsAttr>(cast<ConstantOp>(init->second).getValue()));
    values[name] = value;
    return value;
  }

  MLIRContext *ctx;
  std::string path, baseDir;
  const ONNXImportOptions &options;
  OpBuilder builder;
  Location fileLoc;
  Block *entryBlock = nullptr;
  std::unordered_map<std::string, Value> values;
  std::unordered_map<std::string, Operation *> initializerValues;
  ModuleOp constantHolder;
};

LogicalResult GraphImporter::importInitializers(const onnx::GraphProto &graph,
                                                ModuleOp module) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  llvm::StringSet<> seen;
  for (const auto &init : graph.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx, init.name()), fileLoc);
    if (!seen.insert(init.name()).second)
      return emitError(loc) << "initializer '" << init.name() << "' is defined twice";
    auto tensorType = onnx_import::tensorType(ctx, init, loc);
    if (failed(tensorType))
      return failure();
    RankedTensorType type = *tensorType;
    Type element = type.getElementType();
    bool external = init.data_location() == onnx::TensorProto::EXTERNAL;
    // Trainable weights are float tensors with more than one element; the
    // rest (position ids, scalars) are constants so shape arithmetic folds.
    bool isParam = isFloat(element) && type.getNumElements() > 1;
    bool readData = options.loadWeights || (!isParam && !external);
    if (!isParam && !readData)
      isParam = true; // a shapes-only constant still has a known type
    ElementsAttr value;
    // Shapes only: the data is not read, but a tensor whose dims promise
    // more (or less) than it holds is still a broken model.
    if (!readData && failed(checkTensorData(ctx, init, loc)))
      return failure();
    if (readData) {
      auto converted = convertTensor(ctx, init, baseDir, loc, /*asResource=*/isParam);
      if (failed(converted))
        return failure();
      value = *converted;
    }
    if (isParam) {
      auto param = ParamOp::create(builder, loc, init.name(), type, value);
      initializerValues[init.name()] = param;
    } else {
      // Held in a scratch module until a node uses it.
      OpBuilder scratch(constantHolder.getBody(), constantHolder.getBody()->end());
      initializerValues[init.name()] = ConstantOp::create(scratch, loc, value);
    }
  }
  return success();
}

LogicalResult GraphImporter::importInputs(const onnx::GraphProto &graph,
                                          SmallVectorImpl<Type> &types,
                                          SmallVectorImpl<std::string> &names) {
  // A misspelt --shape is the likelier cause of any problem below: report it
  // first.
  llvm::StringSet<> known;
  for (const auto &input : graph.input())
    if (!initializerValues.count(input.name()))
      known.insert(input.name());
  for (const auto &entry : options.inputShapes)
    if (!known.contains(entry.getKey())) {
      auto diag = emitError(fileLoc) << "--shape names '" << entry.getKey()
                                     << "', which is not a graph input";
      if (!known.empty()) {
        SmallVector<StringRef> names;
        for (const auto &input : graph.input())
          if (known.contains(input.name()))
            names.push_back(input.name());
        diag << " (inputs: " << llvm::join(names, ", ") << ")";
      }
      return diag;
    }
  for (const auto &input : graph.input()) {
    if (initializerValues.count(input.name()))
      continue; // IR < 4 lists initializers as inputs too
    if (!input.type().has_tensor_type())
      return emitError(fileLoc) << "graph input '" << input.name() << "' is not a tensor";
    const auto &tensor = input.type().tensor_type();
    Type element = convertElementType(ctx, tensor.elem_type());
    if (!element)
      return emitError(fileLoc) << "graph input '" << input.name()
                                << "' has unsupported element type "
                                << dataTypeName(tensor.elem_type());
    SmallVector<int64_t> shape;
    SmallVector<std::string> dimNames;
    for (const auto &dim : tensor.shape().dim()) {
      dimNames.push_back(dim.has_dim_param() ? dim.dim_param() : "");
      if (dim.has_dim_value() && dim.dim_value() < 0)
        return emitError(fileLoc) << "graph input '" << input.name() << "' dimension "
                                  << shape.size() << " is negative (" << dim.dim_value()
                                  << ")";
      if (dim.has_dim_value())
        shape.push_back(dim.dim_value());
      else if (dim.has_dim_param() && options.dimValues.count(dim.dim_param()))
        shape.push_back(options.dimValues.lookup(dim.dim_param()));
      else
        shape.push_back(ShapedType::kDynamic);
    }
    if (auto it = options.inputShapes.find(input.name()); it != options.inputShapes.end()) {
      if (tensor.has_shape() && it->second.size() != shape.size())
        return emitError(fileLoc) << "--shape " << input.name() << " gives " << it->second.size()
                                  << " dimensions but the input has rank " << shape.size();
      for (size_t i = 0; i < shape.size(); ++i)
        if (!ShapedType::isDynamic(shape[i]) && shape[i] != it->second[i]) {
          auto diag = emitError(fileLoc) << "--shape " << input.name() << ": dimension " << i
                                         << " is fixed to " << shape[i] << " by ";
          if (!dimNames[i].empty())
            diag << "--dim " << dimNames[i] << "=" << shape[i];
          else
            diag << "the model";
          return diag << ", not " << it->second[i];
        }
      shape.assign(it->second.begin(), it->second.end());
    }
    if (std::string problem = shapeLimitError(shape); !problem.empty())
      return emitError(fileLoc) << "graph input '" << input.name() << "' has shape "
                                << shapeText(shape) << ": " << problem;
    if (!tensor.has_shape() && !options.inputShapes.count(input.name())) {
      if (!options.allowDynamic)
        return emitError(fileLoc) << "graph input '" << input.name()
                                  << "' has no shape; give one with --shape "
                                  << input.name() << "=DIMxDIM...";
      types.push_back(UnrankedTensorType::get(element));
    } else {
      for (size_t i = 0; i < shape.size(); ++i)
        if (ShapedType::isDynamic(shape[i]) && !options.allowDynamic) {
          auto diag = emitError(fileLoc) << "graph input '" << input.name() << "' dimension "
                                         << i;
          if (!dimNames[i].empty())
            diag << " ('" << dimNames[i] << "')";
          diag << " is dynamic; fix it with --shape " << input.name() << "=...";
          if (!dimNames[i].empty())
            diag << " or --dim " << dimNames[i] << "=N";
          return diag;
        }
      types.push_back(RankedTensorType::get(shape, element));
    }
    names.push_back(input.name());
  }
  return success();
}

LogicalResult GraphImporter::importNodes(const onnx::GraphProto &graph, int64_t opset) {
  const auto &converters = getConverters();
  // ONNX requires topological order, but not every producer honours it: convert
  // nodes as their inputs become available and report what never does.
  std::vector<const onnx::NodeProto *> pending;
  for (const auto &node : graph.node())
    pending.push_back(&node);
  llvm::StringSet<> produced;
  for (const auto &node : graph.node())
    for (const auto &out : node.output())
      produced.insert(out);

  while (!pending.empty()) {
    std::vector<const onnx::NodeProto *> blocked;
    for (const onnx::NodeProto *node : pending) {
      Location loc = nodeLoc(*node);
      bool ready = true;
      SmallVector<Value> inputs;
      for (const auto &name : node->input()) {
        if (name.empty()) {
          inputs.push_back(Value());
          continue;
        }
        Value v = lookup(name);
        if (!v) {
          if (!produced.contains(name))
            return emitError(loc) << "node '" << displayName(*node) << "' (" << node->op_type()
                                  << ") reads '" << name
                                  << "', which is no graph input, initializer or node output";
          ready = false;
          break;
        }
        inputs.push_back(v);
      }
      if (!ready) {
        blocked.push_back(node);
        continue;
      }
      if (!node->domain().empty() && node->domain() != "ai.onnx")
        return emitError(loc) << "node '" << displayName(*node) << "': unsupported op '"
                              << node->domain() << "::" << node->op_type() << "' (opset "
                              << opset << "): pf imports only the default ONNX domain";
      auto converter = converters.find(node->op_type());
      if (converter == converters.end())
        return emitError(loc) << "node '" << displayName(*node) << "': unsupported op '"
                              << node->op_type() << "' (opset " << opset << ")";
      NodeContext context(builder, *node, loc, opset, std::move(inputs));
      auto results = converter->second(context);
      if (failed(results))
        return failure();
      for (auto [i, name] : llvm::enumerate(node->output())) {
        if (name.empty())
          continue;
        if (i >= results->size() || !(*results)[i])
          return emitError(loc) << "node '" << displayName(*node) << "' (" << node->op_type()
                                << "): output " << i << " ('" << name
                                << "') is not supported";
        if (values.count(name) || initializerValues.count(name))
          return emitError(loc) << "value '" << name << "' is defined twice";
        values[name] = (*results)[i];
      }
    }
    if (blocked.size() == pending.size()) {
      // Every node left waits, directly or not, on a cycle: name a few.
      const onnx::NodeProto *node = blocked.front();
      auto diag = emitError(nodeLoc(*node))
                  << "the graph has a cycle: " << blocked.size()
                  << " node(s) never get all their inputs: ";
      constexpr size_t kShown = 4;
      for (size_t i = 0; i < std::min(blocked.size(), kShown); ++i)
        diag << (i ? ", " : "") << "'" << displayName(*blocked[i]) << "' ("
             << blocked[i]->op_type() << ")";
      if (blocked.size() > kShown)
        diag << " and " << blocked.size() - kShown << " more";
      return diag;
    }
    pending = std::move(blocked);
  }
  return success();
}

/// A graph output's declared element type and static dimensions (dim_value,
/// or a dim_param fixed by --dim) must agree with what the nodes compute:
/// otherwise the model, or pf's reading of it, is wrong.
LogicalResult GraphImporter::checkDeclaredOutput(const onnx::ValueInfoProto &output,
                                                 Value value) {
  if (!output.type().has_tensor_type())
    return success();
  const auto &tensor = output.type().tensor_type();
  auto computed = cast<TensorType>(value.getType());
  Type element = tensor.elem_type() ? convertElementType(ctx, tensor.elem_type()) : Type();
  bool mismatch = element && element != computed.getElementType();
  SmallVector<int64_t> declared;
  if (tensor.has_shape()) {
    for (const auto &dim : tensor.shape().dim()) {
      if (dim.has_dim_value() && dim.dim_value() >= 0)
        declared.push_back(dim.dim_value());
      else if (dim.has_dim_param() && options.dimValues.count(dim.dim_param()))
        declared.push_back(options.dimValues.lookup(dim.dim_param()));
      else
        declared.push_back(ShapedType::kDynamic);
    }
    if (auto ranked = dyn_cast<RankedTensorType>(computed)) {
      if (ranked.getRank() != int64_t(declared.size()))
        mismatch = true;
      else
        for (auto [want, got] : llvm::zip(declared, ranked.getShape()))
          if (!ShapedType::isDynamic(want) && !ShapedType::isDynamic(got) && want != got)
            mismatch = true;
    }
  }
  if (!mismatch)
    return success();
  Type declaredType;
  Type declaredElement = element ? element : computed.getElementType();
  if (tensor.has_shape())
    declaredType = RankedTensorType::get(declared, declaredElement);
  else
    declaredType = UnrankedTensorType::get(declaredElement);
  return emitError(fileLoc) << "graph output '" << output.name() << "' is declared as "
                            << declaredType << " but computes " << computed;
}

OwningOpRef<ModuleOp> GraphImporter::run(const onnx::ModelProto &model, int64_t opset) {
  const onnx::GraphProto &graph = model.graph();
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(fileLoc);
  constantHolder = *scratch;
  module->getOperation()->setAttr(kSourceAttrName, builder.getStringAttr(path));
  module->getOperation()->setAttr(kOnnxOpsetAttrName, builder.getI64IntegerAttr(opset));
  if (!model.producer_name().empty())
    module->getOperation()->setAttr(kOnnxProducerAttrName,
                                    builder.getStringAttr(model.producer_name()));

  if (failed(importInitializers(graph, *module)))
    return nullptr;
  SmallVector<Type> inputTypes;
  SmallVector<std::string> inputNames;
  if (failed(importInputs(graph, inputTypes, inputNames)))
    return nullptr;

  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, options.entryName,
                                   builder.getFunctionType(inputTypes, {}));
  entryBlock = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(inputNames)) {
    values[name] = entryBlock->getArgument(i);
    func.setArgAttr(i, kNameAttrName, builder.getStringAttr(name));
  }
  builder.setInsertionPointToEnd(entryBlock);
  if (failed(importNodes(graph, opset)))
    return nullptr;

  SmallVector<Value> outputs;
  for (const auto &output : graph.output()) {
    Value value = lookup(output.name());
    if (!value) {
      emitError(fileLoc) << "graph output '" << output.name() << "' is never computed";
      return nullptr;
    }
    if (failed(checkDeclaredOutput(output, value)))
      return nullptr;
    outputs.push_back(value);
  }
  func::ReturnOp::create(builder, fileLoc, outputs);
  func.setType(builder.getFunctionType(inputTypes, ValueRange(outputs).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, kNameAttrName, builder.getStringAttr(output.name()));
  return module;
}
} // namespace

bool mlir::pf::parseShapeText(StringRef text, SmallVectorImpl<int64_t> &shape) {
  shape.clear();
  if (text.empty())
    return true; // a scalar
  SmallVector<StringRef> parts;
  text.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim < 0)
      return false;
    shape.push_back(dim);
  }
  return true;
}

bool mlir::pf::parseDimensionOptions(ArrayRef<std::string> shapes, ArrayRef<std::string> dims,
                                     ONNXImportOptions &options, std::string &error) {
  for (const std::string &entry : shapes) {
    auto [name, text] = StringRef(entry).split('=');
    SmallVector<int64_t> shape;
    if (name.empty() || !StringRef(entry).contains('=') || !parseShapeText(text, shape)) {
      error = "--shape '" + entry + "' is not NAME=DxD... with non-negative integers";
      return false;
    }
    options.inputShapes[name] = shape;
  }
  for (const std::string &entry : dims) {
    auto [name, text] = StringRef(entry).split('=');
    int64_t value;
    if (name.empty() || text.getAsInteger(10, value) || value < 0) {
      error = "--dim '" + entry + "' is not NAME=N with a non-negative integer";
      return false;
    }
    options.dimValues[name] = value;
  }
  return true;
}

OwningOpRef<ModuleOp> mlir::pf::importONNXFile(StringRef path, MLIRContext *context,
                                               const ONNXImportOptions &options) {
  context->loadDialect<PFDialect, func::FuncDialect>();
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  onnx::ModelProto model;
  if (failed(loadModel(path, loc, model)))
    return nullptr;
  auto opset = defaultOpset(model, loc);
  if (failed(opset))
    return nullptr;
  GraphImporter importer(context, path, options);
  return importer.run(model, *opset);
}
