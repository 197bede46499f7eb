"""The calibration of the memory estimate (:mod:`gui_grounding.ops.memory`): the measured correction of its formulas,
read from ``benchmarks/results/memory_calibration.json`` (:func:`load_calibration`).

Rule (docs/GPU_CHECK.md, "The memory estimator against these peaks"): ``activation_factor`` multiplies the training
phase's activation-like parts (checkpoints, transients, log-prob head), ``prefill_factor`` the generation prefill's
working set (``activation_factor`` when the file has none), ``overhead_gib`` is added once (CUDA context, NCCL buffers,
allocator fragmentation); the file says where its numbers come from and the error band of its measured cases
(``error_band``: the lowest and highest (predicted - measured) / measured), and the table prints both on every
estimate. The file is read through the one JSON side-file rule (``groundwork.records.load_json_file``: a regular
file, strict JSON, at most ``CALIBRATION_BYTES``); a value that is not a finite number, a factor <= 0, an overhead
< 0 or a band whose low end is above its high end is one ``ValueError`` line naming the file and the key.
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

    ``activation_factor`` multiplies the training phase's activation-like parts, ``prefill_factor`` the prefill working
    set (None: ``activation_factor``, see :attr:`prefill`); ``overhead_gib`` (CUDA context, NCCL buffers, allocator
    fragmentation) is added to each phase. ``error_band``: ``(low, high)`` of (predicted - measured) / measured over
    the ``band_cases`` measured cases the file lists (None: no cases). ``measured_peak_gib`` / ``predicted_peak_gib``: the measurement the factor
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
    prefill_factor: float | None = None
    error_band: tuple[float, float] | None = None
    band_cases: int = 0

    @property
    def prefill(self) -> float:
        """The factor of the prefill working set: ``prefill_factor``, else ``activation_factor``."""
        return self.activation_factor if self.prefill_factor is None else self.prefill_factor

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
            f"calibration: {self.label}; activation factor {self.activation_factor:.3f}{ratio}; prefill factor "
            f"{self.prefill:.3f}; overhead {self.overhead_gib:.2f} GiB; device {self.device or '-'}{where}"
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
    prefill = num("prefill_factor")
    if factor <= 0 or overhead < 0 or (prefill is not None and prefill <= 0):
        raise ValueError(f"calibration {path}: activation_factor and prefill_factor must be > 0 and overhead_gib >= 0")
    band, band_cases = None, 0
    raw_band = data.get("error_band")
    if raw_band is not None:
        if not isinstance(raw_band, dict):
            raise ValueError(f"calibration {path}: error_band must be an object with low, high and cases")
        low, high = (num_in(raw_band, key, path) for key in ("low", "high"))
        if low > high:
            raise ValueError(f"calibration {path}: error_band.low {low} is above error_band.high {high}")
        band, band_cases = (low, high), int(num_in(raw_band, "cases", path))
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
        prefill_factor=prefill,
        error_band=band,
        band_cases=band_cases,
    )


def num_in(data: dict, key: str, path: str) -> float:
    """``data[key]`` as a finite number (``error_band.<key>`` of the calibration at ``path``), else one ValueError."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"calibration {path}: error_band.{key} must be a number, got {value!r}")
    return float(value)
