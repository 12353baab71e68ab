// The verifiers of the per-rank program's own ops: ranges, peers, the task
// kind's micro-batch, the stage function a pf.run_stage names and the stage
// values (SSA values) it takes and makes.
// RUN: pf-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{'pf.rank_program' op rank 2 is not in [0, 2)}}
pf.rank_program @rank2 rank(2) ranks(2) stages([0]) microbatches(1) {
}

// -----

// expected-error@+1 {{'pf.rank_program' op microbatches must be >= 1, got 0}}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(0) {
}

// -----

// expected-error@+1 {{'pf.rank_program' op stages must be distinct and non-negative, got array<i64: 0, 0>}}
pf.rank_program @rank0 rank(0) ranks(2) stages([0, 0]) microbatches(1) {
}

// -----

func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.send_act' op to rank 0 is its own rank}}
  pf.send_act %act microbatch(0) to(0) tag(0) : tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.recv_act' op from rank 5 is not in [0, 2)}}
  %act = pf.recv_act microbatch(0) from(5) tag(0) : tensor<4xf32>
}

// -----

func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.send_act' op attribute 'tag' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  pf.send_act %act microbatch(0) to(1) tag(-1) : tensor<4xf32>
}

// -----

// The row-sparse sums' tags (kReduceRowsTag + the micro-batch) are not an
// activation's.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.send_act' op tag 32000 is not below 32000, the tag of the row-sparse sums' messages}}
  pf.send_act %act microbatch(0) to(1) tag(32000) : tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.recv_act' op tag 32005 is not below 32000}}
  %act = pf.recv_act microbatch(0) from(1) tag(32005) : tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(800) {
  %p = pf.run_stage backward @stage0_backward() microbatch(790) : () -> tensor<4x2xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op microbatch 790: its rows' tag 32000 + 790 is past 32767, the largest tag every MPI accepts}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(790) root(1) ranks([0, 1]) : tensor<4x2xf32>
}

// -----

func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.send_act' op microbatch 2 is not in [0, 2)}}
  pf.send_act %act microbatch(2) to(1) tag(0) : tensor<4xf32>
}

// -----

func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op a forward needs a microbatch}}
  pf.run_stage forward @stage0_forward() : () -> ()
}

// -----

func.func private @stage0_update() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op a update runs once per step and takes no microbatch}}
  pf.run_stage update @stage0_update() microbatch(0) : () -> ()
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op references @stage0_forward, which is not a function}}
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
}

// -----

func.func private @stage0_forward()
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op references @stage0_forward, which has no pf.stage (not a stage function)}}
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
}

// -----

func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op runs @stage1_forward of stage 1, but rank 0 holds stages array<i64: 0>}}
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [forward, backward, backward_input, backward_weight, kfac_factor_a, kfac_factor_b, kfac_inverse, precondition, accumulate, update]}}
  pf.run_stage sideways @stage0_forward() microbatch(0) : () -> ()
}

// -----

// The operands are the function's stage-value arguments, with their types;
// other named arguments (graph inputs such as labels) are the host's.
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}, tensor<4xi64> {pf.name = "labels"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf16>
  // expected-error@+1 {{'pf.run_stage' op has inputs ('tensor<4xf16>') but @stage1_forward's stage-value arguments are ('tensor<4xf32>')}}
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf16>) -> ()
}

// -----

// The results are the function's stage-value results (the loss is one);
// other named results (a graph output such as the logits) are the host's.
func.func private @stage1_forward() -> (tensor<4xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"}, tensor<4xf32> {pf.name = "logits"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op has results ('tensor<4xf32>', 'tensor<f32>', 'tensor<4xf32>') but @stage1_forward's stage-value results are ('tensor<4xf32>', 'tensor<f32>')}}
  %saved, %loss, %logits = pf.run_stage forward @stage1_forward() microbatch(0) : () -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>)
}

// -----

