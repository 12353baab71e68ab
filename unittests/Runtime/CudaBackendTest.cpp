//===- CudaBackendTest.cpp - Backend selection and dispatch, host-side -----===//
//
// What can be checked without a GPU: which backends are built, that a CUDA
// context without a usable GPU is a clear error, and that every kernel of
// pfrt_abi.def, called on a CUDA context, either reaches the CUDA backend or
// answers "not implemented on the CUDA backend yet", and never runs the CPU
// code on what would be device pointers.
//
//===----------------------------------------------------------------------===//

#include "pf/Runtime/pfrt.h"

#include "../../lib/Runtime/common/Context.h"
#if PFRT_TEST_CUDA_BUILT
#include "../../lib/Runtime/cuda/Libraries.h"
#endif
#if PFRT_TEST_NCCL_BUILT
#include "../../lib/Runtime/comm/NcclLibrary.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

bool cudaBuilt() { return pfrt_backend_built(PFRT_BACKEND_CUDA) != 0; }

/// A CUDA context when this machine has a usable GPU, else NULL.
pfrt_context *tryCudaContext() {
  pfrt_context_options options;
  pfrt_context_options_init(&options);
  options.backend = PFRT_BACKEND_CUDA;
  return pfrt_context_create(&options);
}

TEST(CudaBackend, BuiltBackendsAreReported) {
  EXPECT_EQ(pfrt_backend_built(PFRT_BACKEND_CPU), 1);
  EXPECT_EQ(cudaBuilt(), PFRT_TEST_CUDA_BUILT != 0);
  EXPECT_EQ(pfrt_backend_built(7), 0);
  EXPECT_EQ(pfrt_backend_device_count(PFRT_BACKEND_CPU), 1);
  EXPECT_EQ(pfrt_backend_device_count(7), 0);
  // A CUDA context exists exactly when a device does.
  pfrt_context_options options;
  pfrt_context_options_init(&options);
  options.backend = PFRT_BACKEND_CUDA;
  pfrt_context *cuda = pfrt_context_create(&options);
  EXPECT_EQ(cuda != nullptr, pfrt_backend_device_count(PFRT_BACKEND_CUDA) > 0);
  pfrt_context_destroy(cuda);
}

TEST(CudaBackend, ContextWithoutUsableGpuIsAClearError) {
  if (pfrt_context *ctx = tryCudaContext()) {
    EXPECT_STREQ(pfrt_backend_name(ctx), "cuda");
    pfrt_context_destroy(ctx);
    GTEST_SKIP() << "a GPU is present: the no-GPU error cannot be seen here";
  }
  const std::string why = pfrt_last_error(nullptr);
  EXPECT_NE(why.find("pfrt_context_create: CUDA backend: "), std::string::npos) << why;
  if (cudaBuilt())
    EXPECT_NE(why.find("CUDA device"), std::string::npos) << why;
  else
    EXPECT_NE(why.find("built without the CUDA backend"), std::string::npos) << why;
  // A later successful creation clears the reason.
  pfrt_context *cpu = pfrt_context_create(nullptr);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(std::string(pfrt_last_error(nullptr)).find("CUDA"), std::string::npos);
  pfrt_context_destroy(cpu);
}

TEST(CudaBackend, BadOptionsSayWhy) {
  pfrt_context_options options;
  pfrt_context_options_init(&options);
  options.abi_version = PFRT_ABI_VERSION + 1;
  EXPECT_EQ(pfrt_context_create(&options), nullptr);
  EXPECT_NE(std::string(pfrt_last_error(nullptr)).find("ABI version"), std::string::npos);
  pfrt_context_options_init(&options);
  options.backend = 5;
  EXPECT_EQ(pfrt_context_create(&options), nullptr);
  EXPECT_NE(std::string(pfrt_last_error(nullptr)).find("unknown backend 5"),
            std::string::npos);
  pfrt_context_options_init(&options);
  options.backend = PFRT_BACKEND_CUDA;
  options.device = -1;
  EXPECT_EQ(pfrt_context_create(&options), nullptr);
  EXPECT_NE(std::string(pfrt_last_error(nullptr)).find("negative"), std::string::npos);
}

