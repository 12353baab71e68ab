// RUN: pf-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// The plan round-trips through its textual form.
// CHECK-LABEL: func.func private @planned
// CHECK-SAME: pf.runtime_plan = #pf.runtime_plan<arena_bytes = 64, buffers = [#pf.buffer<kind = input, bytes = 24, index = 0>, #pf.buffer<kind = arena, bytes = 32, offset = 0>, #pf.buffer<kind = param, bytes = 48, name = "w">, #pf.buffer<kind = constant, bytes = 8, value = dense<8> : tensor<1xi64>>], inputs = [#pf.io<name = "x", tensor = 0>], op_names = ["pf.exp"], outputs = [#pf.io<name = "y", tensor = 1>], peak_live_bytes = 32, tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [2, 3]>, #pf.tensor<buffer = 1, dtype = 1, shape = [2, 4]>, #pf.tensor<buffer = 3, dtype = 7, shape = []>]>
func.func private @planned() attributes {pf.runtime_plan = #pf.runtime_plan<arena_bytes = 64, buffers = [#pf.buffer<kind = input, bytes = 24, index = 0>, #pf.buffer<kind = arena, bytes = 32, offset = 0>, #pf.buffer<kind = param, bytes = 48, name = "w">, #pf.buffer<kind = constant, bytes = 8, value = dense<8> : tensor<1xi64>>], inputs = [#pf.io<name = "x", tensor = 0>], op_names = ["pf.exp"], outputs = [#pf.io<name = "y", tensor = 1>], peak_live_bytes = 32, tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [2, 3]>, #pf.tensor<buffer = 1, dtype = 1, shape = [2, 4]>, #pf.tensor<buffer = 3, dtype = 7, shape = []>]>}

// -----

// expected-error @+1 {{#pf.buffer of kind 'arena' needs 'offset'}}
func.func private @f() attributes {b = #pf.buffer<kind = arena, bytes = 32>}

// -----

// expected-error @+1 {{#pf.buffer of kind 'input' does not take 'name'}}
func.func private @f() attributes {b = #pf.buffer<kind = input, bytes = 32, index = 0, name = "w">}

// -----

// expected-error @+1 {{#pf.runtime_plan: tensor buffer 2 out of range (1 buffers)}}
func.func private @f() attributes {p = #pf.runtime_plan<arena_bytes = 0, buffers = [#pf.buffer<kind = input, bytes = 4, index = 0>], inputs = [], op_names = [], outputs = [], peak_live_bytes = 0, tensors = [#pf.tensor<buffer = 2, dtype = 1, shape = [1]>]>}

// -----

// expected-error @+1 {{#pf.runtime_plan: 'y' names tensor 3 out of range (1 tensors)}}
func.func private @f() attributes {p = #pf.runtime_plan<arena_bytes = 0, buffers = [#pf.buffer<kind = input, bytes = 4, index = 0>], inputs = [], op_names = [], outputs = [#pf.io<name = "y", tensor = 3>], peak_live_bytes = 0, tensors = [#pf.tensor<buffer = 0, dtype = 1, shape = [1]>]>}

// -----

// expected-error @+1 {{#pf.runtime_plan: 'buffers' holds #pf.buffer only, got 3 : i64}}
func.func private @f() attributes {p = #pf.runtime_plan<arena_bytes = 0, buffers = [3], inputs = [], op_names = [], outputs = [], peak_live_bytes = 0, tensors = []>}