// A backward's gradients (grad/*) are stage values: the call returns them.
func.func private @stage1_forward() -> (tensor<4xf32> {pf.name = "saved/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward(tensor<4xf32> {pf.name = "saved/1"}) -> (tensor<4xf32> {pf.name = "grad_act/1"}, tensor<4x4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %saved = pf.run_stage forward @stage1_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.run_stage' op has results ('tensor<4xf32>') but @stage1_backward's stage-value results are ('tensor<4xf32>', 'tensor<4x4xf32>')}}
  %grad_act = pf.run_stage backward @stage1_backward(%saved) microbatch(0) : (tensor<4xf32>) -> tensor<4xf32>
}

// -----

// An accumulate call takes its gradient pieces and running sums as operands.
func.func private @stage1_accumulate(tensor<4x4xf32> {pf.name = "grad/w"}, tensor<4x4xf32> {pf.name = "grad_sum/w"}) -> (tensor<4x4xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op has inputs () but @stage1_accumulate's stage-value arguments are ('tensor<4x4xf32>', 'tensor<4x4xf32>')}}
  pf.run_stage accumulate @stage1_accumulate() microbatch(0) : () -> tensor<4x4xf32>
}

// -----

// A once-per-step call takes the step's gradients (its grad/* arguments) as
// operands too.
func.func private @stage1_update(tensor<4x4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op has inputs () but @stage1_update's stage-value arguments are ('tensor<4x4xf32>')}}
  pf.run_stage update @stage1_update() : () -> ()
}

// -----

// The step's results are the loss, an f32 scalar, and its gradients
// (grad/<param>, float tensors); a running sum is not one.
func.func private @stage1_forward() -> (tensor<4xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %saved, %loss = pf.run_stage forward @stage1_forward() microbatch(0) : () -> (tensor<4xf32>, tensor<f32>)
  // expected-error@+1 {{'pf.step_result' op reports 'loss_sum', but the step's results are 'loss' and its gradients (grad/<param>)}}
  pf.step_result "loss_sum" %loss : tensor<f32>
}

// -----

func.func private @stage1_forward() -> (tensor<4xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %saved, %loss = pf.run_stage forward @stage1_forward() microbatch(0) : () -> (tensor<4xf32>, tensor<f32>)
  // expected-error@+1 {{'pf.step_result' op reports 'grad/', but the step's results are 'loss' and its gradients (grad/<param>)}}
  pf.step_result "grad/" %saved : tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xi32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %grad = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xi32>
  // expected-error@+1 {{'pf.step_result' op gradient 'grad/w' is not a float tensor, got 'tensor<4xi32>'}}
  pf.step_result "grad/w" %grad : tensor<4xi32>
}

// -----

func.func private @stage1_forward() -> (tensor<4xf32> {pf.name = "saved/1"}, tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %saved, %loss = pf.run_stage forward @stage1_forward() microbatch(0) : () -> (tensor<4xf32>, tensor<f32>)
  // expected-error@+1 {{'pf.step_result' op 'loss' is an f32 scalar (tensor<f32>), got 'tensor<4xf32>'}}
  pf.step_result "loss" %saved : tensor<4xf32>
}

// -----

// A call reads the stage values of its own micro-batch.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  %saved0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  %saved1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.run_stage' op input #0 is a value of micro-batch 1, but the call is of micro-batch 0}}
  pf.run_stage backward @stage0_backward(%saved1) microbatch(0) : (tensor<4xf32>) -> ()
}

// -----

// A send sends a value of its own micro-batch.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  %act1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.send_act' op sends a value of micro-batch 1 as micro-batch 0}}
  pf.send_act %act1 microbatch(0) to(1) tag(0) : tensor<4xf32>
}

// -----

// The members of a collective: at least two ranks, this one among them.
// (A named all_reduce sums a parameter in place, e.g. a K-FAC factor.)
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.all_reduce' op ranks array<i64: 1, 2> do not include its own rank 0}}
  pf.all_reduce "w.kfac.A" ranks([1, 2]) : tensor<4x4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.all_reduce' op needs at least two ranks, got array<i64: 0>}}
  %s = pf.all_reduce "grad/emb"(%g : tensor<4xf32>) ranks([0]) order(library) : tensor<4xf32> -> tensor<4xf32>
}

// -----

// The library adds the members' partial sums, values of their programs: a
// named value (a parameter) is not summed so.
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.all_reduce' op order(library) sums an operand (a partial sum), not the named 'w.kfac.A'}}
  pf.all_reduce "w.kfac.A" ranks([0, 1]) order(library) : tensor<4x4xf32>
}

// -----

// A gradient (or the loss) is no longer summed by name (the host's copy):
// its pieces go in as operands and the sum comes out.
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.all_reduce' op sums 'grad/w' by name, but gradients and the loss are summed as values of the program (operands in, the sum out)}}
  pf.all_reduce "grad/w" ranks([0, 1]) : tensor<4x4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'order' [microbatch, library]}}
  pf.all_reduce "w.kfac.A" ranks([0, 1]) order(fastest) : tensor<4x4xf32>
}

// -----

// A value of the program is summed into a result: the loss's partial sums
// (of a last stage two ranks run), added by the library.
func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  // expected-error@+1 {{'pf.all_reduce' op sums operands into a result, or a named parameter with neither}}
  "pf.all_reduce"(%loss) <{value = "loss_sum", ranks = array<i64: 0, 1>, order = 1 : i32, type = tensor<f32>}> : (tensor<f32>) -> ()
}

// -----

