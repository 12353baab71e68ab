//===- CommTestMain.cpp - main() of the multi-rank communication tests -----===//
//
// Rank 0 prints GoogleTest's usual output; the other ranks print only their
// failures. The first failing assertion on any rank ends the whole job
// (pfrt_comm_abort), since its peers may be blocked on it.
//
// Ranks 1 and 2 run with their clocks 0.3 s ahead and 0.2 s behind
// (PFRT_COMM_CLOCK_SKEW), as on machines whose clocks differ, so that the
// clock tests pass only if the alignment is right: Open MPI's MPI_Wtime alone
// reads nearly the same on every rank of one machine.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <cstdio>
#include <cstdlib>

namespace pfrt_test {
pfrt_comm *jobComm = nullptr;
}

using namespace pfrt_test;

namespace {

pfrt_context *mainContext = nullptr;

class EndJobOnFailure : public ::testing::EmptyTestEventListener {
public:
  explicit EndJobOnFailure(int32_t rank) : rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (!result.failed())
      return;
    std::fprintf(stderr, "rank %d: %s:%d: failure:\n%s\nrank %d: ending the "
                 "job\n", rank, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary(), rank);
    std::fflush(stderr);
    pfrt_comm_abort(mainContext, jobComm, 1);
  }

private:
  int32_t rank;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char *worldRank = std::getenv("OMPI_COMM_WORLD_RANK");
  int jobRank = worldRank ? std::atoi(worldRank) : 0;
  if (jobRank == 1 || jobRank == 2)
    setenv("PFRT_COMM_CLOCK_SKEW", jobRank == 1 ? "0.3" : "-0.2", 1);

  mainContext = pfrt_context_create(nullptr);
  if (!mainContext ||
      pfrt_comm_create(mainContext, nullptr, &jobComm) != PFRT_OK) {
    std::fprintf(stderr, "cannot create the job's communicator: %s\n",
                 pfrt_last_error(mainContext));
    return 1;
  }
  int32_t rank = pfrt_comm_rank(jobComm);
  ::testing::TestEventListeners &listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0)
    delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new EndJobOnFailure(rank));

  int result = RUN_ALL_TESTS();

  pfrt_comm_destroy(jobComm);
  if (pfrt_comm_finalize(mainContext) != PFRT_OK) {
    std::fprintf(stderr, "rank %d: %s\n", rank, pfrt_last_error(mainContext));
    result = 1;
  }
  pfrt_context_destroy(mainContext);
  return result;
}
