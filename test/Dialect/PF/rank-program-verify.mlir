// The checks across ranks of verifyRankPrograms (pf-verify-rank-programs):
// each error names the rank and the op index in its program. A transferred
// value is described by its pf.name where the program says it (the function
// result a send's value is, the argument a received value is passed to).
// RUN: pf-opt %s -split-input-file --pf-verify-rank-programs -verify-diagnostics

// A send without its recv.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 1: send of 'act/1' (micro-batch 0) to rank 1, tag 0 has no matching recv on rank 1}}
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A recv without its send.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{rank 1, op 0: recv of 'act/1' (micro-batch 0) from rank 0, tag 3 has no matching send on rank 0}}
  %act = pf.recv_act microbatch(0) from(0) tag(3) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf32>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A recv without its send, of a value no call reads: its name is unknown.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{rank 1, op 0: recv of (micro-batch 0) from rank 0, tag 3 has no matching send on rank 0}}
  %act = pf.recv_act microbatch(0) from(0) tag(3) : tensor<4xf32>
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// Same peers and tag, different types (the stage functions disagree on the
// activation's type).
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf16> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-note@+1 {{the send (rank 0, op 1)}}
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{rank 1, op 0: recv of 'act/1' (micro-batch 0) from rank 0, tag 0 expects 'tensor<4xf16>' but rank 0 sends 'tensor<4xf32>'}}
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf16>
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf16>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// Same peers, tag and type, but the receiving call takes another value than
// the one sent.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/2"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-note@+1 {{the send (rank 0, op 1)}}
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{rank 1, op 0: recv of 'act/2' (micro-batch 0) from rank 0, tag 0 matches the send of 'act/1' (micro-batch 0) to rank 1, tag 0 of another value}}
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf32>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// Same peers, tag and type, but another micro-batch.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-note@+1 {{the send (rank 0, op 1)}}
  pf.send_act %act0 microbatch(0) to(1) tag(0) : tensor<4xf32>
  %act1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-note@+1 {{the send (rank 0, op 3)}}
  pf.send_act %act1 microbatch(1) to(1) tag(1) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  // expected-error@+1 {{rank 1, op 0: recv of 'act/1' (micro-batch 1) from rank 0, tag 0 matches the send of 'act/1' (micro-batch 0) to rank 1, tag 0 of another value}}
  %act1 = pf.recv_act microbatch(1) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act1) microbatch(1) : (tensor<4xf32>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 1, op 3: recv of 'act/1' (micro-batch 0) from rank 0, tag 1 matches the send of 'act/1' (micro-batch 1) to rank 1, tag 1 of another value}}
  %act0 = pf.recv_act microbatch(0) from(0) tag(1) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act0) microbatch(0) : (tensor<4xf32>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// Two sends with one tag.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %act0 microbatch(0) to(1) tag(0) : tensor<4xf32>
  %act1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 3: a second send to rank 1 with tag 0 (the first is op 1): tags must identify messages}}
  pf.send_act %act1 microbatch(1) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  %act0 = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
  pf.run_stage forward @stage1_forward() microbatch(1) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(1) : () -> ()
}

// -----

// Backward before forward.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 2: backward of stage 0 micro-batch 1 runs before its forward (op 3)}}
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
}

// -----

// A micro-batch missing.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
// expected-error@+1 {{stage 0 micro-batch 1 has no forward on any rank}}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
}

// -----

// A forward run twice.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  // expected-error@+1 {{rank 0, op 1: forward of stage 0 micro-batch 0 runs a second time (first: rank 0, op 0)}}
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}

// -----

