//===- RowSparseTest.cpp - the tied gradient's row-sparse exchange helpers ===//
//
// nonZeroRows and addRows must reproduce the dense elementwise sum bit for
// bit: the pipelined run's tied word-embedding gradient depends on it.
//
//===----------------------------------------------------------------------===//
#include "pf/PipelineRuntime/StageProgram.h"
#include "pf/Runtime/pfrt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace mlir::pf::driver;

namespace {
template <typename T> NpyArray tensor(std::vector<int64_t> shape, const std::vector<T> &values) {
  NpyArray a;
  a.dtype = sizeof(T) == 4 ? PFRT_F32 : PFRT_F64;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <typename T> std::vector<T> elements(const NpyArray &a) {
  std::vector<T> v(size_t(a.numElements()));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

/// The dense sum, element by element (what the two-rank all-reduce forms).
template <typename T> NpyArray denseSum(const NpyArray &a, const NpyArray &b) {
  std::vector<T> x = elements<T>(a), y = elements<T>(b);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = x[i] + y[i];
  return tensor<T>(a.shape, x);
}

/// b + a through the sparse form of a, as the owner rank forms it.
NpyArray sparseSum(NpyArray b, const NpyArray &a) {
  NonZeroRows rows = nonZeroRows(a);
  llvm::Error err = addRows(b, rows.indices, rows.data);
  EXPECT_FALSE(bool(err)) << llvm::toString(std::move(err));
  return b;
}

TEST(RowSparse, KeepsRowsWithAnyNonZeroBitIncludingNegativeZero) {
  const float nz = -0.0f;
  NpyArray a = tensor<float>({4, 2}, {0, 0, nz, 0, 0, 0, 1.5f, 0});
  NonZeroRows rows = nonZeroRows(a);
  EXPECT_EQ(rows.indices, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(rows.data.size(), 4 * sizeof(float));
  std::vector<float> kept(4);
  std::memcpy(kept.data(), rows.data.data(), rows.data.size());
  EXPECT_TRUE(std::signbit(kept[0]));
  EXPECT_EQ(kept[2], 1.5f);
  // Rank 0 and 1 tensors are one row.
  EXPECT_EQ(rowCount(tensor<float>({3}, {0, 0, 0})), 1);
  EXPECT_TRUE(nonZeroRows(tensor<float>({3}, {0, 0, 0})).indices.empty());
  EXPECT_EQ(nonZeroRows(tensor<float>({3}, {0, 2, 0})).indices, (std::vector<int64_t>{0}));
}

// -0.0 in the dense part where no row is sent must become +0.0 (b + 0.0),
// and -0.0 + -0.0 in a sent row must stay -0.0: exactly one addition each.
TEST(RowSparse, SumIsBitwiseTheDenseSumForSignedZeros) {
  const float nz = -0.0f, inf = std::numeric_limits<float>::infinity();
  NpyArray a = tensor<float>({3, 2}, {0, 0, nz, 0, 0, 0});
  NpyArray b = tensor<float>({3, 2}, {nz, 1, nz, nz, inf, -3});
  NpyArray sparse = sparseSum(b, a), dense = denseSum<float>(b, a);
  EXPECT_EQ(sparse.data, dense.data);
  std::vector<float> v = elements<float>(sparse);
  EXPECT_FALSE(std::signbit(v[0])); // -0 + (+0, not sent) = +0
  EXPECT_TRUE(std::signbit(v[2]));  // -0 + -0 (sent) = -0
  EXPECT_FALSE(std::signbit(v[3])); // -0 + +0 (sent) = +0
}

template <typename T> void checkRandom(uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<T> value(0, 1);
  const int64_t rows = 37, cols = 5;
  std::vector<T> a(rows * cols, T(0)), b(rows * cols);
  for (T &x : b)
    x = value(gen);
  for (int64_t r = 0; r < rows; r += 3)
    for (int64_t c = 0; c < cols; ++c)
      a[r * cols + c] = value(gen);
  b[7] = -T(0);
  NpyArray ta = tensor<T>({rows, cols}, a), tb = tensor<T>({rows, cols}, b);
  EXPECT_EQ(sparseSum(tb, ta).data, denseSum<T>(tb, ta).data);
  EXPECT_EQ(nonZeroRows(ta).indices.size(), size_t((rows + 2) / 3));
}

TEST(RowSparse, SumIsBitwiseTheDenseSumF32AndF64) {
  checkRandom<float>(1);
  checkRandom<double>(2);
}

TEST(RowSparse, BadRowsAreErrors) {
  NpyArray b = tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  std::vector<char> twoRows(4 * sizeof(float));
  llvm::Error unordered = addRows(b, std::vector<int64_t>{2, 1}, twoRows);
  ASSERT_TRUE(bool(unordered));
  EXPECT_NE(llvm::toString(std::move(unordered)).find("not ascending"), std::string::npos);
  llvm::Error outside = addRows(b, std::vector<int64_t>{0, 3}, twoRows);
  ASSERT_TRUE(bool(outside));
  llvm::consumeError(std::move(outside));
  llvm::Error size = addRows(b, std::vector<int64_t>{0}, twoRows);
  ASSERT_TRUE(bool(size));
  EXPECT_NE(llvm::toString(std::move(size)).find("bytes for 1 rows"), std::string::npos);
  NpyArray ints;
  ints.dtype = PFRT_I64;
  ints.shape = {2};
  ints.data.resize(16);
  llvm::Error dtype = addRows(ints, {}, {});
  ASSERT_TRUE(bool(dtype));
  llvm::consumeError(std::move(dtype));
}
} // namespace
