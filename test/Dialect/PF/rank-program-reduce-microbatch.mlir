// pf.reduce_microbatch: the tied embedding's gradient of one micro-batch,
// returned by the first and the last stage, is summed on the root (the last
// stage's rank), which accumulates the sum; the other member hands its piece
// over and takes the step's gradient back by pf.broadcast before the
// clipping. Both members run a matching reduce on their piece (a result of
// the call of that micro-batch returning it); the root's reduce returns the
// sum, which its accumulate call takes. The broadcast is a value of the
// program: the root hands its accumulated sum over as the operand, and every
// member returns the step's gradient, which it clips (pf.clip_gradients takes
// and returns it); the lowest member counts it in the norm and reports it.
// The cross-rank order is simulated for deadlocks.
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// Valid: rank 0 (stage 0) hands micro-batch m's piece over after its
// backward; rank 1 (stage 1) sums and accumulates it and broadcasts the
// step's gradient; both clip the broadcast's result, and rank 0, the lowest
// member, counts it (counted) and reports the clipped gradient.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_first(tensor<4x2xf32> {pf.name = "grad/emb"}) -> (tensor<4x2xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate_last(tensor<4x2xf32> {pf.name = "grad/emb"}, tensor<4x2xf32> {pf.name = "grad_sum/emb"}) -> (tensor<4x2xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %p0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
  %p1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32>
  %g = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %c = pf.clip_gradients(%g : tensor<4x2xf32>) names(["grad/emb"]) counted([true]) max_norm(1.0) order(["grad/emb"]) -> tensor<4x2xf32>
  pf.step_result "grad/emb" %c : tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q0 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  %q1 = pf.run_stage backward @stage1_backward() microbatch(1) : () -> tensor<4x2xf32>
  %s0 = pf.reduce_microbatch "grad/emb"(%q0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %a0 = pf.run_stage accumulate @stage1_accumulate_first(%s0) microbatch(0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %s1 = pf.reduce_microbatch "grad/emb"(%q1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %a1 = pf.run_stage accumulate @stage1_accumulate_last(%s1, %a0) microbatch(1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %g = pf.broadcast "grad/emb"(%a1 : tensor<4x2xf32>) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %c = pf.clip_gradients(%g : tensor<4x2xf32>) names(["grad/emb"]) counted([false]) max_norm(1.0) order(["grad/emb"]) -> tensor<4x2xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op sums the pieces of exactly two ranks, got array<i64: 0, 1, 2>}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4xf32>) microbatch(0) root(2) ranks([0, 1, 2]) : tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(3) stages([0]) microbatches(1) {
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op root 2 is not one of ranks array<i64: 0, 1>}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4xf32>) microbatch(0) root(2) ranks([0, 1]) : tensor<4xf32>
}

// -----

func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op microbatch 2 is not in [0, 2)}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4xf32>) microbatch(2) root(1) ranks([0, 1]) : tensor<4xf32>
}

// -----

// The piece is not of the op's type.
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op piece and sum are 'tensor<8xf32>' (the op's type)}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<8xf32>
}

// -----

// The root's reduce returns the sum.
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %q = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op on the root returns the sum}}
  pf.reduce_microbatch "grad/emb"(%q : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
}

// -----

// The other member's reduce hands its piece over and returns nothing.
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op hands the piece to the root and returns nothing}}
  %s = pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}

// -----

// The piece is micro-batch 0's, the reduce micro-batch 1's.
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %p0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  // expected-error@+1 {{'pf.reduce_microbatch' op piece is a value of micro-batch 0, but the reduce is of micro-batch 1}}
  pf.reduce_microbatch "grad/emb"(%p0 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32>
}

// -----

