//===- OptionEnums.h - the values of pf's choice options --------*- C++ -*-===//
//
// The enumerated options of the training and pipeline passes and tools
// (optimizer, K-FAC mode, cost source; the schedule kind and K-FAC policy are
// the schedule library's own enums), each with its command-line values in one
// place. Plain C++ and llvm/Support/CommandLine.h only, so tools and the
// passes that call the schedule library share them without MLIR headers.
//
// The command-line parser of these enums lists the valid values when a value
// is not one of them (LLVM's generic parser only says "Cannot find option").
//
//===----------------------------------------------------------------------===//
#ifndef PF_TRANSFORMS_OPTIONENUMS_H
#define PF_TRANSFORMS_OPTIONENUMS_H

#include "pf/Schedule/KfacProblem.h"
#include "pf/Schedule/Pipeline.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::pf {

/// The first-order update rule of pf-add-optimizer.
enum class Optimizer { SGD, AdamW, LAMB };

/// The update rule of the K-FAC layers' parameters: their own, or the same
/// as the other parameters'.
enum class KfacOptimizer { Same, SGD, AdamW, LAMB };

/// The length of a K-FAC layer's update before the optimizer: the
/// preconditioned gradient's own (bounded by KL-clipping), or the layer
/// gradient's (grafting); auto picks the gradient's unless the K-FAC layers'
/// optimizer is SGD.
enum class KfacGraft { Auto, None, Gradient };

/// How K-FAC applies the inverse of a layer's Fisher block: the damped
/// inverse of each factor (π-damping), or the factors' eigendecompositions
/// with the damping added to the Kronecker product's eigenvalues.
enum class KfacBasis { Inverse, Eigen };

/// Which linear layers pf-insert-kfac preconditions: the encoder blocks'
/// (PipeFisher's), or those and the masked-LM head's transform (the
/// hidden-to-hidden linear before its GELU and LayerNorm; never the decoder).
enum class KfacLayers { Encoder, EncoderAndHead };

/// Whether pf-insert-kfac preconditions the LayerNorms' scale and shift:
/// not at all, by each feature's 2x2 Fisher block of (γ_j, β_j), or by the
/// blocks' diagonal.
enum class KfacLayerNorm { None, Blocks, Diagonal };

/// Which embedding tables pf-insert-kfac preconditions (a lookup is a linear
/// layer on one-hot inputs: diagonal factor A from the token counts): none,
/// the word embedding, or it and the position embedding.
enum class KfacEmbeddings { None, Word, WordAndPosition };

/// Whether pf-schedule places K-FAC work (into the bubbles, by a policy).
enum class KfacMode { Bubbles, None };

/// Where a pipelined run does its K-FAC inverses: at the end of every step,
/// or in the pipeline's bubbles at the scheduler's refresh interval.
enum class KfacWork { Step, Bubbles };

/// Where the pipeline passes take per-block costs from.
enum class CostSource { Analytic, Profile };

/// The units pf-split-stages cuts into contiguous stages: whole encoder
/// blocks with the embeddings in the first and the heads in the last (as
/// pf-partition), whole blocks with the embeddings and the head as units of
/// their own, or those with every block cut into its attention and FFN halves
/// and the head into its transform and its decoder (with the loss).
enum class StageGrain { Block, Ends, Half };

inline llvm::cl::ValuesClass optimizerValues() {
  return llvm::cl::values(clEnumValN(Optimizer::SGD, "sgd", "SGD with momentum"),
                          clEnumValN(Optimizer::AdamW, "adamw", "AdamW"),
                          clEnumValN(Optimizer::LAMB, "lamb", "LAMB (NVLAMB)"));
}

inline llvm::cl::ValuesClass kfacOptimizerValues() {
  return llvm::cl::values(
      clEnumValN(KfacOptimizer::Same, "same", "The optimizer of the other parameters"),
      clEnumValN(KfacOptimizer::SGD, "sgd", "SGD with momentum"),
      clEnumValN(KfacOptimizer::AdamW, "adamw", "AdamW"),
      clEnumValN(KfacOptimizer::LAMB, "lamb", "LAMB (NVLAMB)"));
}

inline llvm::cl::ValuesClass kfacGraftValues() {
  return llvm::cl::values(
      clEnumValN(KfacGraft::Auto, "auto",
                 "gradient, except none when the K-FAC layers' optimizer is SGD"),
      clEnumValN(KfacGraft::None, "none",
                 "The preconditioned gradient as it is (KL-clipping bounds the step)"),
      clEnumValN(KfacGraft::Gradient, "gradient",
                 "Each layer's update rescaled to its gradient's L2 norm: K-FAC's direction, "
                 "the gradient's length"));
}