// An input that is received only after the call that reads it: the value
// does not dominate its use (MLIR's verifier rejects the program before the
// checks across ranks run).
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-error@+1 {{operand #0 does not dominate this use}}
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf32>) -> ()
  // expected-note@+1 {{operand defined here (op in the same block)}}
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A call that does not pass the input its function reads (here received but
// left unused): its operands do not match the function's stage-value
// arguments.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  // expected-error@+1 {{'pf.run_stage' op has inputs () but @stage1_forward's stage-value arguments are ('tensor<4xf32>')}}
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// A value sent before it is computed: it does not dominate the send.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  // expected-error@+1 {{operand #0 does not dominate this use}}
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  // expected-note@+1 {{operand defined here (op in the same block)}}
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf32>) -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// Deadlock: both ranks receive first (rank 0 waits for the gradient of the
// activation it has not sent yet).
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  %act = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 1: deadlock: no rank can progress (a send and its recv block until both ranks reach them); blocked: rank 0 at op 1 (recv of 'grad_act/3' (micro-batch 0) from rank 1, tag 1), rank 1 at op 0 (recv of 'act/1' (micro-batch 0) from rank 0, tag 0)}}
  %grad = pf.recv_act microbatch(0) from(1) tag(1) : tensor<4xf32>
  pf.send_act %act microbatch(0) to(1) tag(0) : tensor<4xf32>
  pf.run_stage backward @stage0_backward(%grad) microbatch(0) : (tensor<4xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  // expected-note@+1 {{rank 1 is blocked here (op 0)}}
  %act = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act) microbatch(0) : (tensor<4xf32>) -> ()
  %grad = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %grad microbatch(0) to(0) tag(1) : tensor<4xf32>
}

// -----

// Deadlock with rendezvous sends: both ranks send first (an eager, buffered
// transport would get through; a large tensor over MPI would not).
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward(tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %act0 microbatch(0) to(1) tag(0) : tensor<4xf32>
  %act1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 3: deadlock: no rank can progress (a send and its recv block until both ranks reach them); blocked: rank 0 at op 3 (send of 'act/1' (micro-batch 1) to rank 1, tag 1), rank 1 at op 3 (send of 'grad_act/3' (micro-batch 0) to rank 0, tag 2)}}
  pf.send_act %act1 microbatch(1) to(1) tag(1) : tensor<4xf32>
  %grad0 = pf.recv_act microbatch(0) from(1) tag(2) : tensor<4xf32>
  pf.run_stage backward @stage0_backward(%grad0) microbatch(0) : (tensor<4xf32>) -> ()
  %grad1 = pf.recv_act microbatch(1) from(1) tag(3) : tensor<4xf32>
  pf.run_stage backward @stage0_backward(%grad1) microbatch(1) : (tensor<4xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  %act0 = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act0) microbatch(0) : (tensor<4xf32>) -> ()
  %grad0 = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-note@+1 {{rank 1 is blocked here (op 3)}}
  pf.send_act %grad0 microbatch(0) to(0) tag(2) : tensor<4xf32>
  %act1 = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act1) microbatch(1) : (tensor<4xf32>) -> ()
  %grad1 = pf.run_stage backward @stage1_backward() microbatch(1) : () -> tensor<4xf32>
  pf.send_act %grad1 microbatch(1) to(0) tag(3) : tensor<4xf32>
}

// -----

