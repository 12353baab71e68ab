//===- pf-aot-run.cpp - Run an ahead-of-time compiled model on any backend ----===//
//
// pf-aot-run loads a model built as a shared library (pf-run --aot, then
// examples/aot/model_library.c) and runs its step on the CPU or the CUDA
// backend: inputs, weights and outputs are copied between the host and the
// backend's memory at the step boundaries only, intermediates live in one
// arena of the backend. It needs no MLIR, so the same binary, linked with the
// portable runtime, runs on a GPU machine that has none (scripts/gpu-check.sh).
//
//===----------------------------------------------------------------------===//

#include "pf/Support/AotModel.h"
#include "pf/Support/AotModelCheck.h"

#include "pf/Runtime/pf_aot.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Support/OutputFiles.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// The profiling hooks' state (pf_profile_begin/end below): each kernel's
/// time, the backend waited for before and after it (kernels of a device
/// backend run asynchronously).
struct OpProfile {
  pfrt_context *context = nullptr;
  bool on = false;
  std::vector<std::vector<double>> ms; // per op, one entry per kernel call
  std::chrono::steady_clock::time_point start;
} gProfile;

const char *const kUsage =
    "usage: pf-aot-run MODEL.so --weights FILE [options]\n"
    "\n"
    "Runs the step of a model compiled with `pf-run MODEL --aot DIR` and built as a\n"
    "shared library (examples/aot/model_library.c).\n"
    "\n"
    "  --weights FILE      the model's weights (DIR/model.weights)\n"
    "  --inputs DIR        one raw little-endian file per input, DIR/<name>.bin ('/' in\n"
    "                      a name becomes '__'); required when the model has inputs\n"
    "  --outputs DIR       write each output as DIR/<name>.bin and DIR/manifest.json\n"
    "                      (name, file, dtype, shape) after the last run\n"
    "  --weights-out FILE  write the weights after the last run (a training step\n"
    "                      updates parameters and optimizer state in place)\n"
    "  --device cpu|cuda   runtime backend (default cpu)\n"
    "  --gpu N             CUDA device ordinal (default 0)\n"
    "  --threads N         CPU worker threads (default: OpenMP's)\n"
    "  --gemm-precision P  fp32 (default), tf32 or bf16: the model GEMMs' multiplies\n"
    "                      on the GPU (f32 accumulation; K-FAC stays f32; the CPU\n"
    "                      computes f32 whatever is chosen)\n"
    "  --warmup N          untimed runs first (default 0)\n"
    "  --repeat N          timed runs (default 1); each run is the step again, on\n"
    "                      the weights the previous run left\n"
    "  --json FILE         write the timings (median, min, each run) as JSON\n"
    "  --profile FILE      time every kernel of the timed runs (the backend is waited\n"
    "                      for around each) and write per-op times in pf-run's\n"
    "                      --profile format; needs a model compiled with\n"
    "                      pf-run --aot DIR --aot-profile\n"
    "  --describe          print the inputs and outputs and exit\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "pf-aot-run: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "pf-aot-run: error: %s\n", message.c_str());
  return 1;
}

struct Options {
  std::string model, weights, inputs, outputs, weightsOut, json, profile;
  int32_t backend = PFRT_BACKEND_CPU;
  int32_t gpu = 0, threads = 0, gemmPrecision = PFRT_GEMM_FP32;
  long warmup = 0, repeat = 1;
  bool describe = false;
};

bool parseCount(const char *text, long minimum, long &out) {
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < minimum || v > 1000000)
    return false;
  out = v;
  return true;
}