inline llvm::cl::ValuesClass kfacBasisValues() {
  return llvm::cl::values(
      clEnumValN(KfacBasis::Inverse, "inverse",
                 "B⁻¹·∇W·A⁻¹ with π-damped inverses of the factors (Cholesky)"),
      clEnumValN(KfacBasis::Eigen, "eigen",
                 "In the factors' eigenbasis, damping added to the Kronecker product's "
                 "eigenvalues (syevd; as kfac-pytorch's default)"));
}

inline llvm::cl::ValuesClass kfacLayersValues() {
  return llvm::cl::values(
      clEnumValN(KfacLayers::Encoder, "encoder", "The encoder blocks' linear layers"),
      clEnumValN(KfacLayers::EncoderAndHead, "encoder-and-head",
                 "Those and the masked-LM head's transform (cls.predictions.transform.dense; "
                 "not the decoder)"));
}

inline llvm::cl::ValuesClass kfacLayerNormValues() {
  return llvm::cl::values(
      clEnumValN(KfacLayerNorm::None, "none", "LayerNorms keep the first-order optimizer"),
      clEnumValN(KfacLayerNorm::Blocks, "blocks",
                 "Each feature's 2x2 Fisher block of (scale, shift), solved damped"),
      clEnumValN(KfacLayerNorm::Diagonal, "diagonal", "Only the blocks' diagonal"));
}

inline llvm::cl::ValuesClass kfacEmbeddingsValues() {
  return llvm::cl::values(
      clEnumValN(KfacEmbeddings::None, "none", "Embeddings keep the first-order optimizer"),
      clEnumValN(KfacEmbeddings::Word, "word",
                 "The word embedding (its factors also precondition a tied decoder's share "
                 "of the gradient)"),
      clEnumValN(KfacEmbeddings::WordAndPosition, "word-and-position",
                 "The word and the position embeddings"));
}

inline llvm::cl::ValuesClass kfacModeValues() {
  return llvm::cl::values(
      clEnumValN(KfacMode::Bubbles, "bubbles", "K-FAC work placed into the bubbles by the policy"),
      clEnumValN(KfacMode::None, "none", "No K-FAC work"));
}

inline llvm::cl::ValuesClass kfacWorkValues() {
  return llvm::cl::values(
      clEnumValN(KfacWork::Step, "step", "Every step inverts every factor at its end"),
      clEnumValN(KfacWork::Bubbles, "bubbles",
                 "Inverses in the bubbles, one refresh per window of K steps (the "
                 "scheduler's K from the warm-up steps' measured durations, or refresh=K)"));
}

inline llvm::cl::ValuesClass costSourceValues() {
  return llvm::cl::values(
      clEnumValN(CostSource::Analytic, "analytic",
                 "FLOPs and bytes of the ops on the analytic device (device=)"),
      clEnumValN(CostSource::Profile, "profile",
                 "Measured per-block times from a profile JSON (profile=PATH)"));
}

inline llvm::cl::ValuesClass stageGrainValues() {
  return llvm::cl::values(
      clEnumValN(StageGrain::Block, "block",
                 "Whole encoder blocks; the embeddings join the first, the heads the last"),
      clEnumValN(StageGrain::Ends, "ends",
                 "Whole encoder blocks, the embeddings and the masked-LM head as units of their "
                 "own"),
      clEnumValN(StageGrain::Half, "half",
                 "The embeddings, each block's attention and FFN halves (cut after the block's "
                 "first LayerNorm), the head's transform and its decoder with the loss"));
}

/// The schedule library's names (sched::parseScheduleKind accepts the same;
/// a unit test checks that they agree).
inline llvm::cl::ValuesClass scheduleKindValues() {
  using ::pf::sched::ScheduleKind;
  return llvm::cl::values(
      clEnumValN(ScheduleKind::GPipe, "gpipe", "GPipe"),
      clEnumValN(ScheduleKind::OneFOneB, "1f1b", "1F1B (PipeDream-flush)"),
      clEnumValN(ScheduleKind::Interleaved, "interleaved", "Interleaved 1F1B (chunks per device)"),
      clEnumValN(ScheduleKind::Chimera, "chimera",
                 "Chimera (two pipelines in opposite directions)"),
      clEnumValN(ScheduleKind::ZBH1, "zb-h1", "Zero-bubble ZB-H1"),
      clEnumValN(ScheduleKind::ZBH2, "zb-h2",
                 "Zero-bubble ZB-H2 (more warm-up forwards, W in the tail)"),
      clEnumValN(ScheduleKind::ZBV, "zb-v", "Zero-bubble ZB-V (two stages per device in a V)"),
      clEnumValN(ScheduleKind::DualPipe, "dualpipe",
                 "DualPipe (two pipelines in opposite directions, split "
                 "backwards)"),
      clEnumValN(ScheduleKind::DualPipeV, "dualpipev", "DualPipeV (DualPipe folded into a V)"));
}

