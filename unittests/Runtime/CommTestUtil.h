//===- CommTestUtil.h - Fixture of the multi-rank communication tests -*- C++ -*-===//
//
// PFCommTests runs under mpirun (ctest starts it with -np 2 and -np 4):
// every rank runs every test, and each test gets a fresh communicator of
// the whole job, so no message of one test can match a receive of another.
// CommTestMain.cpp creates the job's first communicator (MPI_Init) and ends
// the job as soon as any rank fails an assertion, so that the other ranks
// do not wait for a message that will never come.
//
//===----------------------------------------------------------------------===//

#ifndef PF_UNITTESTS_RUNTIME_COMMTESTUTIL_H
#define PF_UNITTESTS_RUNTIME_COMMTESTUTIL_H

#include "RuntimeTestUtil.h"

#include <cstdlib>
#include <string>

namespace pfrt_test {

/// The communicator of CommTestMain.cpp (used to end the job on failure).
extern pfrt_comm *jobComm;

class CommTest : public RuntimeTest {
protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    // PFRT_TEST_COMM_BACKEND=mpi-staged (ctest's PFCommTests.staged.np2)
    // runs every test through host buffers, as MPI moves a CUDA context's
    // tensors.
    pfrt_comm_options options;
    pfrt_comm_options_init(&options);
    const char *backend = std::getenv("PFRT_TEST_COMM_BACKEND");
    if (backend && std::string(backend) == "mpi-staged")
      options.backend = PFRT_COMM_MPI_STAGED;
    ASSERT_EQ(pfrt_comm_create(ctx, &options, &comm), PFRT_OK) << pfrt_last_error(ctx);
    rank = pfrt_comm_rank(comm);
    size = pfrt_comm_size(comm);
  }
  void TearDown() override {
    pfrt_comm_destroy(comm);
    RuntimeTest::TearDown();
  }

  /// Asserts that the last failure's message contains `part`.
  void messageHas(const std::string &part) {
    std::string message = pfrt_last_error(ctx);
    EXPECT_NE(message.find(part), std::string::npos)
        << "'" << part << "' not in: " << message;
  }

  pfrt_comm *comm = nullptr;
  int32_t rank = -1;
  int32_t size = 0;
};

} // namespace pfrt_test

#endif // PF_UNITTESTS_RUNTIME_COMMTESTUTIL_H