/// Returns 0, or the exit status of a usage error.
int parseOptions(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--describe") {
      o.describe = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!o.model.empty())
        return usageError("more than one model: '" + o.model + "' and '" + arg + "'");
      o.model = arg;
      continue;
    }
    if (i + 1 >= argc)
      return usageError(arg + " needs a value");
    const char *value = argv[++i];
    long n = 0;
    if (arg == "--weights")
      o.weights = value;
    else if (arg == "--inputs")
      o.inputs = value;
    else if (arg == "--outputs")
      o.outputs = value;
    else if (arg == "--weights-out")
      o.weightsOut = value;
    else if (arg == "--json")
      o.json = value;
    else if (arg == "--profile")
      o.profile = value;
    else if (arg == "--device") {
      std::string d = value;
      if (d == "cpu")
        o.backend = PFRT_BACKEND_CPU;
      else if (d == "cuda")
        o.backend = PFRT_BACKEND_CUDA;
      else
        return usageError("unknown --device '" + d + "' (cpu or cuda)");
    } else if (arg == "--gemm-precision") {
      std::string p = value;
      if (p == "fp32")
        o.gemmPrecision = PFRT_GEMM_FP32;
      else if (p == "tf32")
        o.gemmPrecision = PFRT_GEMM_TF32;
      else if (p == "bf16")
        o.gemmPrecision = PFRT_GEMM_BF16;
      else
        return usageError("unknown --gemm-precision '" + p + "' (fp32, tf32 or bf16)");
    } else if (arg == "--gpu" && parseCount(value, 0, n))
      o.gpu = int32_t(n);
    else if (arg == "--threads" && parseCount(value, 0, n))
      o.threads = int32_t(n);
    else if (arg == "--warmup" && parseCount(value, 0, n))
      o.warmup = n;
    else if (arg == "--repeat" && parseCount(value, 1, n))
      o.repeat = n;
    else if (arg == "--gpu" || arg == "--threads" || arg == "--warmup" || arg == "--repeat")
      return usageError("bad " + arg + " '" + value + "'");
    else
      return usageError("unknown option " + arg);
  }
  if (o.model.empty())
    return usageError("no model given");
  if (o.weights.empty() && !o.describe)
    return usageError("--weights is required");
  return 0;
}

/// Of a descriptor of a model that passed pf::aot::checkAotModel (never -1).
int64_t tensorBytes(const pf_model_tensor_info &t) { return pf::aot::aotTensorBytes(t); }

std::string shapeText(const pf_model_tensor_info &t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d)
    s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

std::string fileNameOf(const char *name) { return pf::aot::aotFileName(name); }

bool readFile(const std::string &path, std::vector<char> &data, std::string &why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot open " + path;
    return false;
  }
  data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

/// Writes `path` atomically (pf::writeFileAtomically): a failed write never
/// replaces a good file.
bool writeFile(const std::string &path, const void *data, size_t bytes, std::string &why) {
  std::string error = pf::writeFileAtomically(path, data, bytes);
  if (error.empty())
    return true;
  why = "cannot write " + error;
  return false;
}

/// A block of backend memory (host memory on the CPU) and its byte view.
struct Block {
  pfrt_context *ctx = nullptr;
  void *data = nullptr;
  int64_t bytes = 0;

  Block() = default;
  Block(const Block &) = delete;
  Block &operator=(const Block &) = delete;
  ~Block() { pfrt_free(ctx, data); }

  pfrt_tensor view() const { return pf_aot_byte_view(data, bytes); }
  pfrt_status allocate(pfrt_context *c, int64_t n) {
    ctx = c;
    bytes = n;
    return pfrt_alloc(c, n, &data);
  }
  pfrt_status copyIn(const void *host) {
    pfrt_tensor t = view();
    return bytes ? pfrt_copy_from_host(ctx, host, &t) : PFRT_OK;
  }
  pfrt_status copyOut(void *host) const {
    pfrt_tensor t = view();
    return bytes ? pfrt_copy_to_host(ctx, &t, host) : PFRT_OK;
  }
};

std::string runtimeError(pfrt_context *ctx, const std::string &what) {
  return what + ": " + pfrt_last_error(ctx);
}