// Deadlock with backward halves: rank 1 runs its weight half and then waits
// for micro-batch 1's activation before it sends micro-batch 0's gradient,
// which rank 0 waits for before it sends micro-batch 1.
func.func private @stage0_forward() -> (tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward_input() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward_weight(tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward(tensor<4xf32> {pf.name = "act/1"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward_input() -> (tensor<4xf32> {pf.name = "grad_act/3"}) attributes {pf.stage = 1 : i64}
func.func private @stage1_backward_weight() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %act0 = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<4xf32>
  pf.send_act %act0 microbatch(0) to(1) tag(0) : tensor<4xf32>
  // expected-error@+1 {{rank 0, op 2: deadlock: no rank can progress (a send and its recv block until both ranks reach them); blocked: rank 0 at op 2 (recv of 'grad_act/3' (micro-batch 0) from rank 1, tag 2), rank 1 at op 4 (recv of 'act/1' (micro-batch 1) from rank 0, tag 1)}}
  %grad0 = pf.recv_act microbatch(0) from(1) tag(2) : tensor<4xf32>
  pf.run_stage backward_input @stage0_backward_input() microbatch(0) : () -> ()
  pf.run_stage backward_weight @stage0_backward_weight(%grad0) microbatch(0) : (tensor<4xf32>) -> ()
  %act1 = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<4xf32>
  pf.send_act %act1 microbatch(1) to(1) tag(1) : tensor<4xf32>
  %grad1 = pf.recv_act microbatch(1) from(1) tag(3) : tensor<4xf32>
  pf.run_stage backward_input @stage0_backward_input() microbatch(1) : () -> ()
  pf.run_stage backward_weight @stage0_backward_weight(%grad1) microbatch(1) : (tensor<4xf32>) -> ()
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(2) {
  %act0 = pf.recv_act microbatch(0) from(0) tag(0) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act0) microbatch(0) : (tensor<4xf32>) -> ()
  %grad0 = pf.run_stage backward_input @stage1_backward_input() microbatch(0) : () -> tensor<4xf32>
  pf.run_stage backward_weight @stage1_backward_weight() microbatch(0) : () -> ()
  // expected-note@+1 {{rank 1 is blocked here (op 4)}}
  %act1 = pf.recv_act microbatch(1) from(0) tag(1) : tensor<4xf32>
  pf.send_act %grad0 microbatch(0) to(0) tag(2) : tensor<4xf32>
  pf.run_stage forward @stage1_forward(%act1) microbatch(1) : (tensor<4xf32>) -> ()
  %grad1 = pf.run_stage backward_input @stage1_backward_input() microbatch(1) : () -> tensor<4xf32>
  pf.send_act %grad1 microbatch(1) to(0) tag(3) : tensor<4xf32>
  pf.run_stage backward_weight @stage1_backward_weight() microbatch(1) : () -> ()
}

// -----

// An all_reduce that one member never runs. (It sums the rank's partial
// sum, an operand, into the step's gradient, which the rank's step_result
// reports.)
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4xf32>
  // expected-error@+1 {{rank 0, op 2: all_reduce of 'grad/emb' over ranks array<i64: 0, 1> : 'tensor<4xf32>' has no counterpart of the same ranks, order and type on rank 1}}
  %e = pf.all_reduce "grad/emb"(%g : tensor<4xf32>) ranks([0, 1]) order(library) : tensor<4xf32> -> tensor<4xf32>
  pf.step_result "grad/emb" %e : tensor<4xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  pf.run_stage backward @stage1_backward() microbatch(0) : () -> ()
}

// -----

// The members of a broadcast disagree on its type: rank 0 expects another
// value than the root hands over.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 0 : i64}
func.func private @stage1_forward() attributes {pf.stage = 1 : i64}
func.func private @stage1_backward() -> (tensor<4x2xf32> {pf.name = "grad/emb"}) attributes {pf.stage = 1 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %p = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<4x2xf32>
  pf.reduce_microbatch "grad/emb"(%p : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32>
  // expected-error@+1 {{rank 0, op 3: broadcast of 'grad/emb' from rank 1 over ranks array<i64: 0, 1> : 'tensor<8xf32>' has no counterpart of the same root, ranks and type on rank 1}}
  %g = pf.broadcast "grad/emb" root(1) ranks([0, 1]) : tensor<8xf32> -> tensor<8xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([1]) microbatches(1) {
  pf.run_stage forward @stage1_forward() microbatch(0) : () -> ()
  %q = pf.run_stage backward @stage1_backward() microbatch(0) : () -> tensor<4x2xf32>
  %s = pf.reduce_microbatch "grad/emb"(%q : tensor<4x2xf32>) microbatch(0) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  // expected-error@+1 {{rank 1, op 3: broadcast of 'grad/emb' from rank 1 over ranks array<i64: 0, 1> : 'tensor<4x2xf32>' has no counterpart of the same root, ranks and type on rank 0}}
  %g = pf.broadcast "grad/emb"(%s : tensor<4x2xf32>) root(1) ranks([0, 1]) : tensor<4x2xf32> -> tensor<4x2xf32>
  pf.step_result "grad/emb" %g : tensor<4x2xf32>
}

// -----

// A rank without a program.
// expected-error@+1 {{no pf.rank_program for rank 1 of 2}}
module {
  func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
  func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
  pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(1) {
    pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
    pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  }
}

// -----

// The loss leaves the step once: not reported by two ranks (Chimera's last
// stage runs on both; one reports the step's loss).
func.func private @stage0_forward() -> (tensor<f32> {pf.name = "loss"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(0) : () -> tensor<f32>
  pf.run_stage backward @stage0_backward() microbatch(0) : () -> ()
  pf.step_result "loss" %loss : tensor<f32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  %loss = pf.run_stage forward @stage0_forward() microbatch(1) : () -> tensor<f32>
  pf.run_stage backward @stage0_backward() microbatch(1) : () -> ()
  // expected-error@+1 {{rank 1, op 2: step_result 'loss' is reported a second time (rank 0, op 2 reports it)}}
  pf.step_result "loss" %loss : tensor<f32>
}

// -----

// A gradient leaves the step once over all ranks: of a sum over ranks only
// the lowest member (the one that counts it) reports it. Here both replicas
// (Chimera) report the step's sum of their pieces.
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %s = pf.all_reduce "grad/w"(%g0 : tensor<2xf32>) ranks([0, 1]) order(library) : tensor<2xf32> -> tensor<2xf32>
  pf.step_result "grad/w" %s : tensor<2xf32>
}
pf.rank_program @rank1 rank(1) ranks(2) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  %s = pf.all_reduce "grad/w"(%g1 : tensor<2xf32>) ranks([0, 1]) order(library) : tensor<2xf32> -> tensor<2xf32>
  // expected-error@+1 {{rank 1, op 3: step_result 'grad/w' is reported a second time (rank 0, op 3 reports it)}}
  pf.step_result "grad/w" %s : tensor<2xf32>
}

// -----

// A rank reports a gradient once, as the step's: not its running sum and
// also a piece (the sum already holds micro-batch 0's piece).
func.func private @stage0_forward() attributes {pf.stage = 0 : i64}
func.func private @stage0_backward() -> (tensor<2xf32> {pf.name = "grad/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_first(tensor<2xf32> {pf.name = "grad/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
func.func private @stage0_accumulate_last(tensor<2xf32> {pf.name = "grad/w"}, tensor<2xf32> {pf.name = "grad_sum/w"}) -> (tensor<2xf32> {pf.name = "grad_sum/w"}) attributes {pf.stage = 0 : i64}
pf.rank_program @rank0 rank(0) ranks(1) stages([0]) microbatches(2) {
  pf.run_stage forward @stage0_forward() microbatch(0) : () -> ()
  pf.run_stage forward @stage0_forward() microbatch(1) : () -> ()
  %g0 = pf.run_stage backward @stage0_backward() microbatch(0) : () -> tensor<2xf32>
  %g1 = pf.run_stage backward @stage0_backward() microbatch(1) : () -> tensor<2xf32>
  %s0 = pf.run_stage accumulate @stage0_accumulate_first(%g0) microbatch(0) : (tensor<2xf32>) -> tensor<2xf32>
  %s1 = pf.run_stage accumulate @stage0_accumulate_last(%g1, %s0) microbatch(1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  pf.step_result "grad/w" %s1 : tensor<2xf32>
  // expected-error@+1 {{rank 0, op 7: step_result 'grad/w' is reported a second time (rank 0, op 6 reports it)}}
  pf.step_result "grad/w" %g0 : tensor<2xf32>
}
