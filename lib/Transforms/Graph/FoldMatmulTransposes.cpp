//===- FoldMatmulTransposes.cpp - transposes as strides of batched GEMMs ---===//
//
// Attention splits the [B, S, H·D] projections into heads with a reshape
// (free: a view) and a transpose to [B, H, S, D] (a copy), multiplies per
// (batch, head), and merges the heads back with another transpose. Read
// through the permutation, each (batch, head) matrix of the untransposed
// tensor is a BLAS matrix with a leading dimension (rows H·D apart), so
// pf.permuted_matmul multiplies the tensors as they lie.
//
//===----------------------------------------------------------------------===//
#include "MatchUtils.h"
#include "pf/Transforms/Graph/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::pf {
#define GEN_PASS_DEF_PFFOLDMATMULTRANSPOSES
#include "pf/Transforms/Graph/Passes.h.inc"
} // namespace mlir::pf

using namespace mlir;
using namespace mlir::pf;

namespace {
/// The permutation of a transpose (reversed axes when it has none).
SmallVector<int64_t> permOf(TransposeOp transpose, int64_t rank) {
  if (auto perm = transpose.getPerm())
    return SmallVector<int64_t>(*perm);
  SmallVector<int64_t> reversed;
  for (int64_t i = rank - 1; i >= 0; --i)
    reversed.push_back(i);
  return reversed;
}

/// Element strides of the logical dimensions of a row-major tensor of
/// `shape` read as transpose(tensor, perm).
SmallVector<int64_t> logicalStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> physical(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    physical[i] = physical[i + 1] * shape[i + 1];
  SmallVector<int64_t> strides;
  for (int64_t p : perm)
    strides.push_back(physical[p]);
  return strides;
}

/// The runtime's condition (pfrt_matmul_permuted): the last two logical
/// dimensions form a row-major matrix with a leading dimension, or (when
/// `allowColumnMajor`) a column-major one.
bool isBlasMatrix(ArrayRef<int64_t> dims, ArrayRef<int64_t> strides, bool allowColumnMajor) {
  size_t r = dims.size() - 2, c = dims.size() - 1;
  if (strides[c] == 1 || dims[c] == 1)
    return strides[r] >= dims[c] || dims[r] == 1;
  if (!allowColumnMajor)
    return false;
  if (strides[r] == 1 || dims[r] == 1)
    return strides[c] >= dims[r] || dims[c] == 1;
  return false;
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != int64_t(i))
      return false;
  return true;
}

/// An operand of the matmul: the transpose's input and its permutation when
/// the product can read it in place, else the operand itself.
std::pair<Value, SmallVector<int64_t>> foldOperand(Value operand, int64_t rank) {
  SmallVector<int64_t> identity = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  auto transpose = operand.getDefiningOp<TransposeOp>();
  if (!transpose)
    return {operand, identity};
  auto type = dyn_cast<RankedTensorType>(transpose.getInput().getType());
  if (!type || !type.hasStaticShape())
    return {operand, identity};
  SmallVector<int64_t> perm = permOf(transpose, rank);
  SmallVector<int64_t> dims;
  for (int64_t p : perm)
    dims.push_back(type.getDimSize(p));
  if (!isBlasMatrix(dims, logicalStrides(type.getShape(), perm), /*allowColumnMajor=*/true))
    return {operand, identity};
  return {transpose.getInput(), perm};
}

struct FoldTransposesPattern : public OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp matmul, PatternRewriter &rewriter) const override {
    auto lhsType = dyn_cast<RankedTensorType>(matmul.getLhs().getType());
    auto rhsType = dyn_cast<RankedTensorType>(matmul.getRhs().getType());
    auto type = dyn_cast<RankedTensorType>(matmul.getType());
    if (!lhsType || !rhsType || !type || !type.hasStaticShape() || !lhsType.hasStaticShape() ||
        !rhsType.hasStaticShape())
      return rewriter.notifyMatchFailure(matmul, "needs static shapes");
    int64_t rank = type.getRank();
    // Batched products of equal batches only (no broadcasting, no vectors).
    if (rank < 3 || lhsType.getRank() != rank || rhsType.getRank() != rank ||
        lhsType.getShape().drop_back(2) != rhsType.getShape().drop_back(2))
      return rewriter.notifyMatchFailure(matmul, "not a batched matmul of equal batches");
    auto [lhs, lhsPerm] = foldOperand(matmul.getLhs(), rank);
    auto [rhs, rhsPerm] = foldOperand(matmul.getRhs(), rank);

    Operation *root = matmul;
    SmallVector<int64_t> resultPerm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    if (auto user = dyn_cast_or_null<TransposeOp>(soleUser(matmul.getResult()))) {
      SmallVector<int64_t> perm = permOf(user, rank);
      // out = transpose(C, perm): C's axis perm[i] has out's stride i.
      SmallVector<int64_t> outStrides =
          logicalStrides(cast<RankedTensorType>(user.getType()).getShape(),
                         llvm::to_vector(llvm::seq<int64_t>(0, rank)));
      SmallVector<int64_t> strides(rank);
      for (auto [i, p] : llvm::enumerate(perm))
        strides[p] = outStrides[i];
      if (isBlasMatrix(type.getShape(), strides, /*allowColumnMajor=*/false)) {
        root = user;
        resultPerm = perm;
      }
    }
    if (root == matmul && lhs == matmul.getLhs() && rhs == matmul.getRhs())
      return rewriter.notifyMatchFailure(matmul, "no transpose to fold");
    auto permAttr = [&](ArrayRef<int64_t> perm) {
      return isIdentity(perm) ? DenseI64ArrayAttr() : rewriter.getDenseI64ArrayAttr(perm);
    };
    rewriter.setInsertionPoint(root);
    auto fused =
        PermutedMatMulOp::create(rewriter, matmul.getLoc(), root->getResultTypes()[0], lhs, rhs,
                                 permAttr(lhsPerm), permAttr(rhsPerm), permAttr(resultPerm));
    rewriter.replaceOp(root, fused.getResult());
    if (root != matmul)
      rewriter.eraseOp(matmul);
    return success();
  }
};

struct FoldMatmulTransposesPass
    : public mlir::pf::impl::PFFoldMatmulTransposesBase<FoldMatmulTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposesPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
