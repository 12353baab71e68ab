//===- RankJob.cpp - This process's place in a pipelined job --------------===//
#include "RankJob.h"

#include "pf/Support/Npz.h"

#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <string>

using namespace mlir::pf;
using namespace mlir::pf::train;
namespace drv = mlir::pf::driver;

int RankJob::fail(const llvm::Twine &message) const {
  llvm::outs().flush();
  llvm::errs() << ("pf-train: rank " + std::to_string(rank) + ": error: " + message.str() +
                   "\n");
  llvm::errs().flush();
  pfrt_comm_abort(ctx, world, 1);
  return 1;
}

llvm::Error RankJob::commError(const llvm::Twine &what) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 what + ": " + pfrt_last_error(ctx));
}

llvm::Error RankJob::sum(std::vector<double> &values) const {
  drv::NpyArray a;
  a.dtype = PFRT_F64;
  a.shape = {int64_t(values.size())};
  a.data.resize(values.size() * sizeof(double));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  pfrt_tensor t{};
  t.data = a.data.data();
  t.dtype = PFRT_F64;
  t.rank = 1;
  t.shape[0] = int64_t(values.size());
  if (pfrt_comm_all_reduce_sum(ctx, world, &t) != PFRT_OK)
    return commError("all-reducing the step's figures");
  std::memcpy(values.data(), a.data.data(), a.data.size());
  return llvm::Error::success();
}
