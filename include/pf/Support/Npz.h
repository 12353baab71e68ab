//===- Npz.h - NumPy .npz archives of named arrays ---------------*- C++ -*-===//
//
// The C++ standard library and libzip only (library PFNpz): the tools that
// link LLVM and the trainer that links none read and write the same files.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_NPZ_H
#define PF_SUPPORT_NPZ_H

#include "pf/Support/Status.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::pf::driver {

/// The most elements of an array read from a .npy (the same bound as the
/// compiler's kMaxTensorElements), and the most bytes of one .npz entry.
constexpr int64_t kMaxNpyElements = int64_t(1) << 36;
constexpr uint64_t kMaxNpzEntryBytes = uint64_t(1) << 38;
/// The most bytes a deflated .npz entry may declare per compressed byte:
/// deflate's own bound (a 258-byte match costs at least a one-bit length
/// code and a one-bit distance code, 1032 bytes per compressed byte), so no
/// real archive is refused and a forged size is.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// The product of `shape` when no dim is negative and it is at most
/// kMaxNpyElements (checked without overflowing); nullopt otherwise.
std::optional<int64_t> checkedElementCount(const std::vector<int64_t> &shape);

/// A dense C-order array with a pfrt/ONNX dtype code.
struct NpyArray {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
};

/// Element size in bytes of a dtype code; 0 when unsupported.
int64_t dtypeBytes(int32_t dtype);
/// NumPy's name of a dtype code (float32, int64, ...).
const char *dtypeName(int32_t dtype);
/// "8x128" ("scalar" for rank 0), as messages print shapes.
std::string shapeText(const std::vector<int64_t> &shape);

/// "output NAME: float32 8x128, sum 1.234E+00\n": the line pf-run prints for
/// each output (the sum over f32 elements; 0 for other dtypes).
std::string outputSummary(const std::string &name, const NpyArray &array);

/// Reads an .npz (zip of .npy files, stored or deflated, as np.savez and
/// np.savez_compressed write them). Keys drop the ".npy" suffix.
::pf::Expected<std::map<std::string, NpyArray>> readNpz(const std::string &path);

/// Writes an .npz (stored, like np.savez).
::pf::Status writeNpz(const std::string &path, const std::map<std::string, NpyArray> &arrays);

} // namespace mlir::pf::driver

#endif // PF_SUPPORT_NPZ_H
