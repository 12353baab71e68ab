//===- RuntimeLowering.h - shared state of the pf -> pfrt patterns -*- C++ -*-===//
//
// pf-lower-to-runtime is a dialect conversion: tensors become `!llvm.ptr`
// pointers to their planned entries of the tensor table, and each pf op
// becomes the pfrt_* calls of its family's patterns (ElementwisePatterns.cpp,
// LinalgPatterns.cpp, NormalizationPatterns.cpp, DataMovementPatterns.cpp,
// TrainingPatterns.cpp, KFACPatterns.cpp). Patterns emit straight-line calls
// (conditional ones inside scf.if); the pass adds the status checks and
// profiling hooks around every recorded call afterwards.
//
//===----------------------------------------------------------------------===//
#ifndef PF_LIB_CONVERSION_RUNTIMELOWERING_H
#define PF_LIB_CONVERSION_RUNTIMELOWERING_H

#include "BufferPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <map>
#include <vector>

namespace mlir::pf {

/// What the patterns share: the plan, the table, the op indices, and the
/// calls they emitted.
class RuntimeLowering {
public:
  /// `entry` is the block of pf_main(ctx, table).
  RuntimeLowering(ModuleOp module, BufferPlan &plan, Block &entry);

  BufferPlan &plan;
  /// Position of each op of the source function (its status code and
  /// profiling slot are derived from it).
  DenseMap<Operation *, int64_t> opIndex;
  /// Each pf.kfac.update_factor: its position among the updates of its
  /// factor in program order, and how many there are.
  DenseMap<Operation *, std::pair<int64_t, int64_t>> factorUpdates;
  /// Every pfrt call emitted and the op index its failure reports (-1: the
  /// output copies).
  SmallVector<std::pair<func::CallOp, int64_t>> calls;

  // --- values ----------------------------------------------------------------
  /// Pointer to table entry `tensor`.
  Value tensorPtr(OpBuilder &b, Location loc, int64_t tensor) const;
  /// The entry planned for `value` (a value of the source function); a
  /// null pointer for a null value (an absent optional result).
  Value entryOf(OpBuilder &b, Location loc, Value value) const;
  /// The entries of all results of `op`.
  SmallVector<Value> resultEntries(OpBuilder &b, Operation *op) const;
  /// `converted` (an operand from the adaptor), or a null pointer.
  Value orNull(OpBuilder &b, Location loc, Value converted) const;
  Value nullPtr(OpBuilder &b, Location loc) const;
  /// Entry of a parameter named by symbol; null pointer without one.
  Value paramPtr(OpBuilder &b, Location loc, FlatSymbolRefAttr name) const;
  Value constI32(OpBuilder &b, Location loc, int64_t v) const;
  Value constI64(OpBuilder &b, Location loc, int64_t v) const;
  Value constF64(OpBuilder &b, Location loc, double v) const;
  /// Address of a constant i64 array (axes, permutations, slice bounds); one
  /// global per distinct array; a null pointer for an empty one.
  Value intArray(OpBuilder &b, Location loc, ArrayRef<int64_t> values);
  /// The value of the one-element tensor `source` (learning rate, step, a
  /// due flag) as `type` (f64 or an integer), read at run time from its
  /// descriptor `entry` by pfrt_read_scalar on behalf of `op`: the tensor
  /// may live in device memory. Each value is read once (on CUDA a read
  /// waits for the stream): a function argument (the step's lr and step) at
  /// the start, another value at its first use outside a branch.
  FailureOr<Value> readScalar(OpBuilder &b, Operation *op, Value source, Value entry, Type type);
  /// The function's arguments as the patterns see them (casts of their
  /// table entries); filled by the pass.
  DenseSet<Value> arguments;
  /// A stack slot for one double (pfrt_dot's result), allocated once at the
  /// start of the function.
  Value scratchF64(OpBuilder &b, Location loc);
  /// A stack slot for one int32_t (an inversion's outcome), allocated once
  /// at the start of the function.
  Value scratchI32(OpBuilder &b, Location loc);
  /// Kernels that take an array of descriptors (concat, clipping) get new
  /// table entries viewing `values`, one after the other; returns the first.
  int64_t addContiguousViews(ValueRange values);

