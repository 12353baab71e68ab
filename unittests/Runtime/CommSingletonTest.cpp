//===- CommSingletonTest.cpp - pfrt_comm_* in a process without mpirun -----===//
//
// ctest runs each test in its own process (gtest_discover_tests), started
// without mpirun: the runtime must not start MPI before the first
// communicator, and then Open MPI's singleton mode makes a job of one rank.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <string>

using namespace pfrt_test;

namespace {

bool mpiInitialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

class CommSingletonTest : public RuntimeTest {
protected:
  void messageHas(const std::string &part) {
    std::string message = pfrt_last_error(ctx);
    EXPECT_NE(message.find(part), std::string::npos)
        << "'" << part << "' not in: " << message;
  }
};

TEST_F(CommSingletonTest, KernelsDoNotStartMpiAndTheFirstCommunicatorDoes) {
  Tensor<float> a({4}, {1, 2, 3, 4}), out({4});
  pfrt_tensor ta = a.desc(), to = out.desc();
  ok(pfrt_add(ctx, &ta, &ta, &to));
  EXPECT_FALSE(mpiInitialized());

  pfrt_comm *comm = nullptr;
  ok(pfrt_comm_create(ctx, nullptr, &comm));
  EXPECT_TRUE(mpiInitialized());
  EXPECT_EQ(pfrt_comm_rank(comm), 0);
  EXPECT_EQ(pfrt_comm_size(comm), 1);
  pfrt_comm_destroy(comm);
  // MPI stays up for the next communicator.
  ok(pfrt_comm_create(ctx, nullptr, &comm));
  EXPECT_EQ(pfrt_comm_size(comm), 1);
  pfrt_comm_destroy(comm);
}

TEST_F(CommSingletonTest, OneRankOperations) {
  pfrt_comm *comm = nullptr;
  ok(pfrt_comm_create(ctx, nullptr, &comm));
  Tensor<float> x({3}, {1.5f, -2, 3});
  pfrt_tensor d = x.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &d));
  EXPECT_EQ(x.data, (std::vector<float>{1.5f, -2, 3}));
  ok(pfrt_comm_barrier(ctx, comm));
  double t0 = 0, t1 = 0;
  ok(pfrt_comm_wall_time(ctx, comm, &t0));
  ok(pfrt_comm_align_clock(ctx, comm));
  ok(pfrt_comm_wall_time(ctx, comm, &t1));
  EXPECT_GE(t1, t0);
  // A one-rank job has no peer.
  fails(pfrt_comm_send(ctx, comm, &d, 0, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  messageHas("is this rank");
  fails(pfrt_comm_recv(ctx, comm, &d, 1, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_recv");
  messageHas("out of range for a communicator of 1 ranks");
  int32_t self = 0;
  pfrt_comm *group = nullptr;
  ok(pfrt_comm_create_group(ctx, comm, &self, 1, &group));
  EXPECT_EQ(pfrt_comm_size(group), 1);
  ok(pfrt_comm_all_reduce_sum(ctx, group, &d));
  pfrt_comm_destroy(group);
  pfrt_comm_destroy(comm);
}

TEST_F(CommSingletonTest, BadOptionsAndBackendsWithoutMpi) {
  pfrt_comm *comm = nullptr;
  pfrt_comm_options options;
  pfrt_comm_options_init(&options);
  EXPECT_EQ(options.abi_version, PFRT_ABI_VERSION);
  EXPECT_EQ(options.backend, PFRT_COMM_MPI);

  // NCCL needs a CUDA context (this test's is a CPU one), or is not built.
  options.backend = PFRT_COMM_NCCL;
  fails(pfrt_comm_create(ctx, &options, &comm), PFRT_UNSUPPORTED,
        "pfrt_comm_create");
  const std::string nccl = pfrt_last_error(ctx);
  EXPECT_TRUE(nccl.find("NCCL communication backend is not built") != std::string::npos ||
              nccl.find("NCCL moves CUDA device memory: create the communicator on a CUDA "
                        "context (this one is cpu)") != std::string::npos)
      << nccl;
  options.backend = 7;
  fails(pfrt_comm_create(ctx, &options, &comm), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_create");
  messageHas("unknown communication backend 7");
  pfrt_comm_options_init(&options);
  options.abi_version = PFRT_ABI_VERSION + 1;
  fails(pfrt_comm_create(ctx, &options, &comm), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_create");
  messageHas("ABI version");
  fails(pfrt_comm_create(ctx, nullptr, nullptr), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_create");
  EXPECT_EQ(pfrt_comm_create(nullptr, nullptr, &comm), PFRT_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  // None of these reached MPI.
  EXPECT_FALSE(mpiInitialized());
  pfrt_comm_destroy(nullptr);
}

TEST_F(CommSingletonTest, FinalizeEndsMpiForGood) {
  // Without a communicator there is nothing to finalize.
  ok(pfrt_comm_finalize(ctx));
  EXPECT_FALSE(mpiInitialized());

  pfrt_comm *comm = nullptr;
  ok(pfrt_comm_create(ctx, nullptr, &comm));
  ok(pfrt_comm_finalize(ctx));
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_TRUE(finalized);
  ok(pfrt_comm_finalize(ctx)); // a second call is a no-op
  pfrt_comm *again = nullptr;
  fails(pfrt_comm_create(ctx, nullptr, &again), PFRT_INTERNAL,
        "pfrt_comm_create");
  messageHas("already finalized");
  pfrt_comm_destroy(comm); // still allowed
}

} // namespace