func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  // expected-error@+1 {{'pf.all_reduce' op sums the operands 'act/1', but only 'loss_sum' and gradients (grad/*) are summed as values}}
  %sum = pf.all_reduce "act/1"(%loss : tensor<f32>) ranks([0, 1]) order(library) : tensor<f32> -> tensor<f32>
}

// -----

func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  // expected-error@+1 {{'pf.all_reduce' op sums a value as the library adds it, order(library); a gradient's pieces are summed in one process's order by pf-build-rank-programs (reduces, sends, accumulate calls and a broadcast), not by pf.all_reduce}}
  %sum = pf.all_reduce "loss_sum"(%loss : tensor<f32>) ranks([0, 1]) : tensor<f32> -> tensor<f32>
}

// -----

func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  // expected-error@+1 {{'pf.all_reduce' op operands are 'tensor<f64>' (the op's type), got 'tensor<f32>'}}
  %sum = pf.all_reduce "loss_sum"(%loss : tensor<f32>) ranks([0, 1]) order(library) : tensor<f64> -> tensor<f32>
}

// -----

func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  // expected-error@+1 {{'pf.all_reduce' op result is 'tensor<f32>' (the op's type), got 'tensor<f64>'}}
  %sum = pf.all_reduce "loss_sum"(%loss : tensor<f32>) ranks([0, 1]) order(library) : tensor<f32> -> tensor<f64>
}

// -----

// order(library) adds one partial sum per member.
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.all_reduce' op order(library) sums one partial sum per member, got 2 operands}}
  %s = pf.all_reduce "grad/w"(%g0, %g1 : tensor<4xf32>, tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
}

// -----

// The pieces of a gradient are not summed by pf.all_reduce (the bitwise
// mode forms one process's sum from reduces, sends and accumulate calls).
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.all_reduce' op sums a value as the library adds it, order(library)}}
  %s = pf.all_reduce "grad/w"(%g0, %g1 : tensor<4xf32>, tensor<4xf32>) ranks([0, 1]) : tensor<4xf32> -> tensor<4xf32>
}

// -----

// pf.broadcast of a value: the root hands its operand over, every member
// returns the root's value (there is no named form without a result).
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.broadcast' op returns the root's value on every member}}
  pf.broadcast "grad/emb"(%g : tensor<4xf32>) root(0) ranks([0, 1]) : tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op returns the root's value on every member}}
  pf.broadcast "grad/w" root(1) ranks([0, 1]) : tensor<4xf32>
}

// -----

pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.broadcast' op on the root takes the value it hands over}}
  %b = pf.broadcast "grad/emb" root(0) ranks([0, 1]) : tensor<4xf32> -> tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.broadcast' op takes no operand off the root (it receives the root's value)}}
  %b = pf.broadcast "grad/emb"(%g : tensor<4xf32>) root(1) ranks([0, 1]) : tensor<4xf32> -> tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.broadcast' op operand and result are 'tensor<8xf32>' (the op's type)}}
  %b = pf.broadcast "grad/emb"(%g : tensor<4xf32>) root(0) ranks([0, 1]) : tensor<8xf32> -> tensor<4xf32>
}

// -----

func.func @f(%act: tensor<4xf32>) {
  // expected-error@+1 {{'pf.send_act' op expects parent op 'pf.rank_program'}}
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  return
}

// -----

pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.clip_gradients' op max_norm must be positive and finite, got 0}}
  pf.clip_gradients() names([]) counted([]) max_norm(0.0) order(["grad/a"])
}

// -----

pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.clip_gradients' op order names 'grad/a' twice}}
  pf.clip_gradients() names([]) counted([]) max_norm(1.0) order(["grad/a", "grad/a"])
}

// -----

pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.clip_gradients' op order entry 'act/3' is not a grad/<parameter> name}}
  pf.clip_gradients() names([]) counted([]) max_norm(1.0) order(["act/3"])
}

// -----

