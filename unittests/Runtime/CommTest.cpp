//===- CommTest.cpp - pfrt_comm_* across ranks (run under mpirun) ----------===//
//
// Every rank runs every test on its own communicator (CommTestUtil.h). The
// expected values are computed locally: each rank can regenerate what any
// other rank sent or contributed, from the other rank's number.
//
//===----------------------------------------------------------------------===//

#include <limits>
#include "CommTestUtil.h"
#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

using namespace pfrt_test;

namespace {

/// How far apart the aligned clocks of two ranks may read: the alignment
/// is good to microseconds, but a rank of an oversubscribed job can be
/// descheduled between two readings. Ten times smaller than the skews of
/// CommTestMain.cpp, so a broken alignment still fails.
constexpr double kClockTolerance = 0.02;

/// What `from` sends in the point-to-point tests: distinct per rank and
/// element, and exact in f32.
template <class T> Tensor<T> payload(Dims dims, int32_t from) {
  Tensor<T> t(std::move(dims));
  for (int64_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<T>(1000 * (from + 1) + i);
  return t;
}

/// Rank r's contribution to an all-reduce: random, seeded by r.
template <class T> Tensor<T> contribution(Dims dims, int32_t r) {
  if constexpr (std::is_integral_v<T>) {
    Tensor<T> t(std::move(dims));
    for (int64_t i = 0; i < t.size(); ++i)
      t[i] = static_cast<T>((r + 1) * 7919 * (i + 1) % 100003 - 50000);
    return t;
  } else {
    return random<T>(std::move(dims), -1.0, 1.0, 100 + r);
  }
}

/// A hash of the bits of `t`, small enough that a sum over ranks of it
/// cannot overflow.
template <class T> int64_t bitsHash(const Tensor<T> &t) {
  uint64_t h = 1469598103934665603ull;
  const auto *bytes = reinterpret_cast<const unsigned char *>(t.data.data());
  for (size_t i = 0; i < t.data.size() * sizeof(T); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return static_cast<int64_t>(h % (1u << 20));
}

TEST_F(CommTest, RanksAreDistinctAndCoverTheJob) {
  const char *expected = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(expected, nullptr) << "PFCommTests runs under mpirun";
  EXPECT_EQ(size, std::atoi(expected));
  ASSERT_GE(rank, 0);
  ASSERT_LT(rank, size);
  EXPECT_GE(pfrt_comm_max_tag(comm), 32767);
  // The sums of r and r^2 over the ranks are those of 0..size-1 only if
  // the ranks are a permutation of it.
  Tensor<int64_t> sums({2}, {rank, int64_t(rank) * rank});
  pfrt_tensor d = sums.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &d));
  int64_t n = size;
  EXPECT_EQ(sums[0], n * (n - 1) / 2);
  EXPECT_EQ(sums[1], (n - 1) * n * (2 * n - 1) / 6);
}

TEST_F(CommTest, LocalRanksFollowTheLaunchersOnOneHost) {
  // mpirun starts every rank on this machine: one host, ranks in order, as
  // Open MPI numbers them (OMPI_COMM_WORLD_LOCAL_RANK).
  int32_t localRank = -1, localSize = -1;
  ok(pfrt_comm_local_rank(ctx, comm, &localRank, &localSize));
  EXPECT_EQ(localSize, size);
  EXPECT_EQ(localRank, rank);
  if (const char *launcher = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    EXPECT_EQ(localRank, std::atoi(launcher));
  EXPECT_EQ(pfrt_comm_local_rank(ctx, comm, nullptr, &localSize), PFRT_INVALID_ARGUMENT);
}

TEST_F(CommTest, SendRecvF32AndI64BetweenPairs) {
  // Pairs (0, 1), (2, 3), ...: the even rank sends f32 and i64 tensors, the
  // odd one checks them and answers with its own.
  int32_t partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (partner >= size)
    return; // an odd job size leaves the last rank out
  const Dims matrixDims = {3, 5}, vectorDims = {7};
  auto sendPair = [&](int32_t self) {
    auto matrix = payload<float>(matrixDims, self);
    auto vector = payload<int64_t>(vectorDims, self);
    Tensor<double> scalar(Dims{}, {0.5 + self});
    Tensor<float> empty(Dims{0, 4});
    pfrt_tensor m = matrix.desc(), v = vector.desc(), s = scalar.desc(),
                e = empty.desc();
    ok(pfrt_comm_send(ctx, comm, &m, partner, 1));
    ok(pfrt_comm_send(ctx, comm, &v, partner, 2));
    ok(pfrt_comm_send(ctx, comm, &s, partner, 3));
    ok(pfrt_comm_send(ctx, comm, &e, partner, 4));
  };
  auto receivePair = [&]() {
    Tensor<float> matrix(matrixDims);
    Tensor<int64_t> vector(vectorDims);
    Tensor<double> scalar(Dims{});
    Tensor<float> empty(Dims{0, 4});
    pfrt_tensor m = matrix.desc(), v = vector.desc(), s = scalar.desc(),
                e = empty.desc();
    ok(pfrt_comm_recv(ctx, comm, &m, partner, 1));
    ok(pfrt_comm_recv(ctx, comm, &v, partner, 2));
    ok(pfrt_comm_recv(ctx, comm, &s, partner, 3));
    ok(pfrt_comm_recv(ctx, comm, &e, partner, 4));
    EXPECT_EQ(matrix.data, payload<float>(matrixDims, partner).data);
    EXPECT_EQ(vector.data, payload<int64_t>(vectorDims, partner).data);
    EXPECT_EQ(scalar[0], 0.5 + partner);
  };
  if (rank % 2 == 0) {
    sendPair(rank);
    receivePair();
  } else {
    receivePair();
    sendPair(rank);
  }
}

TEST_F(CommTest, RingPassesEveryRanksTensorToItsSuccessor) {
  int32_t next = (rank + 1) % size, previous = (rank + size - 1) % size;
  auto mine = payload<float>({64}, rank);
  Tensor<float> received({64});
  pfrt_tensor out = mine.desc(), in = received.desc();
  int64_t recvRequest = 0;
  ok(pfrt_comm_irecv(ctx, comm, &in, previous, 7, &recvRequest));
  ok(pfrt_comm_send(ctx, comm, &out, next, 7));
  ok(pfrt_comm_wait(ctx, comm, recvRequest));
  EXPECT_EQ(received.data, payload<float>({64}, previous).data);

  // A token around the ring with blocking calls: each rank adds its rank.
  Tensor<int64_t> token({1}, {0});
  pfrt_tensor t = token.desc();
  if (rank == 0) {
    ok(pfrt_comm_send(ctx, comm, &t, next, 8));
    ok(pfrt_comm_recv(ctx, comm, &t, previous, 8));
    EXPECT_EQ(token[0], int64_t(size) * (size - 1) / 2);
  } else {
    ok(pfrt_comm_recv(ctx, comm, &t, previous, 8));
    token[0] += rank;
    ok(pfrt_comm_send(ctx, comm, &t, next, 8));
  }
}

TEST_F(CommTest, NonBlockingBothWaysOverlapsAndKeepsOrder) {
  int32_t partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (partner >= size)
    return;
  // 4 MB each way: past Open MPI's eager limit, so both sends can complete
  // only because both receives were posted before either wait.
  const Dims big = {1 << 20};
  auto mine = payload<float>(big, rank);
  Tensor<float> theirs(big);
  pfrt_tensor out = mine.desc(), in = theirs.desc();
  int64_t requests[5] = {};
  ok(pfrt_comm_isend(ctx, comm, &out, partner, 11, &requests[0]));
  ok(pfrt_comm_irecv(ctx, comm, &in, partner, 11, &requests[1]));
  // Three small messages with one tag arrive in the order they were sent.
  std::vector<Tensor<int32_t>> sent, got;
  for (int i = 0; i < 3; ++i) {
    sent.emplace_back(Dims{2}, std::vector<int32_t>{rank, i});
    got.emplace_back(Dims{2});
  }
  std::vector<pfrt_tensor> sentDesc, gotDesc;
  for (int i = 0; i < 3; ++i) {
    sentDesc.push_back(sent[i].desc());
    gotDesc.push_back(got[i].desc());
  }
  std::vector<int64_t> orderRequests(6);
  for (int i = 0; i < 3; ++i) {
    ok(pfrt_comm_irecv(ctx, comm, &gotDesc[i], partner, 12,
                       &orderRequests[i]));
    ok(pfrt_comm_isend(ctx, comm, &sentDesc[i], partner, 12,
                       &orderRequests[3 + i]));
  }
  // Work between posting and waiting: the point of non-blocking calls.
  double busy = 0;
  for (int i = 0; i < 100000; ++i)
    busy += i * 1e-9;
  EXPECT_GT(busy, 0);
  ok(pfrt_comm_wait_all(ctx, comm, requests, 2));
  ok(pfrt_comm_wait_all(ctx, comm, orderRequests.data(), 6));
  EXPECT_EQ(theirs.data, payload<float>(big, partner).data);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(got[i].data, (std::vector<int32_t>{partner, i}));
  // A request is released by its wait.
  fails(pfrt_comm_wait(ctx, comm, requests[0]), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_wait");
  messageHas("not pending");
}

template <class T>
void checkAllReduce(pfrt_context *ctx, pfrt_comm *comm, int32_t rank,
                    int32_t size) {
  const Dims dims = {5, 33};
  auto mine = contribution<T>(dims, rank);
  pfrt_tensor d = mine.desc();
  ASSERT_EQ(pfrt_comm_all_reduce_sum(ctx, comm, &d), PFRT_OK)
      << pfrt_last_error(ctx);
  // Sum in rank order in T (the order of a + b with two ranks) and in
  // double (the reference for more ranks, whose association MPI chooses).
  Tensor<T> ordered = contribution<T>(dims, 0);
  std::vector<double> exact(ordered.data.begin(), ordered.data.end());
  for (int32_t r = 1; r < size; ++r) {
    auto other = contribution<T>(dims, r);
    for (int64_t i = 0; i < ordered.size(); ++i) {
      ordered[i] += other[i];
      exact[i] += other[i];
    }
  }
  if (std::is_integral_v<T> || size == 2) {
    EXPECT_EQ(mine.data, ordered.data) << dtypeOf<T>();
  } else {
    double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-13;
    EXPECT_LE(maxAbsDiff(mine.data, exact), tolerance * size);
  }
  // Every rank holds the same bits: the sum of the hashes is size times
  // each rank's own hash only if they are all equal.
  Tensor<int64_t> hash({1}, {bitsHash(mine)});
  int64_t own = hash[0];
  pfrt_tensor h = hash.desc();
  ASSERT_EQ(pfrt_comm_all_reduce_sum(ctx, comm, &h), PFRT_OK);
  EXPECT_EQ(hash[0], own * size) << "ranks hold different sums";
}

TEST_F(CommTest, AllReduceSumMatchesTheLocalSum) {
  checkAllReduce<float>(ctx, comm, rank, size);
  checkAllReduce<double>(ctx, comm, rank, size);
  checkAllReduce<int32_t>(ctx, comm, rank, size);
  checkAllReduce<int64_t>(ctx, comm, rank, size);
  // A large f32 gradient (Open MPI switches algorithms with the size).
  Tensor<float> ones({1 << 18});
  for (auto &v : ones.data)
    v = 0.25f * (rank + 1);
  pfrt_tensor d = ones.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &d));
  float expected = 0.25f * size * (size + 1) / 2;
  for (float v : ones.data)
    ASSERT_EQ(v, expected);
  // No elements on every rank is a valid, empty sum.
  Tensor<double> none({0});
  pfrt_tensor n = none.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &n));
}

