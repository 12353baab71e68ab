# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "PF"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "Regressions", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pf_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "PATH"])
llvm_config.use_default_substitutions()

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# use_default_substitutions() maps %python to the interpreter running lit
# (/usr/bin/python3 for LLVM's lit, without numpy/onnx); the first match wins,
# so replace it with the Python that CMake found.
config.substitutions = [(k, v) for k, v in config.substitutions if k != "%python"]
config.substitutions.append(("%python", '"%s"' % config.python_executable))
config.substitutions.append(("%pf_src", config.pf_src_root))
config.environment["PYTHONPATH"] = os.path.join(config.pf_src_root, "python")

tool_dirs = [config.pf_tools_dir, config.llvm_tools_dir]
tools = ["pf-opt", "pf-translate", "pf-sched", "pf-run", "pf-train", "pf-fuzz-replay", "pf-capi-test", "pf-capi-dlopen-test", "pf-example-train-step", "FileCheck", "not", "split-file", "count", "llvm-nm", "llvm-readelf"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The pf plugin in the stock mlir-opt (test/Plugin): %mlir-opt-pf is mlir-opt
# with PFPlugin.so loaded as dialect and pass plugin.
if config.mlir_opt:
    config.available_features.add("mlir-opt")
config.substitutions.append(("%pf_plugin", config.pf_plugin))
config.substitutions.append(("%pf_libdir", os.path.join(config.pf_obj_root, "lib")))
config.substitutions.append(("%llvm_libdir", config.llvm_lib_dir))
config.substitutions.append(
    ("%mlir-opt-pf",
     "%s --load-dialect-plugin=%s --load-pass-plugin=%s"
     % (config.mlir_opt, config.pf_plugin, config.pf_plugin)))
config.substitutions.append(("%mlir-opt", config.mlir_opt))

# The CUDA backend: "cuda-built" when libpfrt has it; "cuda-gpu" when this
# machine has an NVIDIA driver device node (tests of the no-GPU error are
# UNSUPPORTED there; scripts/gpu-check.sh runs the GPU side).
if getattr(config, "pf_cuda_built", "OFF") in ("ON", "1", "TRUE"):
    config.available_features.add("cuda-built")
if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
    config.available_features.add("cuda-gpu")
