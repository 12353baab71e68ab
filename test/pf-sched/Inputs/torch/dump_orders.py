"""Writes the compute-only action lists of a torch.distributed.pipelining
schedule as CSV, one line per rank, as PipelineScheduleMulti._dump_csv does
(how the golden files here were made; see README.md). Needs PyTorch, which is
not a pf dependency: run it in a scratch virtual environment.

    python dump_orders.py CLASS OUT.csv RANKS STAGES_PER_RANK MICROBATCHES loop|v
"""
import csv
import sys

import torch
from torch.distributed.pipelining import schedules


class StandIn:
    """The attributes the schedules read from a stage while building orders."""

    def __init__(self, index, num_stages, ranks, rank):
        self.stage_index = index
        self.num_stages = num_stages
        self.group_size = ranks
        self.group_rank = rank
        self.is_first = index == 0
        self.is_last = index == num_stages - 1
        self.submod = torch.nn.Linear(1, 1)


def pipeline_order(cls, ranks, stages_per_rank, micro, style):
    num_stages = ranks * stages_per_rank
    local = [0, num_stages - 1] if style == "v" else [r * ranks for r in range(stages_per_rank)]
    stages = [StandIn(i, num_stages, ranks, 0) for i in local]
    if cls is schedules.Schedule1F1B:
        return cls(stages[0], micro).pipeline_order
    return cls(stages, micro).pipeline_order


def main():
    cls = getattr(schedules, sys.argv[1])
    order = pipeline_order(cls, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    with open(sys.argv[2], "w", newline="") as f:
        writer = csv.writer(f)
        for rank in sorted(order):
            writer.writerow([a for a in order[rank] if a is None or a.is_compute_op])


if __name__ == "__main__":
    main()