TEST_F(CommTest, AllReduceDisagreementIsAnErrorOnEveryRank) {
  // Rank 0 has 4 elements, the others 5: nobody hangs, everybody fails.
  Tensor<float> t({rank == 0 ? 4 : 5});
  pfrt_tensor d = t.desc();
  fails(pfrt_comm_all_reduce_sum(ctx, comm, &d), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_all_reduce_sum");
  messageHas("disagree");
  messageHas("from 4 to 5");
  // Same count, different dtypes.
  Tensor<float> f({3});
  Tensor<double> g({3});
  pfrt_tensor mixed = rank == 0 ? f.desc() : g.desc();
  fails(pfrt_comm_all_reduce_sum(ctx, comm, &mixed), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_all_reduce_sum");
  messageHas("dtypes from f32 to f64");
  // Unsupported dtypes fail before any communication, on every rank.
  Tensor<uint8_t> flags({3});
  pfrt_tensor b = flags.desc();
  fails(pfrt_comm_all_reduce_sum(ctx, comm, &b), PFRT_UNSUPPORTED,
        "pfrt_comm_all_reduce_sum");
  // The communicator still works afterwards.
  Tensor<int32_t> one({1}, {1});
  pfrt_tensor o = one.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &o));
  EXPECT_EQ(one[0], size);
}