/// Calls fn with every argument value-initialized (NULL pointers, zeros).
template <class... Args>
pfrt_status callWithZeros(pfrt_status (*fn)(pfrt_context *, Args...),
                          pfrt_context *ctx) {
  return fn(ctx, Args{}...);
}

/// A context that claims the CUDA backend but has no device state: a
/// kernel that reaches the CUDA backend stops at "no CUDA state"; one that
/// is not implemented there says so; the CPU code is never reached.
TEST(CudaBackend, EveryKernelDispatchesToCudaOrSaysNotImplemented) {
  pfrt_context fake;
  fake.backend = PFRT_BACKEND_CUDA;
  const std::string notImplemented = ": not implemented on the CUDA backend yet";
  const std::string noState = ": the context has no CUDA state";
  std::vector<std::string> implemented, missing;
  auto record = [&](const char *name, pfrt_status status) {
    const std::string message = fake.lastError;
    if (std::string(name) == "pfrt_kfac_damped_inverses" && status == PFRT_OK) {
      // Composed of pfrt_kfac_pi/inverse, whose failure it reports as
      // "kept the previous inverses" (as on the CPU).
      implemented.push_back(name);
      return;
    }
    EXPECT_NE(status, PFRT_OK) << name;
    if (message == name + notImplemented) {
      EXPECT_EQ(status, PFRT_UNSUPPORTED) << name;
      missing.push_back(name);
    } else {
      EXPECT_TRUE(cudaBuilt()) << name << ": " << message;
      EXPECT_NE(message.find(noState), std::string::npos) << name << ": " << message;
      implemented.push_back(name);
    }
    fake.lastError[0] = '\0';
  };
#define PFRT_KERNEL(name, ...) record(#name, callWithZeros(&name, &fake));
#include "pf/Runtime/pfrt_abi.def"
  EXPECT_EQ(implemented.size() + missing.size(), 96u);
  if (!cudaBuilt()) {
    EXPECT_TRUE(implemented.empty());
  } else {
    EXPECT_GE(implemented.size(), 74u);
    // The gradients that were the last compute kernels without one.
    for (const char *name : {"pfrt_binary_backward", "pfrt_unary_backward", "pfrt_matmul_backward"})
      EXPECT_NE(std::find(implemented.begin(), implemented.end(), name), implemented.end())
          << name << " has no CUDA version";
  }
  // Communication moves the context's memory (NCCL, or MPI staged through
  // host buffers): every pfrt_comm_* kernel reaches the CUDA backend.
  int commKernels = 0;
  for (const std::string &name : implemented)
    commKernels += name.rfind("pfrt_comm_", 0) == 0;
  EXPECT_EQ(commKernels, cudaBuilt() ? 13 : 0);
  std::string list;
  for (const std::string &name : missing) {
    // Without the CUDA backend (e.g. the sanitized build) every kernel says
    // "not implemented", the communication ones included.
    if (cudaBuilt())
      EXPECT_NE(name.rfind("pfrt_comm_", 0), 0u) << name << " is not implemented on CUDA";
    list += " " + name;
  }
  std::printf("CUDA backend: %zu kernels implemented, %zu not yet:%s\n",
              implemented.size(), missing.size(), list.c_str());
}