// The members reduce different micro-batches.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
// expected-error@+1 {{rank 0 reduces 'grad/emb' in micro-batch order [0] but its root, rank 1, in [1] (the root takes the pieces in the order they are posted)}}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %p0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  %p1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4x2xf32>
  // expected-error@+1 {{rank 0, op 4: reduce of 'grad/emb' (micro-batch 0) to rank 1 over ranks array<i64: 0, 1> : 'tensor<4x2xf32>' has no counterpart of the same micro-batch, root, ranks and type on rank 1}}
  pf.reduce_microbatch "grad/emb"(%p0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q0 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  %q1 = pf.run_stage backward @stage1_backward() microbatch(1) : () -> tensor<4x2xf32>
  // expected-error@+1 {{rank 1, op 4: reduce of 'grad/emb' (micro-batch 1) to rank 1 over ranks array<i64: 0, 1> : 'tensor<4x2xf32>' has no counterpart of the same micro-batch, root, ranks and type on rank 0}}
  %s1 = pf.reduce_microbatch "grad/emb"(%q1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}

// -----

// Rank 0 reduces micro-batch 1 before its backward returns the piece: what
// it hands over in its place (the forward's saved activation of micro-batch
// 1, of the same type) is no gradient.
func.func private @stage0_forward() -> (tensor<4x2xf32> {pf.name = "saved/0"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x2xf32> {pf.name = "saved/0"}) -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %a0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4x2xf32>
  %a1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4x2xf32>
  %p0 = pf.run_stage backward @stage0_backward(%a0) microbatch(0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  // expected-error@+1 {{rank 0, op 3: reduce of 'grad/emb' (micro-batch 1) to rank 1 over ranks array<i64: 0, 1>: no call of micro-batch 1 on this rank returns it before the reduce}}
  pf.reduce_microbatch "grad/emb"(%a1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32>
  %p1 = pf.run_stage backward @stage0_backward(%a1) microbatch(1) : (tensor<4x2xf32>) -> tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q0 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  %q1 = pf.run_stage backward @stage1_backward() microbatch(1) : () -> tensor<4x2xf32>
  %s1 = pf.reduce_microbatch "grad/emb"(%q1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}

// -----

// The root accumulates micro-batch 0's own piece before the sum; the other
// member accumulates the piece it handed over.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate(tensor<4x2xf32> {pf.name = "grad/emb"}) -> (tensor<4x2xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_accumulate(tensor<4x2xf32> {pf.name = "grad/emb"}) -> (tensor<4x2xf32> {pf.name = "grad_sum/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  // expected-error@+1 {{rank 0, op 2: reduce of 'grad/emb' (micro-batch 0) to rank 1 over ranks array<i64: 0, 1>: this rank hands its piece to the root but accumulate @stage0_accumulate (op 3) accumulates it}}
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
  %a = pf.run_stage accumulate @stage0_accumulate(%p) microbatch(0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  %a = pf.run_stage accumulate @stage1_accumulate(%q) microbatch(0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  // expected-error@+1 {{rank 1, op 3: reduce of 'grad/emb' (micro-batch 0) to rank 1 over ranks array<i64: 0, 1> comes after accumulate @stage1_accumulate (op 2), which accumulates the micro-batch's sum}}
  %s = pf.reduce_microbatch "grad/emb"(%q : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}

// -----

// The summed gradient must be back on every member before the clipping
// (rank 0 clips without it).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
  pf.clip_gradients() names([]) counted([]) max_norm(1.0) order(["grad/emb"])
  // expected-error@+1 {{rank 0, op 4: broadcast of 'grad/emb' from rank 1 over ranks array<i64: 0, 1> comes after clip_gradients (op 3), which needs the summed gradient on every member}}
  %g = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  %s = pf.reduce_microbatch "grad/emb"(%q : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %g = pf.broadcast "grad/emb"(%s : tensor<4x2xf32>) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %c = pf.clip_gradients(%g : tensor<4x2xf32>) names(["grad/emb"]) counted([true]) max_norm(1.0) order(["grad/emb"]) -> tensor<4x2xf32>
  pf.step_result "grad/emb" %c : tensor<4x2xf32>
}

// -----

// The root waits for micro-batch 0's piece before it sends the gradient
// that rank 0's backward of micro-batch 0 receives. (The other member never
// waits at a reduce: it posts its piece.)
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4x2xf32> {pf.name = "grad_act/1"}) -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}, tensor<4x2xf32> {pf.name = "grad_act/1"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 1: deadlock: no rank can progress (a send and its recv block until both ranks reach them); blocked: rank 0 at op 1 (recv of 'grad_act/1' (micro-batch 0) from rank 1, tag 0), rank 1 at op 2 (reduce of 'grad/emb' (micro-batch 0) to rank 1 over ranks array<i64: 0, 1>)}}
  %ga = pf.recv_act microbatch(0) from(1) tag(0) : tensor<4x2xf32>
  %p = pf.run_stage backward @stage0_backward(%ga) microbatch(0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q:2 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> (tensor<4x2xf32>, tensor<4x2xf32>)
  // expected-note@+1 {{rank 1 is blocked here (op 2)}}
  %s = pf.reduce_microbatch "grad/emb"(%q#0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  pf.send_act %q#1 microbatch(0) to(0) tag(0) : tensor<4x2xf32>
  pf.step_result "grad/emb" %s : tensor<4x2xf32>
}

// -----

// The root takes the pieces in another order than they were posted (it
// would add micro-batch 0's rows to micro-batch 1).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
// expected-error@+1 {{rank 0 reduces 'grad/emb' in micro-batch order [0, 1] but its root, rank 1, in [1, 0]}}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %p0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
  %p1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q0 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  %q1 = pf.run_stage backward @stage1_backward() microbatch(1) : () -> tensor<4x2xf32>
  %s1 = pf.reduce_microbatch "grad/emb"(%q1 : tensor<4x2xf32>) microbatch(1) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  %s0 = pf.reduce_microbatch "grad/emb"(%q0 : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
}