  // --- calls -------------------------------------------------------------------
  /// Calls kernel `name` of pfrt_abi.def with the context and `args` on
  /// behalf of `op`, declaring the callee from the table on first use. Fails
  /// (naming the kernel) when `args` do not match its declaration.
  LogicalResult call(OpBuilder &b, Operation *op, StringRef name, ArrayRef<Value> args);
  /// The same for the output copies after the last op.
  LogicalResult callOutputCopy(OpBuilder &b, Location loc, int64_t from, int64_t to);

private:
  LogicalResult emitCall(OpBuilder &b, Location loc, Operation *diagnosticOp, StringRef name,
                         ArrayRef<Value> args, int64_t index);

  ModuleOp module;
  Value context, table;
  Type ptrType, tensorType;
  Value f64Slot, i32Slot;
  /// readScalar's reads (f64) by source value.
  DenseMap<Value, Value> scalarReads;
  int64_t globals = 0;
  std::map<std::vector<int64_t>, std::string> intArrays;
};

/// Base of the patterns: a conversion pattern with the shared state.
template <typename OpTy>
class RuntimePattern : public OpConversionPattern<OpTy> {
public:
  RuntimePattern(const TypeConverter &converter, MLIRContext *ctx, RuntimeLowering &lowering)
      : OpConversionPattern<OpTy>(converter, ctx), lowering(lowering) {}

protected:
  /// Replaces `op` by the table entries of its results (or erases it).
  static void replaceByEntries(ConversionPatternRewriter &rewriter, Operation *op,
                               ArrayRef<Value> entries) {
    if (op->getNumResults() == 0)
      rewriter.eraseOp(op);
    else
      rewriter.replaceOp(op, entries);
  }

  RuntimeLowering &lowering;
};

/// One kernel whose arguments are the op's operands then its results, all
/// descriptors (pfrt_add(ctx, a, b, out), pfrt_exp(ctx, x, out), ...).
template <typename OpTy>
class KernelCallPattern : public RuntimePattern<OpTy> {
public:
  KernelCallPattern(const TypeConverter &converter, MLIRContext *ctx, RuntimeLowering &lowering,
                    StringRef kernel)
      : RuntimePattern<OpTy>(converter, ctx, lowering), kernel(kernel) {}

  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> args(adaptor.getOperands());
    SmallVector<Value> results = this->lowering.resultEntries(rewriter, op);
    args.append(results.begin(), results.end());
    if (failed(this->lowering.call(rewriter, op, kernel, args)))
      return failure();
    this->replaceByEntries(rewriter, op, results);
    return success();
  }

private:
  StringRef kernel;
};

/// tensor<...> -> !llvm.ptr (a descriptor of the table); other types stay.
class RuntimeTypeConverter : public TypeConverter {
public:
  explicit RuntimeTypeConverter(MLIRContext *ctx);
};

// The pattern families. Each adds the patterns of its ops.
void populateElementwisePatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                 RewritePatternSet &patterns);
void populateLinalgPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                            RewritePatternSet &patterns);
void populateNormalizationPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                   RewritePatternSet &patterns);
/// Views, parameters, constants, shape and layout ops, and the return (the
/// output copies).
void populateDataMovementPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                  RewritePatternSet &patterns);
/// Backward kernels, the loss, gradient clipping and the optimizers.
void populateTrainingPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                              RewritePatternSet &patterns);
void populateKFACPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                          RewritePatternSet &patterns);

/// All of the above.
void populateRuntimeLoweringPatterns(const TypeConverter &converter, RuntimeLowering &lowering,
                                     RewritePatternSet &patterns);

} // namespace mlir::pf

#endif // PF_LIB_CONVERSION_RUNTIMELOWERING_H
