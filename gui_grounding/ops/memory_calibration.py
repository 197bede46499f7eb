"""The calibration of the memory estimate (:mod:`gui_grounding.ops.memory`): the measured correction of its formulas,
read from ``benchmarks/results/memory_calibration.json`` (:func:`load_calibration`).

Rule (docs/GPU_CHECK.md, "The memory estimator against these peaks"): ``activation_factor`` multiplies the
activation-like parts (activations, log-prob head, prefill working set), ``overhead_gib`` is added once (CUDA context,
NCCL buffers, allocator fragmentation); the file says where its numbers come from and the table prints that label on
every estimate. The file is read through the one JSON side-file rule (``groundwork.records.load_json_file``: a regular
file, strict JSON, at most ``CALIBRATION_BYTES``); a value that is not a finite number, a factor <= 0 or an overhead
< 0 is one ``ValueError`` line naming the file and the key.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

from groundwork.records import load_json_file

CALIBRATION_BYTES = 1 << 20  # a calibration file is a few lines of JSON
#: ``benchmarks/results/memory_calibration.json`` of this repository (the estimator's default calibration)
DEFAULT_CALIBRATION_PATH = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "benchmarks",
    "results",
    "memory_calibration.json",
)


@dataclass(frozen=True)
class Calibration:
    """The measured correction of the formulas, from ``benchmarks/results/memory_calibration.json``.

    ``activation_factor`` multiplies the activation-like parts; ``overhead_gib`` (CUDA context, NCCL buffers, allocator
    fragmentation) is added to each phase. ``measured_peak_gib`` / ``predicted_peak_gib``: the measurement the factor
    comes from and this estimator's uncalibrated prediction for the same shape (``measurement`` describes it);
    ``source``, ``device``: where and how it was measured; ``is_gpu_measurement``: false for CPU/published figures.
    ``label`` is printed with every estimate.
    """

    activation_factor: float = 1.0
    overhead_gib: float = 0.0
    label: str = "uncalibrated: formulas only (no calibration file)"
    source: str = ""
    device: str = ""
    is_gpu_measurement: bool = False
    measured_peak_gib: float | None = None
    predicted_peak_gib: float | None = None
    measurement: str = ""
    path: str | None = None

    def describe(self) -> str:
        """One line: the label, the factor and overhead, and where they come from."""
        ratio = ""
        if self.measured_peak_gib is not None and self.predicted_peak_gib is not None:
            ratio = f" = measured {self.measured_peak_gib:.3f} / predicted {self.predicted_peak_gib:.3f} GiB"
        shown = self.path
        if shown and os.path.isabs(shown):
            repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            rel = os.path.relpath(shown, repo)
            shown = shown if rel.startswith("..") else rel
        where = f" [{shown}]" if shown else ""
        return (
            f"calibration: {self.label}; activation factor {self.activation_factor:.3f}{ratio}; overhead "
            f"{self.overhead_gib:.2f} GiB; device {self.device or '-'}{where}"
        )


def load_calibration(path: str | None = DEFAULT_CALIBRATION_PATH) -> Calibration:
    """The :class:`Calibration` in ``path`` (JSON object; see ``benchmarks/results/memory_calibration.json``).

    ``activation_factor`` is the file's, else ``measured_peak_gib / predicted_peak_gib``; ``overhead_gib`` the file's,
    else 0. ``path=None`` or a missing default file: uncalibrated (factor 1, no overhead, labelled so).

    Raises:
        ValueError: the file cannot be read, is not an object, or holds a non-positive factor or negative overhead.
    """
    if path is None or (path == DEFAULT_CALIBRATION_PATH and not os.path.isfile(path)):
        return Calibration()
    data = load_json_file(path, "calibration", max_bytes=CALIBRATION_BYTES)  # a regular file, strict JSON
    if not isinstance(data, dict):
        raise ValueError(f"calibration {path}: must be a JSON object")

    def num(key: str) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"calibration {path}: {key} must be a number, got {value!r}")
        return float(value)

    measured, predicted = num("measured_peak_gib"), num("predicted_peak_gib")
    factor = num("activation_factor")
    if factor is None:
        factor = measured / predicted if measured and predicted else 1.0
    overhead = num("overhead_gib") or 0.0
    if factor <= 0 or overhead < 0:
        raise ValueError(f"calibration {path}: activation_factor must be > 0 and overhead_gib >= 0")
    measurement = data.get("measurement", "")
    return Calibration(
        activation_factor=factor,
        overhead_gib=overhead,
        label=str(data.get("label") or "unlabelled calibration"),
        source=str(data.get("source", "")),
        device=str(data.get("device", "")),
        is_gpu_measurement=bool(data.get("is_gpu_measurement", False)),
        measured_peak_gib=measured,
        predicted_peak_gib=predicted,
        measurement=measurement if isinstance(measurement, str) else json.dumps(measurement),
        path=path,
    )
