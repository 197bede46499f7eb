"""Our canonical JSONL (e.g. the web collector's test split) as a benchmark.

``--data`` is a JSONL/JSON file, or a folder holding ``test.jsonl``. Records are read by
:func:`gui_grounding.schema.load_samples` (canonical, GTA1 and VLM-R1 formats; boxes in original pixels, image paths
relative to the file's folder; bad records skipped and counted with ``file:line``). Metrics: ``overall`` and
``by_platform`` / ``by_ui_type`` / ``by_source`` over the samples that carry each field, accuracy in percent.
"""

from __future__ import annotations

import os

from gui_grounding.eval.benchmarks import breakdown_table, cell, check_results, tally
from gui_grounding.eval.benchmarks.base import Benchmark
from gui_grounding.schema import LoadReport, Sample, load_samples

BREAKDOWN_KEYS = ("platform", "ui_type", "source")


class Canonical(Benchmark):
    """Canonical JSONL reader (``gui_grounding.schema``) and breakdown metrics."""

    name = "canonical"
    layout_help = (
        "Our canonical JSONL (README 'Data'): a .jsonl/.json file of {instruction, image_path, target_bbox "
        "{x_min,y_min,x_max,y_max} px, ...} records (also GTA1 / VLM-R1 records), or a folder holding test.jsonl; "
        "image paths are relative to the file's folder."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], LoadReport]:
        """Samples of ``data_dir`` (a file, or a folder with ``test.jsonl``).

        Raises:
            FileNotFoundError: neither an existing file nor a folder with ``test.jsonl``.
            SampleError: in strict mode, the first bad record.
        """
        path = os.path.join(data_dir, "test.jsonl") if os.path.isdir(data_dir) else data_dir
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found. {self.layout_help}")
        return load_samples([path], strict=strict)

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"overall": cell, "by_platform": ..., "by_ui_type": ..., "by_source": ...}`` (breakdowns only for fields
        some sample has); a cell is ``{"num_correct", "num_total", "wrong_format", "accuracy"}`` in percent."""
        check_results(samples, results)
        out = {"overall": tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0))}
        for key in BREAKDOWN_KEYS:
            cells = tally(samples, results, lambda s, k=key: [getattr(s, k)] if getattr(s, k) is not None else [])
            if cells:
                out[f"by_{key}"] = dict(sorted(cells.items()))
        return out

    def table(self, metrics: dict) -> str:
        """Overall, then each breakdown (accuracy in percent)."""
        return breakdown_table("click accuracy", metrics, [(f"by_{k}", k) for k in BREAKDOWN_KEYS])
