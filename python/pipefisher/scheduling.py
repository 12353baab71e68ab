"""Pipeline schedules with K-FAC work in the bubbles, as figures and pictures.

:func:`schedule` runs pf's schedule library, the code of ``pf-sched`` (for a
profile or the analytic cost model) and of the ``pf-pipeline`` pass (for a
module), in this process, and returns a :class:`Report`::

    r = pipefisher.schedule("profile.json", schedule="chimera", stages=8, microbatches=8)
    r.step_time_ms, r.utilization_with_kfac, r["refresh_steps"]
    r.svg()            # the timeline; a notebook shows `r` as that picture
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

from .compiler import Module, _core  # compiler loads the extension (libMLIR.so first)
from .errors import ScheduleError

__all__ = ["Report", "schedule"]


def _flatten(report: dict) -> dict[str, Any]:
    """The report's figures under flat names (nested groups joined by '_')."""
    flat: dict[str, Any] = {}
    for key, value in report.items():
        if key == "utilization":
            flat["utilization_without_kfac"] = value["without_kfac"]
            flat["utilization_with_kfac"] = value["with_kfac"]
        elif key == "overhead":
            flat["overhead_ms_per_step"] = value["ms_per_step"]
            flat["overhead_fraction"] = value["fraction"]
            flat["kfac_outside_bubbles_ms"] = value["kfac_outside_bubbles_ms"]
        else:
            flat[key] = value
    return flat