// pf.clip_gradients takes the rank's gradients of the step, one name of the
// order each, and returns them clipped (a result of the same type each).
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.clip_gradients' op names 1 gradients for 2 operands and 2 results (one each)}}
  %c:2 = pf.clip_gradients(%a, %b : tensor<2xf32>, tensor<3xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>, tensor<3xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.clip_gradients' op gradient #1 'grad/b' is not in the order}}
  %c:2 = pf.clip_gradients(%a, %b : tensor<2xf32>, tensor<3xf32>) names(["grad/a", "grad/b"]) counted([true, true]) max_norm(1.0) order(["grad/a"]) -> tensor<2xf32>, tensor<3xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}, tensor<2xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<2xf32>)
  // expected-error@+1 {{'pf.clip_gradients' op names 'grad/a' twice}}
  %c:2 = pf.clip_gradients(%a, %b : tensor<2xf32>, tensor<2xf32>) names(["grad/a", "grad/a"]) counted([true, true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>, tensor<2xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{'pf.clip_gradients' op result #0 is 'tensor<3xf32>' but gradient #0 is 'tensor<2xf32>'}}
  %c = pf.clip_gradients(%a : tensor<2xf32>) names(["grad/a"]) counted([true]) max_norm(1.0) order(["grad/a"]) -> tensor<3xf32>
}

// -----

// counted: one flag per name (whether this rank's term of the norm counts).
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.clip_gradients' op counted has 1 entries for 2 names}}
  %c:2 = pf.clip_gradients(%a, %b : tensor<2xf32>, tensor<3xf32>) names(["grad/a", "grad/b"]) counted([true]) max_norm(1.0) order(["grad/a", "grad/b"]) -> tensor<2xf32>, tensor<3xf32>
}

// -----

// pf.kfac_kl_clip takes each update with the clipped gradient it was
// computed from.
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{'pf.kfac_kl_clip' op takes the gradient of each update, got 1 updates and 0 gradients}}
  %u = pf.kfac_kl_clip updates(%a : tensor<2xf32>) gradients() names(["grad/a"]) counted([true]) kappa(1.0e-3) order(["grad/a"]) -> tensor<2xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.kfac_kl_clip' op update #0 is 'tensor<2xf32>' but its gradient is 'tensor<3xf32>'}}
  %u = pf.kfac_kl_clip updates(%a : tensor<2xf32>) gradients(%b : tensor<3xf32>) names(["grad/a"]) counted([true]) kappa(1.0e-3) order(["grad/a"]) -> tensor<2xf32>
}

// -----

// counted: one flag per name (whether this rank's inner product of the
// update and its gradient counts).
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/a"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %a = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  // expected-error@+1 {{'pf.kfac_kl_clip' op counted has 2 entries for 1 names}}
  %u = pf.kfac_kl_clip updates(%a : tensor<2xf32>) gradients(%a : tensor<2xf32>) names(["grad/a"]) counted([true, false]) kappa(1.0e-3) order(["grad/a"]) -> tensor<2xf32>
}

// -----

// in_place: which input an accumulate call's result may be written over.
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}, tensor<3xf32> {pf.name = "grad_sum/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  // expected-error@+1 {{'pf.run_stage' op a backward writes no result over an input (in_place is for accumulate calls, whose functions are elementwise)}}
  %w, %b = pf.run_stage backward @stage0_backward() microbatch(0) in_place([-1, -1]) : () -> (tensor<2xf32>, tensor<3xf32>)
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}, tensor<3xf32> {pf.name = "grad_sum/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %w, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.run_stage' op in_place names 1 results, but the call makes 2}}
  %sw, %sb = pf.run_stage accumulate @stage0_accumulate_first(%w, %b) microbatch(0) in_place([0]) : (tensor<2xf32>, tensor<3xf32>) -> (tensor<2xf32>, tensor<3xf32>)
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}, tensor<3xf32> {pf.name = "grad_sum/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %w, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.run_stage' op in_place: result #1 over input #2, but the call takes 2}}
  %sw, %sb = pf.run_stage accumulate @stage0_accumulate_first(%w, %b) microbatch(0) in_place([0, 2]) : (tensor<2xf32>, tensor<3xf32>) -> (tensor<2xf32>, tensor<3xf32>)
}

// -----

func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}, tensor<3xf32> {pf.name = "grad/b"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}, tensor<3xf32> {pf.name = "grad_sum/b"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %w, %b = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<3xf32>)
  // expected-error@+1 {{'pf.run_stage' op in_place: result #1 is 'tensor<3xf32>' but input #0 is 'tensor<2xf32>'}}
  %sw, %sb = pf.run_stage accumulate @stage0_accumulate_first(%w, %b) microbatch(0) in_place([-1, 0]) : (tensor<2xf32>, tensor<3xf32>) -> (tensor<2xf32>, tensor<3xf32>)
}

// -----

// A result over an input it is not computed from (another parameter's piece
// of the same type).
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad/v"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad/v"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}, tensor<2xf32> {pf.name = "grad_sum/v"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  %w, %v = pf.run_stage backward @stage0_backward() microbatch(0) : () -> (tensor<2xf32>, tensor<2xf32>)
  // expected-error@+1 {{'pf.run_stage' op in_place: result #0 'grad_sum/w' over input #1 'grad/v', which it is not computed from}}
  %sw, %sv = pf.run_stage accumulate @stage0_accumulate_first(%w, %v) microbatch(0) in_place([1, 0]) : (tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
}