TEST_F(CommTest, BroadcastGivesEveryRankTheRootsBits) {
  // From every root: each rank ends with the root's contribution, bit for
  // bit (a NaN and a -0.0 included, which a sum with zeros would change).
  for (int32_t root = 0; root < size; ++root) {
    Tensor<float> t = contribution<float>({7, 5}, rank);
    Tensor<float> expected = contribution<float>({7, 5}, root);
    t[0] = expected[0] = std::numeric_limits<float>::quiet_NaN();
    expected[1] = -0.0f;
    if (rank == root)
      t[1] = -0.0f;
    pfrt_tensor d = t.desc();
    ok(pfrt_comm_broadcast(ctx, comm, &d, root));
    EXPECT_EQ(bitsHash(t), bitsHash(expected)) << "root " << root;
    Tensor<int64_t> ids({3}, {rank, rank, rank});
    pfrt_tensor i = ids.desc();
    ok(pfrt_comm_broadcast(ctx, comm, &i, root));
    EXPECT_EQ(ids.data, (std::vector<int64_t>{root, root, root}));
  }
}

TEST_F(CommTest, BroadcastDisagreementAndBadRootAreErrors) {
  // Rank 0 has 4 elements, the others 5: nobody hangs, everybody fails.
  Tensor<float> t({rank == 0 ? 4 : 5});
  pfrt_tensor d = t.desc();
  fails(pfrt_comm_broadcast(ctx, comm, &d, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_broadcast");
  messageHas("disagree");
  // A root outside the communicator fails before any communication.
  Tensor<float> u({2});
  pfrt_tensor e = u.desc();
  fails(pfrt_comm_broadcast(ctx, comm, &e, size), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_broadcast");
  messageHas("root");
  // The communicator still works afterwards.
  Tensor<int32_t> one({1}, {rank + 1});
  pfrt_tensor o = one.desc();
  ok(pfrt_comm_broadcast(ctx, comm, &o, size - 1));
  EXPECT_EQ(one[0], size);
}

/// A sparse tensor of `rows` x `cols`: every third row non-zero, and one
/// row holding only a -0.0 (a non-zero bit: sent).
template <class T> Tensor<T> sparseRows(int64_t rows, int64_t cols, int32_t seed) {
  Tensor<T> dense = random<T>({rows, cols}, -1.0, 1.0, seed);
  Tensor<T> t({rows, cols});
  for (int64_t r = 0; r < rows; r += 3)
    for (int64_t c = 0; c < cols; ++c)
      t[r * cols + c] = dense[r * cols + c];
  t[1 * cols] = T(-0.0);
  return t;
}

/// Ranks in pairs (2k sends to 2k + 1; an odd last rank sits out).
template <class T> void checkRowSparseSum(pfrt_context *ctx, pfrt_comm *comm, int32_t rank,
                                          int32_t size, int32_t tag) {
  const int64_t rows = 37, cols = 5;
  const bool sender = rank % 2 == 0;
  if (sender && rank + 1 >= size)
    return;
  Tensor<T> a = sparseRows<T>(rows, cols, 7 + rank / 2);
  if (sender) {
    // Twice (the receiver adds out of place, then in place); the first time
    // the tensor changes before the wait: the rows were copied.
    for (int k = 0; k < 2; ++k) {
      Tensor<T> sent = a;
      pfrt_tensor d = sent.desc();
      int64_t request = 0;
      ASSERT_EQ(pfrt_comm_isend_rows(ctx, comm, &d, rank + 1, tag, &request), PFRT_OK)
          << pfrt_last_error(ctx);
      if (k == 0)
        std::fill(sent.data.begin(), sent.data.end(), T(9));
      ASSERT_EQ(pfrt_comm_wait(ctx, comm, request), PFRT_OK) << pfrt_last_error(ctx);
    }
    return;
  }
  Tensor<T> b = random<T>({rows, cols}, -1.0, 1.0, 50 + rank);
  b[2 * cols] = T(-0.0); // -0 + (+0, row 2 not sent) = +0
  b[1 * cols] = T(-0.0); // -0 + -0 (sent) = -0
  b[2] = std::numeric_limits<T>::infinity();
  Tensor<T> dense = b, out({rows, cols});
  for (int64_t i = 0; i < dense.size(); ++i)
    dense[i] = b[i] + a[i];
  pfrt_tensor x = b.desc(), o = out.desc();
  ASSERT_EQ(pfrt_comm_recv_add_rows(ctx, comm, &x, &o, rank - 1, tag), PFRT_OK)
      << pfrt_last_error(ctx);
  EXPECT_EQ(bitsHash(out), bitsHash(dense)) << dtypeOf<T>();
  EXPECT_EQ(std::memcmp(out.data.data(), dense.data.data(), dense.data.size() * sizeof(T)), 0);
  EXPECT_FALSE(std::signbit(out[2 * cols]));
  EXPECT_TRUE(std::signbit(out[1 * cols]));
  // In place (out = x), as the root's sum takes its piece's bytes.
  ASSERT_EQ(pfrt_comm_recv_add_rows(ctx, comm, &x, &x, rank - 1, tag), PFRT_OK)
      << pfrt_last_error(ctx);
  EXPECT_EQ(std::memcmp(b.data.data(), dense.data.data(), dense.data.size() * sizeof(T)), 0);
}

TEST_F(CommTest, RowSparseSumIsBitwiseTheDenseSum) {
  checkRowSparseSum<float>(ctx, comm, rank, size, 11);
  checkRowSparseSum<double>(ctx, comm, rank, size, 12);
}

TEST_F(CommTest, RowSparseSumOfNoRowsAndItsErrors) {
  const bool sender = rank % 2 == 0;
  if (sender && rank + 1 >= size)
    return;
  Tensor<float> zeros({4, 3});
  if (sender) {
    // All zero: no row goes, twice.
    pfrt_tensor d = zeros.desc();
    for (int k = 0; k < 2; ++k) {
      int64_t request = 0;
      ok(pfrt_comm_isend_rows(ctx, comm, &d, rank + 1, 13, &request));
      ok(pfrt_comm_wait(ctx, comm, request));
    }
    Tensor<int64_t> ints({4});
    pfrt_tensor i = ints.desc();
    int64_t request = 0;
    fails(pfrt_comm_isend_rows(ctx, comm, &i, rank + 1, 13, &request), PFRT_UNSUPPORTED,
          "pfrt_comm_isend_rows");
    return;
  }
  // x + 0.0 everywhere: a -0.0 becomes +0.0, as the dense sum.
  Tensor<float> b({4, 3}, {-0.0f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  pfrt_tensor x = b.desc();
  ok(pfrt_comm_recv_add_rows(ctx, comm, &x, &x, rank - 1, 13));
  EXPECT_FALSE(std::signbit(b[0]));
  EXPECT_EQ(b[11], 11.0f);
  // Rows of another width than the sender's: an error naming both.
  Tensor<float> wide({4, 6});
  pfrt_tensor w = wide.desc();
  fails(pfrt_comm_recv_add_rows(ctx, comm, &w, &w, rank - 1, 13), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_recv_add_rows");
  messageHas("rows of 12 bytes");
  messageHas("rows of 24 bytes");
  // out must be x's type.
  Tensor<float> other({4, 2});
  pfrt_tensor t = other.desc();
  fails(pfrt_comm_recv_add_rows(ctx, comm, &x, &t, rank - 1, 13), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_recv_add_rows");
}

TEST_F(CommTest, SubgroupAllReduceAndSendRecv) {
  // Chimera's replica pairs: rank r with size-1-r (with an odd size the
  // middle rank is a group of one). The list order gives the group ranks.
  int32_t mirror = size - 1 - rank;
  std::vector<int32_t> members;
  if (mirror == rank)
    members = {rank};
  else
    members = {std::max(rank, mirror), std::min(rank, mirror)};
  pfrt_comm *pair = nullptr;
  ok(pfrt_comm_create_group(ctx, comm, members.data(),
                            static_cast<int32_t>(members.size()), &pair));
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pfrt_comm_size(pair), static_cast<int32_t>(members.size()));
  EXPECT_EQ(pfrt_comm_rank(pair), rank == members[0] ? 0 : 1);

  Tensor<double> value({2}, {double(rank + 1), 1.0});
  pfrt_tensor v = value.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, pair, &v));
  EXPECT_EQ(value[0], mirror == rank ? rank + 1 : double(size + 1));
  EXPECT_EQ(value[1], double(members.size()));

  if (members.size() == 2) {
    // Peers are group ranks: 1 - own group rank is the mirror.
    int32_t peer = 1 - pfrt_comm_rank(pair);
    Tensor<int64_t> mine({1}, {rank}), theirs({1});
    pfrt_tensor m = mine.desc(), t = theirs.desc();
    int64_t requests[2];
    ok(pfrt_comm_irecv(ctx, pair, &t, peer, 0, &requests[0]));
    ok(pfrt_comm_isend(ctx, pair, &m, peer, 0, &requests[1]));
    ok(pfrt_comm_wait_all(ctx, pair, requests, 2));
    EXPECT_EQ(theirs[0], mirror);
  }
  // Re-aligned against its own rank 0 (with np 2, world rank 1, whose own
  // clock is skewed), the group still reads the job's timeline.
  ok(pfrt_comm_align_clock(ctx, pair));
  double before = 0, inGroup = 0, after = 0;
  ok(pfrt_comm_wall_time(ctx, comm, &before));
  ok(pfrt_comm_wall_time(ctx, pair, &inGroup));
  ok(pfrt_comm_wall_time(ctx, comm, &after));
  EXPECT_GE(inGroup, before - kClockTolerance);
  EXPECT_LE(inGroup, after + kClockTolerance);
  pfrt_comm_destroy(pair);

  // A group of the first three ranks while the others skip it (a group is
  // collective over its members only).
  if (size >= 4 && rank < 3) {
    int32_t first3[3] = {0, 1, 2};
    pfrt_comm *three = nullptr;
    ok(pfrt_comm_create_group(ctx, comm, first3, 3, &three));
    Tensor<int32_t> x({1}, {rank});
    pfrt_tensor xd = x.desc();
    ok(pfrt_comm_all_reduce_sum(ctx, three, &xd));
    EXPECT_EQ(x[0], 0 + 1 + 2);
    pfrt_comm_destroy(three);
  }
  ok(pfrt_comm_barrier(ctx, comm));
}

TEST_F(CommTest, GroupArgumentsAreCheckedLocally) {
  int32_t others[1] = {(rank + 1) % size};
  pfrt_comm *group = nullptr;
  fails(pfrt_comm_create_group(ctx, comm, others, 1, &group),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_create_group");
  messageHas("not in ranks");
  EXPECT_EQ(group, nullptr);
  int32_t twice[2] = {rank, rank};
  fails(pfrt_comm_create_group(ctx, comm, twice, 2, &group),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_create_group");
  messageHas("appears twice");
  int32_t outside[2] = {rank, size};
  fails(pfrt_comm_create_group(ctx, comm, outside, 2, &group),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_create_group");
  messageHas("out of range");
  fails(pfrt_comm_create_group(ctx, comm, others, 0, &group),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_create_group");
  fails(pfrt_comm_create_group(ctx, comm, nullptr, 1, &group),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_create_group");
}

TEST_F(CommTest, MismatchedReceiveIsAnErrorNamingBothSides) {
  // Rank 0 sends, rank 1 receives into the wrong descriptor each time;
  // the other ranks have no part in it.
  if (rank > 1)
    return;
  const int32_t tag = 5;
  auto big = payload<float>({8}, 0);
  auto small = payload<float>({2}, 0);
  auto square = payload<float>({2, 2}, 0);
  auto wide = payload<double>({4}, 0);
  auto right = payload<float>({4}, 0);
  if (rank == 0) {
    for (Tensor<float> *t : {&big, &small, &square}) {
      pfrt_tensor d = t->desc();
      ok(pfrt_comm_send(ctx, comm, &d, 1, tag));
    }
    pfrt_tensor w = wide.desc(), r = right.desc(), b = big.desc();
    ok(pfrt_comm_send(ctx, comm, &w, 1, tag));
    ok(pfrt_comm_send(ctx, comm, &r, 1, tag)); // into a blocking receive
    ok(pfrt_comm_send(ctx, comm, &b, 1, tag)); // into a non-blocking one
    ok(pfrt_comm_send(ctx, comm, &r, 1, tag));
  } else {
    Tensor<float> buffer({4});
    pfrt_tensor d = buffer.desc();
    // Larger than the buffer: MPI truncates, nothing is overwritten past it.
    fails(pfrt_comm_recv(ctx, comm, &d, 0, tag), PFRT_INVALID_ARGUMENT,
          "pfrt_comm_recv");
    messageHas("rank 0 sent f32[8] (32 bytes) with tag 5");
    messageHas("expects f32[4] (16 bytes)");
    fails(pfrt_comm_recv(ctx, comm, &d, 0, tag), PFRT_INVALID_ARGUMENT,
          "pfrt_comm_recv");
    messageHas("f32[2] (8 bytes)");
    // The same bytes in another shape or dtype are a mismatch too.
    fails(pfrt_comm_recv(ctx, comm, &d, 0, tag), PFRT_INVALID_ARGUMENT,
          "pfrt_comm_recv");
    messageHas("f32[2, 2] (16 bytes)");
    fails(pfrt_comm_recv(ctx, comm, &d, 0, tag), PFRT_INVALID_ARGUMENT,
          "pfrt_comm_recv");
    messageHas("f64[4] (32 bytes)");
    // Each failed receive consumed its message: the next one matches.
    ok(pfrt_comm_recv(ctx, comm, &d, 0, tag));
    EXPECT_EQ(buffer.data, right.data);
    int64_t request = 0;
    ok(pfrt_comm_irecv(ctx, comm, &d, 0, tag, &request));
    fails(pfrt_comm_wait(ctx, comm, request), PFRT_INVALID_ARGUMENT,
          "pfrt_comm_wait");
    messageHas("rank 0 sent f32[8] (32 bytes) with tag 5");
    ok(pfrt_comm_recv(ctx, comm, &d, 0, tag));
    EXPECT_EQ(buffer.data, right.data);
  }
}

TEST_F(CommTest, InvalidArgumentsFailWithoutCommunicating) {
  Tensor<float> t({4});
  pfrt_tensor d = t.desc();
  int32_t other = (rank + 1) % size;
  fails(pfrt_comm_send(ctx, comm, &d, size, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  messageHas("peer " + std::to_string(size) + " is out of range");
  fails(pfrt_comm_recv(ctx, comm, &d, -1, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_recv");
  fails(pfrt_comm_send(ctx, comm, &d, rank, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  messageHas("is this rank");
  fails(pfrt_comm_send(ctx, comm, &d, other, -1), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  messageHas("tag -1 is out of range");
  int32_t maxTag = pfrt_comm_max_tag(comm);
  if (maxTag < INT32_MAX)
    fails(pfrt_comm_isend(ctx, comm, &d, other, maxTag + 1, nullptr),
          PFRT_INVALID_ARGUMENT, "pfrt_comm_isend");
  fails(pfrt_comm_send(ctx, comm, nullptr, other, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  fails(pfrt_comm_send(ctx, nullptr, &d, other, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  EXPECT_EQ(pfrt_comm_send(nullptr, comm, &d, other, 0),
            PFRT_INVALID_ARGUMENT);
  pfrt_tensor negative = d;
  negative.shape[0] = -4;
  fails(pfrt_comm_send(ctx, comm, &negative, other, 0), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_send");
  fails(pfrt_comm_irecv(ctx, comm, &d, other, 0, nullptr),
        PFRT_INVALID_ARGUMENT, "pfrt_comm_irecv");
  fails(pfrt_comm_wait(ctx, comm, 12345), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_wait");
  messageHas("request 12345 is not pending");
  fails(pfrt_comm_wait_all(ctx, comm, nullptr, -1), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_wait_all");
  fails(pfrt_comm_wait_all(ctx, comm, nullptr, 2), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_wait_all");
  ok(pfrt_comm_wait_all(ctx, comm, nullptr, 0));
  fails(pfrt_comm_wall_time(ctx, comm, nullptr), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_wall_time");
  fails(pfrt_comm_abort(ctx, nullptr, 1), PFRT_INVALID_ARGUMENT,
        "pfrt_comm_abort");
  EXPECT_EQ(pfrt_comm_rank(nullptr), -1);
  EXPECT_EQ(pfrt_comm_size(nullptr), 0);
  // Nothing was sent: a barrier (which would deadlock behind a stray
  // blocking send) completes.
  ok(pfrt_comm_barrier(ctx, comm));
}

class ClockTest : public CommTest {
protected:
  /// The spread of the aligned times read right after a barrier. A rank may
  /// be descheduled on an oversubscribed machine, so the smallest of a few
  /// tries.
  double barrierSpread() {
    double best = 1e9;
    for (int attempt = 0; attempt < 5; ++attempt) {
      Tensor<double> times({size});
      EXPECT_EQ(pfrt_comm_barrier(ctx, comm), PFRT_OK);
      EXPECT_EQ(pfrt_comm_wall_time(ctx, comm, &times[rank]), PFRT_OK);
      pfrt_tensor d = times.desc();
      EXPECT_EQ(pfrt_comm_all_reduce_sum(ctx, comm, &d), PFRT_OK);
      auto [lo, hi] = std::minmax_element(times.data.begin(), times.data.end());
      best = std::min(best, *hi - *lo);
    }
    return best;
  }
};

TEST_F(ClockTest, AlignedClockIsMonotonicAndAgreesAcrossRanks) {
  double previous = 0;
  ok(pfrt_comm_wall_time(ctx, comm, &previous));
  for (int i = 0; i < 1000; ++i) {
    double now = 0;
    ok(pfrt_comm_wall_time(ctx, comm, &now));
    ASSERT_GE(now, previous);
    previous = now;
  }
  // Causality: a message is received after it was sent, on the aligned
  // clock, both ways. Rank 1's own clock is 0.3 s ahead (CommTestMain.cpp).
  if (rank <= 1) {
    int32_t peer = 1 - rank;
    Tensor<double> stamp({1});
    pfrt_tensor s = stamp.desc();
    for (int round = 0; round < 2; ++round) {
      if ((round == 0) == (rank == 0)) {
        ok(pfrt_comm_wall_time(ctx, comm, &stamp[0]));
        ok(pfrt_comm_send(ctx, comm, &s, peer, 20));
      } else {
        ok(pfrt_comm_recv(ctx, comm, &s, peer, 20));
        double received = 0;
        ok(pfrt_comm_wall_time(ctx, comm, &received));
        EXPECT_GE(received, stamp[0] - kClockTolerance)
            << "rank " << rank << " received before rank " << peer << " sent";
        EXPECT_LT(received - stamp[0], 0.25) << "a message took 0.25 s";
      }
    }
  }
  // Right after a barrier every rank reads nearly the same time, also
  // after re-aligning.
  EXPECT_LT(barrierSpread(), 0.05);
  ok(pfrt_comm_align_clock(ctx, comm));
  EXPECT_LT(barrierSpread(), 0.05);
}

TEST_F(CommTest, BarrierWaitsForTheLastRank) {
  // Rank 0 enters 50 ms late; nobody may leave before it entered.
  Tensor<double> entered({1}, {0.0});
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ok(pfrt_comm_wall_time(ctx, comm, &entered[0]));
  }
  ok(pfrt_comm_barrier(ctx, comm));
  double left = 0;
  ok(pfrt_comm_wall_time(ctx, comm, &left));
  pfrt_tensor e = entered.desc();
  ok(pfrt_comm_all_reduce_sum(ctx, comm, &e));
  EXPECT_GE(left, entered[0] - kClockTolerance);
}

TEST_F(CommTest, DestroyCancelsAPendingReceive) {
  // A receive nobody will match, then the communicator goes away: no hang,
  // and a fresh communicator works.
  pfrt_comm *scratch = nullptr;
  ok(pfrt_comm_create(ctx, nullptr, &scratch));
  Tensor<float> t({16});
  pfrt_tensor d = t.desc();
  int64_t request = 0;
  ok(pfrt_comm_irecv(ctx, scratch, &d, (rank + 1) % size, 99, &request));
  EXPECT_GT(request, 0);
  pfrt_comm_destroy(scratch);
  ok(pfrt_comm_barrier(ctx, comm));
}

/// Whether this run stages every tensor through host buffers
/// (PFCommTests.staged.np2).
bool staged() {
  const char *backend = std::getenv("PFRT_TEST_COMM_BACKEND");
  return backend && std::string(backend) == "mpi-staged";
}

TEST_F(CommTest, StagedTransfersCopyAtThePostAndAtTheWait) {
  if (!staged())
    GTEST_SKIP() << "PFRT_TEST_COMM_BACKEND=mpi-staged runs this test";
  if (size < 2)
    return;
  // Rank 0 sends; the bytes are copied out when the send is posted, so
  // changing the tensor before the wait does not change what arrives.
  // Rank 1's receive lands in its tensor at the wait, not before: after a
  // barrier (the message has arrived in the host buffer) the tensor still
  // holds what it held. Unstaged MPI gives neither guarantee.
  Tensor<float> t = payload<float>({64}, 0);
  pfrt_tensor d = t.desc();
  int64_t request = 0;
  if (rank == 0) {
    ok(pfrt_comm_isend(ctx, comm, &d, 1, 5, &request));
    for (int64_t i = 0; i < t.size(); ++i)
      t[i] = -1;
    ok(pfrt_comm_barrier(ctx, comm));
    ok(pfrt_comm_wait(ctx, comm, request));
  } else if (rank == 1) {
    for (int64_t i = 0; i < t.size(); ++i)
      t[i] = 7;
    ok(pfrt_comm_irecv(ctx, comm, &d, 0, 5, &request));
    ok(pfrt_comm_barrier(ctx, comm));
    EXPECT_EQ(t[0], 7.0f);
    EXPECT_EQ(t[63], 7.0f);
    ok(pfrt_comm_wait(ctx, comm, request));
    EXPECT_EQ(t.data, payload<float>({64}, 0).data);
  } else {
    ok(pfrt_comm_barrier(ctx, comm));
  }
}

} // namespace