class Report(Mapping):
    """The figures of one scheduled K-FAC refresh window.

    Figures are attributes and keys (``report.step_time_ms``,
    ``report["bubble_fraction"]``, ``dict(report)``): ``schedule``,
    ``policy``, ``cost_model``, ``devices``, ``stages``, ``microbatches``,
    ``layers_per_stage``, ``pipeline_step_ms`` (the bare pipeline),
    ``step_time_ms`` (mean step with K-FAC), ``utilization_without_kfac``,
    ``utilization_with_kfac``, ``bubble_fraction``, ``refresh_steps``,
    ``overhead_ms_per_step``, ``overhead_fraction``, ``kfac_work_ms``,
    ``kfac_in_bubbles_ms``, ``kfac_outside_bubbles_ms``, ``per_device``,
    ``memory``, ... (``pf-sched --report-json``'s fields,
    docs/schedule.md). :meth:`svg` is the timeline; ``json`` the report as
    ``pf-sched --report-json`` writes it.
    """

    def __init__(self, report_json: str, svg: str, trace: str = "", text: str = "",
                 warnings: list[str] | None = None) -> None:
        self.json: dict[str, Any] = json.loads(report_json)
        self._figures = _flatten(self.json)
        self._svg = svg
        self._trace = trace
        #: pf-sched's text report (empty for a module's schedule).
        self.text = text
        #: Non-fatal remarks about the cost model (e.g. unknown profile keys).
        self.warnings = list(warnings or [])

    def __getitem__(self, key: str) -> Any:
        return self._figures[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._figures)

    def __len__(self) -> int:
        return len(self._figures)

    def __getattr__(self, name: str) -> Any:
        figures = self.__dict__.get("_figures", {})
        if name in figures:
            return figures[name]
        raise AttributeError(f"Report has no figure {name!r}; figures: {sorted(figures)}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._figures))

    def as_dict(self) -> dict[str, Any]:
        """The figures as a plain dictionary (flat names, as the attributes)."""
        return dict(self._figures)

    def svg(self) -> str:
        """The timeline as SVG text (one row per device, K-FAC work in the bubbles)."""
        return self._svg

    def _repr_svg_(self) -> str:  # Jupyter shows the timeline
        return self._svg

    def trace(self) -> str:
        """The timeline as a Chrome trace / Perfetto JSON text (empty for a module)."""
        return self._trace

    def __repr__(self) -> str:
        return (f"<pipefisher.Report {self.get('schedule')} D={self.get('devices')} "
                f"N={self.get('microbatches')}: step {self.get('step_time_ms', 0):.3f} ms, "
                f"utilization {self.get('utilization_without_kfac', 0):.3f} -> "
                f"{self.get('utilization_with_kfac', 0):.3f}>")


def _schedule_module(module: Module, schedule: str, stages: int, microbatches: int,
                     policy: str, kfac: str, refresh_steps: int, chunks: int,
                     device: str | None, memory_cap_gb: float | None) -> Report:
    """pf-pipeline on a copy of `module`, with the report and timeline written
    to a temporary directory and read back."""
    with tempfile.TemporaryDirectory(prefix="pipefisher-") as tmp:
        report_file = Path(tmp, "report.json")
        svg_file = Path(tmp, "timeline.svg")
        trace_file = Path(tmp, "trace.json")
        options = [f"stages={int(stages)}", f"microbatches={int(microbatches)}",
                   f"schedule={schedule}", f"kfac={kfac}", f"policy={policy}",
                   f"refresh-steps={int(refresh_steps)}", f"chunks={int(chunks)}",
                   f"report={report_file}", f"svg={svg_file}", f"trace={trace_file}"]
        if device is not None:
            options.append(f"device={device}")
        if memory_cap_gb is not None:
            options.append(f"memory-cap-mb={float(memory_cap_gb) * 1e3}")
        for value in (schedule, policy, kfac, device or ""):
            if any(c in value for c in " {}\"'"):
                raise ScheduleError(f"invalid option value {value!r}")
        copy = module.clone()
        try:
            copy.run_pipeline("pf-pipeline{" + " ".join(options) + "}")
        except Exception as err:  # the pipeline's diagnostics, as a ScheduleError
            diagnostics = getattr(err, "diagnostics", str(err))
            raise ScheduleError("cannot schedule the module", diagnostics) from err
        return Report(report_file.read_text(), svg_file.read_text(), trace_file.read_text())


def schedule(profile_or_module: "Module | str | os.PathLike | Mapping | None" = None,
             schedule: str = "chimera", stages: int = 8, microbatches: int = 8, *,
             policy: str = "pf", refresh_steps: int = 0, chunks: int = 2,
             layers_per_stage: int = 0, device: str | None = None, model: str | None = None,
             microbatch_size: int = 0, seq_len: int = 0, precision: str = "fp32",
             kfac: str = "bubbles", max_overhead: float | None = None, margin: float = 0.05,
             split_pieces: int = 8, steady_state: bool = True,
             memory_cap_gb: float | None = None, optimizer_states: float = 2.0,
             validate: bool = False) -> Report:
    """Schedules one training step's pipeline and places the K-FAC work into its bubbles.

    ``profile_or_module`` is the cost model:

    * a :class:`~pipefisher.Module` (imported with or without weights): the
      ``pf-pipeline`` pass partitions its encoder blocks and schedules them,
      with each op costed by the analytic model on ``device`` (default a100);
    * a profile: a path to a profile JSON (docs/profile-format.md) or the
      profile as a dictionary;
    * ``None`` with ``device`` and ``model`` (``"p100"``, ``"bert-large"``):
      the analytic cost model of ``pf-sched --device --model``
      (``microbatch_size``, ``seq_len``, ``precision`` refine it).

    ``schedule`` is gpipe, 1f1b, interleaved, chimera, zb-h1, zb-h2, zb-v,
    dualpipe or dualpipev; ``stages`` devices; ``microbatches`` per step;
    ``policy`` pf, pipefisher or none; ``refresh_steps`` 0 picks K
    automatically. The other options are pf-sched's of the same names.
    Raises :class:`~pipefisher.errors.ScheduleError` naming what is wrong.
    """
    if isinstance(profile_or_module, Module):
        if model is not None:
            raise ScheduleError("model= is for the analytic cost model; a module is its own model")
        return _schedule_module(profile_or_module, schedule, stages, microbatches, policy,
                                "none" if policy == "none" else kfac, refresh_steps, chunks,
                                device, memory_cap_gb)
    profile_json, source = "", ""
    if profile_or_module is None:
        if device is None or model is None:
            raise ScheduleError("a cost model is required: a module, a profile (path or "
                                "dictionary), or device= and model=")
    elif isinstance(profile_or_module, Mapping):
        profile_json, source = json.dumps(profile_or_module), "<profile dict>"
    elif isinstance(profile_or_module, (str, os.PathLike)):
        path = Path(profile_or_module)
        try:
            profile_json, source = path.read_text(), str(path)
        except OSError as err:
            raise ScheduleError(f"cannot read the profile '{path}': {err.strerror}") from err
    else:
        raise TypeError("schedule expects a Module, a profile path or dictionary, or None "
                        f"(with device= and model=), got {type(profile_or_module).__name__}")
    if profile_json and (device is not None or model is not None):
        raise ScheduleError("give either a profile or device=/model=, not both")
    if stages < 1 or microbatches < 1:
        raise ScheduleError(f"stages and microbatches must be positive, got {stages} and "
                            f"{microbatches}")
    if memory_cap_gb is not None and memory_cap_gb <= 0:
        raise ScheduleError(f"memory_cap_gb must be positive, got {memory_cap_gb}")
    report_json, svg, trace, text, warnings = _core.schedule_costs(
        profile_json, source, device or "", model or "", int(microbatch_size), int(seq_len),
        precision, schedule, int(stages), int(microbatches), int(layers_per_stage), int(chunks),
        policy, int(refresh_steps), max_overhead, float(margin), int(split_pieces),
        bool(steady_state), memory_cap_gb, float(optimizer_states), bool(validate))
    return Report(report_json, svg, trace, text, warnings)