#if PFRT_TEST_CUDA_BUILT
/// cuBLAS and cuSOLVER are dlopen'ed by the first CUDA context; the
/// sonames and symbol names are checked here, where the toolkit is, even
/// without a GPU.
TEST(CudaBackend, CublasAndCusolverLoadAtRunTime) {
  char why[512] = "";
  ASSERT_TRUE(pfrt::cuda::loadLibraries(why, sizeof why)) << why;
  const pfrt::cuda::Libraries &lib = pfrt::cuda::lib();
#define PFRT_EXPECT_LOADED(name) EXPECT_NE(lib.name, nullptr) << #name;
  PFRT_CUBLAS_FUNCTIONS(PFRT_EXPECT_LOADED)
  PFRT_CUSOLVER_FUNCTIONS(PFRT_EXPECT_LOADED)
#undef PFRT_EXPECT_LOADED
  EXPECT_STREQ(lib.cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
}
#endif

#if PFRT_TEST_NCCL_BUILT
/// NCCL is dlopen'ed by the first NCCL communicator (never linked: the
/// toolkit's libnccl.so.2 is ~218 MB); every function the communicator calls
/// resolves in the library found at configure time.
TEST(CudaBackend, NcclLoadsAtRunTime) {
  char why[512] = "";
  ASSERT_TRUE(pfrt::comm::loadNccl(why, sizeof why)) << why;
  const pfrt::comm::NcclLibrary &lib = pfrt::comm::nccl();
#define PFRT_EXPECT_LOADED(name) EXPECT_NE(lib.name, nullptr) << #name;
  PFRT_NCCL_FUNCTIONS(PFRT_EXPECT_LOADED)
#undef PFRT_EXPECT_LOADED
  int version = 0;
  ASSERT_EQ(lib.ncclGetVersion(&version), ncclSuccess);
  // The library is at least the header's major version (2.x: 2xxyy).
  EXPECT_GE(version / 10000, NCCL_MAJOR);
  EXPECT_STREQ(lib.ncclGetErrorString(ncclSuccess), "no error");
}
#endif

/// Without a GPU there is no CUDA context, and an NCCL communicator on any
/// other context says why (it never starts MPI: this process has no
/// mpirun).
TEST(CudaBackend, NcclWithoutACudaContextIsAClearError) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  ASSERT_NE(ctx, nullptr);
  pfrt_comm_options options;
  pfrt_comm_options_init(&options);
  options.backend = PFRT_COMM_NCCL;
  pfrt_comm *comm = nullptr;
  EXPECT_EQ(pfrt_comm_create(ctx, &options, &comm), PFRT_UNSUPPORTED);
  EXPECT_EQ(comm, nullptr);
  const std::string message = pfrt_last_error(ctx);
#if PFRT_TEST_NCCL_BUILT
  EXPECT_NE(message.find("pfrt_comm_create: NCCL moves CUDA device memory: create the "
                         "communicator on a CUDA context (this one is cpu)"),
            std::string::npos)
      << message;
  if (pfrt_context *gpu = tryCudaContext())
    pfrt_context_destroy(gpu);
  else
    EXPECT_NE(message.find("CUDA device"), std::string::npos) << message;
#else
  EXPECT_NE(message.find("NCCL communication backend is not built"), std::string::npos) << message;
#endif
  pfrt_context_destroy(ctx);
}

TEST(CudaBackend, CpuContextStillRunsOnTheCpu) {
  pfrt_context *ctx = pfrt_context_create(nullptr);
  ASSERT_NE(ctx, nullptr);
  EXPECT_STREQ(pfrt_backend_name(ctx), "cpu");
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
  pfrt_tensor ta = {a, PFRT_F32, 1, {3}}, tb = {b, PFRT_F32, 1, {3}},
              to = {out, PFRT_F32, 1, {3}};
  ASSERT_EQ(pfrt_add(ctx, &ta, &tb, &to), PFRT_OK);
  EXPECT_EQ(out[2], 33.0f);
  // Host copies are memcpys on the CPU backend.
  float back[3] = {};
  ASSERT_EQ(pfrt_copy_to_host(ctx, &to, back), PFRT_OK);
  EXPECT_EQ(back[1], 22.0f);
  ASSERT_EQ(pfrt_copy_from_host(ctx, a, &to), PFRT_OK);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(pfrt_synchronize(ctx), PFRT_OK);
  pfrt_context_destroy(ctx);
}

} // namespace