/// The K-FAC placement policies (sched::parsePolicy accepts the same).
inline llvm::cl::ValuesClass kfacPolicyValues() {
  using ::pf::sched::Policy;
  return llvm::cl::values(clEnumValN(Policy::PF, "pf", "pf's list scheduler"),
                          clEnumValN(Policy::PipeFisher, "pipefisher",
                                     "The reference greedy of PipeFisher"));
}

/// llvm::cl's generic enum parser, with an error that names the valid values.
template <typename DataType>
class ChoiceParser : public llvm::cl::generic_parser_base {
protected:
  class OptionInfo : public GenericOptionInfo {
  public:
    OptionInfo(llvm::StringRef name, DataType v, llvm::StringRef helpStr)
        : GenericOptionInfo(name, helpStr), V(v) {}
    llvm::cl::OptionValue<DataType> V;
  };
  // `Values` as in llvm::cl::parser: MLIR's pass option parser reads it.
  llvm::SmallVector<OptionInfo, 8> Values;

public:
  ChoiceParser(llvm::cl::Option &option) : generic_parser_base(option) {}
  using parser_data_type = DataType;

  unsigned getNumOptions() const override { return unsigned(Values.size()); }
  llvm::StringRef getOption(unsigned n) const override { return Values[n].Name; }
  llvm::StringRef getDescription(unsigned n) const override { return Values[n].HelpStr; }
  const llvm::cl::GenericOptionValue &getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true on error.
  bool parse(llvm::cl::Option &option, llvm::StringRef argName, llvm::StringRef arg,
             DataType &value) {
    llvm::StringRef given = Owner.hasArgStr() ? arg : argName;
    for (const OptionInfo &info : Values)
      if (info.Name == given) {
        value = info.V.getValue();
        return false;
      }
    // "optimizer must be sgd, adamw or lamb, got 'adagrad'"
    std::string valid;
    for (auto [i, info] : llvm::enumerate(Values))
      valid += (i == 0 ? "" : i + 1 == Values.size() ? " or " : ", ") + info.Name.str();
    return option.error(option.ArgStr + " must be " + valid + ", got '" + given + "'");
  }

  template <class DT>
  void addLiteralOption(llvm::StringRef name, const DT &v, llvm::StringRef helpStr) {
    Values.push_back(OptionInfo(name, static_cast<DataType>(v), helpStr));
    AddLiteralOption(Owner, name);
  }

  void removeLiteralOption(llvm::StringRef name) {
    Values.erase(Values.begin() + findOption(name));
  }
};

/// The name of `value` among the values of an enumerated option's parser.
template <typename DataType>
llvm::StringRef choiceName(const llvm::cl::generic_parser_base &parser, DataType value) {
  for (unsigned i = 0, e = parser.getNumOptions(); i < e; ++i)
    if (static_cast<const llvm::cl::OptionValue<DataType> &>(parser.getOptionValue(i))
            .getValue() == value)
      return parser.getOption(i);
  return "";
}

} // namespace mlir::pf

/// Makes llvm::cl parse the enum `Type` with ChoiceParser (at global scope,
/// before the first option of `Type`).
#define PF_CHOICE_PARSER(Type)                                                                \
  namespace llvm::cl {                                                                        \
  template <> class parser<Type> : public ::mlir::pf::ChoiceParser<Type> {                    \
  public:                                                                                     \
    using ::mlir::pf::ChoiceParser<Type>::ChoiceParser;                                       \
  };                                                                                          \
  }

PF_CHOICE_PARSER(::mlir::pf::Optimizer)
PF_CHOICE_PARSER(::mlir::pf::KfacOptimizer)
PF_CHOICE_PARSER(::mlir::pf::KfacGraft)
PF_CHOICE_PARSER(::mlir::pf::KfacBasis)
PF_CHOICE_PARSER(::mlir::pf::KfacLayers)
PF_CHOICE_PARSER(::mlir::pf::KfacLayerNorm)
PF_CHOICE_PARSER(::mlir::pf::KfacEmbeddings)
PF_CHOICE_PARSER(::mlir::pf::KfacMode)
PF_CHOICE_PARSER(::mlir::pf::CostSource)
PF_CHOICE_PARSER(::mlir::pf::StageGrain)
PF_CHOICE_PARSER(::mlir::pf::KfacWork)
PF_CHOICE_PARSER(::pf::sched::ScheduleKind)
PF_CHOICE_PARSER(::pf::sched::Policy)

#endif // PF_TRANSFORMS_OPTIONENUMS_H
