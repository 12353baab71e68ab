//===- PipelineModel.h - encoder blocks and their costs ---------*- C++ -*-===//
//
// Shared by pf-partition and pf-schedule: which ops belong to which encoder
// block (the pipeline's unit of work), and what each block costs, from the
// analytic model (FLOPs of the ops' cost interface on a device) or a profile.
//
//===----------------------------------------------------------------------===//
#ifndef PF_LIB_TRANSFORMS_PIPELINE_PIPELINEMODEL_H
#define PF_LIB_TRANSFORMS_PIPELINE_PIPELINEMODEL_H

#include "pf/Dialect/PF/IR/PFOps.h"
#include "pf/Schedule/CostModel.h"
#include "pf/Transforms/OptionEnums.h"
#include "pf/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace mlir::pf {

/// The ops of an entry function grouped into encoder blocks.
struct BlockAssignment {
  int64_t numBlocks = 0;
  /// Block of every op that does work (not param_ref / constant, which are
  /// free and are cloned where needed).
  llvm::DenseMap<Operation *, int64_t> blockOf;
  /// Ops in program order (excluding the terminator).
  SmallVector<Operation *> ops;
  /// K-FAC layers of each block (the linears inside encoder blocks).
  SmallVector<SmallVector<LinearOp>> kfacLinears;

  static bool isFree(Operation *op) { return isa<ParamRefOp, ConstantOp>(op); }
};

/// The block assignment of a partitioned pipeline, read from the `pf.block`
/// attributes of the stages' ops. Fails (with a diagnostic) on an op without
/// one.
FailureOr<BlockAssignment> readStageBlocks(PipelineOp pipeline);

/// Assigns the ops of `func` to encoder blocks: an op belongs to the latest
/// block among its inputs and the parameters it reads; the embeddings join
/// block 0 and the heads the last block. A parameter's block comes from its
/// name or `pf.encoder_block`; one without a block is the heads' when the
/// first forward op reading it follows every op reading a block's parameter,
/// and otherwise places nothing (names do not say embeddings or head: a
/// plain-PyTorch export names its tables `tok.weight`). Fails (with a
/// diagnostic) when the parameters name no encoder blocks.
FailureOr<BlockAssignment> assignBlocks(func::FuncOp func);

/// One unit of pf-split-stages' partition: the embeddings, an encoder block
/// or one of its halves, the head or one of its parts.
struct StageUnit {
  std::string name;   ///< "embeddings", "block<b>", "block<b>.attn|ffn", "head", "head.transform|decoder"
  int64_t block = -1; ///< its encoder block; -1 for the embeddings and the head
};

/// The ops of an entry function grouped into the units of `grain`, in model
/// order. `ops` is a BlockAssignment whose "blocks" are the units (so
/// `ops.numBlocks` = units.size(), `ops.blockOf` maps each op to its unit,
/// `ops.kfacLinears` lists each unit's encoder linears).
struct UnitAssignment {
  BlockAssignment ops;
  SmallVector<StageUnit> units;
  int64_t numBlocks = 0; ///< encoder blocks of the model
};

/// Assigns the ops of `func` to the units of `grain`. Block: assignBlocks'
/// blocks. Ends: the ops of the embeddings (before block 0) and of the head
/// (after the last block) become units of their own. Half: besides, an op
/// reading the result of a block's first LayerNorm (pf.layer_norm,
/// pf.add_layer_norm, pf.layer_normalization) goes to the block's FFN half,
/// and one reading the head's first LayerNorm to the head's decoder. A unit
/// that holds no op is left out. Fails as assignBlocks does.
FailureOr<UnitAssignment> assignUnits(func::FuncOp func, StageGrain grain);

/// Per-unit costs (ms per micro-batch). Analytic: the ops' FLOPs and bytes
/// on `device` (a gather reading its rows, its gradient writing its table),
/// plus the work per parameter besides the passes: each micro-batch's
/// gradient accumulation and 1/`microbatches` of the AdamW update (a tied
/// parameter's pieces summed on its last reader's stage, updated on every
/// stage that reads it). Profile: each profiled block's times divided among
/// its units (the embeddings belong to block 0 and the head to the last
/// block, as pipefisher.profile_convert sums them) in proportion to their
/// analytic costs on `device`; one unit per block keeps the profile's
/// numbers.
FailureOr<::pf::sched::CostModel> buildUnitCostModel(func::FuncOp func,
                                                     const UnitAssignment &units,
                                                     CostSource cost, StringRef profilePath,
                                                     StringRef device, int64_t microbatches);

/// Per-block costs: analytic (on `device`) or from the profile at
/// `profilePath`, whose layers are the encoder blocks.
FailureOr<::pf::sched::CostModel> buildCostModel(func::FuncOp func,
                                                 const BlockAssignment &blocks,
                                                 CostSource cost, StringRef profilePath,
                                                 StringRef device);

/// Checks that `profile=` is given exactly when `cost=profile` is (the
/// option names are the passes', `pass` names it in the diagnostic).
LogicalResult verifyCostOptions(Operation *op, StringRef pass, CostSource cost,
                                StringRef profilePath);

} // namespace mlir::pf

#endif // PF_LIB_TRANSFORMS_PIPELINE_PIPELINEMODEL_H