void writeTimings(std::ostream &os, const Options &o, const char *backend,
                  const std::vector<double> &ms, double median) {
  os << "{\"model\": \"" << o.model << "\", \"device\": \"" << backend
     << "\", \"warmup\": " << o.warmup << ", \"repeat\": " << ms.size()
     << ", \"median_ms\": " << median << ", \"min_ms\": " << *std::min_element(ms.begin(), ms.end())
     << ", \"runs_ms\": [";
  for (size_t i = 0; i < ms.size(); ++i)
    os << (i ? ", " : "") << ms[i];
  os << "]}\n";
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// JSON text with the characters a name may hold escaped.
std::string quoted(const char *text) {
  std::string q = "\"";
  for (const char *p = text; *p; ++p) {
    if (*p == '"' || *p == '\\')
      q += '\\';
    if (static_cast<unsigned char>(*p) < 0x20)
      continue;
    q += *p;
  }
  return q + "\"";
}

/// Per-op times in pf-run --profile's format (docs/profile-format.md): the
/// median over each op's kernel calls.
std::string profileJson(const Options &o, const pf_aot_model &m, const char *backend,
                        double runMedianMs) {
  std::ostringstream os;
  double kernels = 0;
  os << "{\n  \"format\": \"pf-run-profile/1\",\n  \"model\": " << quoted(o.model.c_str())
     << ",\n  \"device\": \"" << backend << "\",\n  \"runs\": " << o.repeat
     << ",\n  \"threads\": " << o.threads << ",\n  \"run_median_ms\": " << runMedianMs
     << ",\n  \"ops\": [";
  bool first = true;
  for (int64_t i = 0; i < m.num_ops; ++i) {
    const std::vector<double> &ms = gProfile.ms[size_t(i)];
    if (ms.empty())
      continue;
    double mid = medianOf(ms);
    kernels += mid;
    os << (first ? "\n" : ",\n") << "    {\"index\": " << i
       << ", \"name\": " << quoted(m.op_names[i]) << ", \"calls\": " << ms.size()
       << ", \"median_ms\": " << mid << "}";
    first = false;
  }
  os << "\n  ],\n  \"kernel_sum_ms\": " << kernels << "\n}\n";
  return os.str();
}

int run(const Options &o) {
  auto opened = mlir::pf::driver::openAotLibrary(o.model);
  if (!opened)
    return fail(opened.error());
  const pf_aot_model &m = *opened->model;
  if (o.describe) {
    for (int64_t i = 0; i < m.num_inputs; ++i) {
      const pf_model_tensor_info &t = m.tensors[m.inputs[i].tensor];
      std::printf("input  %s: %s %s\n", m.inputs[i].name, pfrt_dtype_name(t.dtype),
                  shapeText(t).c_str());
    }
    for (int64_t i = 0; i < m.num_outputs; ++i) {
      const pf_model_tensor_info &t = m.tensors[m.outputs[i].tensor];
      std::printf("output %s: %s %s\n", m.outputs[i].name, pfrt_dtype_name(t.dtype),
                  shapeText(t).c_str());
    }
    return 0;
  }
  if (!o.profile.empty() && !m.profile_hooks)
    return fail(o.model + " has no profiling hooks: compile it with pf-run --aot DIR "
                          "--aot-profile");
  if (m.num_inputs > 0 && o.inputs.empty())
    return usageError("the model has " + std::to_string(m.num_inputs) +
                      " inputs: give --inputs DIR");

  std::string why;
  std::vector<char> weightsHost;
  if (!readFile(o.weights, weightsHost, why))
    return fail(why);
  if (int64_t(weightsHost.size()) != m.weights_bytes)
    return fail(o.weights + " has " + std::to_string(weightsHost.size()) + " bytes, expected " +
                std::to_string(m.weights_bytes) + " (the model.weights of this model?)");
  std::vector<std::vector<char>> inputHost(size_t(m.num_inputs));
  for (int64_t i = 0; i < m.num_inputs; ++i) {
    std::string path = o.inputs + "/" + fileNameOf(m.inputs[i].name);
    if (!readFile(path, inputHost[i], why))
      return fail(why + " (input '" + m.inputs[i].name + "')");
    const pf_model_tensor_info &t = m.tensors[m.inputs[i].tensor];
    if (int64_t(inputHost[i].size()) != tensorBytes(t))
      return fail(path + " has " + std::to_string(inputHost[i].size()) + " bytes, expected " +
                  std::to_string(tensorBytes(t)) + " (input '" + m.inputs[i].name + "', " +
                  pfrt_dtype_name(t.dtype) + " " + shapeText(t) + ")");
  }

  mlir::pf::driver::AotModel::Options contextOptions;
  contextOptions.backend = o.backend;
  contextOptions.device = o.gpu;
  contextOptions.threads = o.threads;
  contextOptions.gemmPrecision = o.gemmPrecision;
  auto context = mlir::pf::driver::createAotContext(contextOptions);
  if (!context)
    return fail(context.error());
  pfrt_context *ctx = *context;
  const char *backend = pfrt_backend_name(ctx);
  gProfile.context = ctx;
  gProfile.ms.assign(size_t(m.num_ops), {});
  std::printf("pf-aot-run: %s: %lld tensors, arena %.1f MiB, weights %.1f MiB; backend %s\n",
              o.model.c_str(), (long long)m.num_tensors, m.arena_bytes / 1048576.0,
              m.weights_bytes / 1048576.0, backend);
  std::fflush(stdout);

  int status = 0;
  {
    Block weights;
    std::vector<Block> inputs(size_t(m.num_inputs)), outputs(size_t(m.num_outputs));
    pfrt_arena *arena = nullptr;
    void *arenaBase = nullptr;
    auto check = [&](pfrt_status s, const std::string &what) {
      if (s != PFRT_OK && status == 0)
        status = fail(runtimeError(ctx, what));
      return s == PFRT_OK && status == 0;
    };
    bool ok = check(weights.allocate(ctx, m.weights_bytes), "weights") &&
              check(weights.copyIn(weightsHost.data()), "copying the weights in");
    for (int64_t i = 0; ok && i < m.num_inputs; ++i)
      ok = check(inputs[i].allocate(ctx, int64_t(inputHost[i].size())), "inputs") &&
           check(inputs[i].copyIn(inputHost[i].data()), "copying the inputs in");
    for (int64_t i = 0; ok && i < m.num_outputs; ++i)
      ok = check(outputs[i].allocate(ctx, tensorBytes(m.tensors[m.outputs[i].tensor])), "outputs");
    ok = ok && check(pfrt_arena_create(ctx, m.arena_bytes, &arena), "the arena") &&
         check(pfrt_arena_base(arena, &arenaBase), "the arena");

    std::vector<pfrt_tensor> table(size_t(m.num_tensors));
    std::vector<void *> inputData, outputData;
    for (const Block &block : inputs)
      inputData.push_back(block.data);
    for (const Block &block : outputs)
      outputData.push_back(block.data);
    if (ok)
      mlir::pf::driver::bindAotTable(m, inputData.data(), outputData.data(), weights.data,
                                     arenaBase, table.data());

    std::vector<double> timed;
    for (long r = 0; ok && r < o.warmup + o.repeat; ++r) {
      gProfile.on = !o.profile.empty() && r >= o.warmup;
      auto start = std::chrono::steady_clock::now();
      int64_t code = m.main(ctx, table.data());
      gProfile.on = false;
      if (code != 0) {
        int64_t op = (code >> 32) - 1;
        std::string name = op >= 0 && op < m.num_ops ? m.op_names[op] : "the output copies";
        status = fail("step " + std::to_string(r + 1) + ": op #" + std::to_string(op) + " " + name +
                      " failed: " + pfrt_last_error(ctx));
        ok = false;
        break;
      }
      ok = check(pfrt_synchronize(ctx), "step " + std::to_string(r + 1));
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (r >= o.warmup)
        timed.push_back(ms);
    }

    if (ok) {
      std::vector<double> sorted = timed;
      std::sort(sorted.begin(), sorted.end());
      double median = sorted.size() % 2
                          ? sorted[sorted.size() / 2]
                          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
      std::printf("pf-aot-run: %zu timed run(s) on %s: median %.3f ms, min %.3f ms\n", timed.size(),
                  backend, median, sorted.front());
      if (!o.profile.empty()) {
        std::string text = profileJson(o, m, backend, median);
        if (!writeFile(o.profile, text.data(), text.size(), why))
          status = fail(why);
      }
      if (!o.json.empty()) {
        std::ostringstream os;
        writeTimings(os, o, backend, timed, median);
        std::string text = os.str();
        if (!writeFile(o.json, text.data(), text.size(), why))
          status = fail(why);
      }
    }
    if (ok && status == 0 && !o.outputs.empty()) {
      std::ostringstream manifest;
      manifest << "[\n";
      for (int64_t i = 0; ok && i < m.num_outputs; ++i) {
        const pf_model_tensor_info &t = m.tensors[m.outputs[i].tensor];
        std::vector<char> host(size_t(tensorBytes(t)));
        ok = check(outputs[i].copyOut(host.data()), "copying the outputs out");
        std::string file = fileNameOf(m.outputs[i].name);
        if (ok && !writeFile(o.outputs + "/" + file, host.data(), host.size(), why)) {
          status = fail(why);
          ok = false;
        }
        manifest << "  {\"name\": " << quoted(m.outputs[i].name)
                 << ", \"file\": " << quoted(file.c_str()) << ", \"dtype\": \""
                 << pfrt_dtype_name(t.dtype) << "\", \"shape\": [";
        for (int d = 0; d < t.rank; ++d)
          manifest << (d ? ", " : "") << t.shape[d];
        manifest << "]}" << (i + 1 < m.num_outputs ? "," : "") << "\n";
      }
      manifest << "]\n";
      std::string text = manifest.str();
      if (ok && !writeFile(o.outputs + "/manifest.json", text.data(), text.size(), why))
        status = fail(why);
    }
    if (ok && status == 0 && !o.weightsOut.empty()) {
      ok = check(weights.copyOut(weightsHost.data()), "copying the weights out");
      if (ok && !writeFile(o.weightsOut, weightsHost.data(), weightsHost.size(), why))
        status = fail(why);
    }
    pfrt_arena_destroy(arena);
  }
  pfrt_context_destroy(ctx);
  return status;
}

} // namespace

extern "C" __attribute__((visibility("default"))) void pf_profile_begin(int64_t) {
  if (!gProfile.on)
    return;
  pfrt_synchronize(gProfile.context);
  gProfile.start = std::chrono::steady_clock::now();
}

extern "C" __attribute__((visibility("default"))) void pf_profile_end(int64_t op) {
  if (!gProfile.on || op < 0 || op >= int64_t(gProfile.ms.size()))
    return;
  pfrt_synchronize(gProfile.context);
  gProfile.ms[size_t(op)].push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - gProfile.start)
          .count());
}

int main(int argc, char **argv) {
  Options o;
  if (int usage = parseOptions(argc, argv, o))
    return usage;
  // Before the model is loaded and run: no output over the model, over
  // another output, or into a directory that cannot take it. --weights-out
  // may be --weights (a training loop stepping one file; it is read before
  // and replaced atomically after the runs); --json and --profile may not.
  if (std::string err = pf::checkOutputFiles(
          {{"--weights-out", o.weightsOut}, {"--json", o.json}, {"--profile", o.profile}},
          {{"MODEL.so", o.model}});
      !err.empty())
    return fail(err);
  if (std::string err = pf::checkOutputFiles({{"--json", o.json}, {"--profile", o.profile}},
                                             {{"--weights", o.weights}});
      !err.empty())
    return fail(err);
  return run(o);
}
