"""ScreenSpot-V2 (OS-Atlas's relabelled ScreenSpot): 1,272 instructions, mobile / desktop / web x text / icon.

Published at https://huggingface.co/datasets/OS-Copilot/ScreenSpot-v2 (``[x, y, w, h]`` boxes: open-compass/VLMEvalKit
``vlmeval/dataset/GUI/screenspot_v2.py:115-131`` at e8e78f0 adds ``w``/``h`` to reach the far corner). Layout::

    DIR/screenspot_mobile_v2.json  DIR/screenspot_desktop_v2.json  DIR/screenspot_web_v2.json
    DIR/screenspotv2_image/<img_filename>        (unzipped screenspotv2_image.zip)

Each file is a JSON list of ``{"img_filename", "bbox": [x, y, w, h] (pixels, top-left + size), "instruction",
"data_type": "text"|"icon", "data_source"}``. The platform comes from the file name. The format has no id field:
``sample_id`` is always ``<file stem>:<0-based index>`` (e.g. ``screenspot_web_v2:17``; an ``id`` key in a record is
ignored), the index counting every record of the file (``groundwork.records.iter_records``: a list, then any further
documents). ``img_filename`` must stay inside ``screenspotv2_image/`` (no ``..`` out of it, no absolute path:
``path_outside_root``). The image size is read from the image file, in its displayed frame.

Metrics: the 6 platform x ui_type cells, per-platform and per-ui_type totals, and **both** averages, labelled
(bytedance/UI-TARS#1 is the trap): ``micro_avg`` = correct / total over all samples; ``macro_avg`` = mean of the cell
accuracies over the platform x ui_type cells that have samples (SeeClick / UGround paper style).
"""

from __future__ import annotations

import logging
import os

from groundwork.markdown import md_table
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xywh,
    check_extent,
    check_unit,
    instruction_text,
    require_str,
)
from gui_grounding.data.schema import Sample, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import cell, check_results, fmt_cell, tally

logger = logging.getLogger(__name__)

PLATFORMS = ("mobile", "desktop", "web")
UI_TYPES = ("text", "icon")
IMAGE_DIR = "screenspotv2_image"


class ScreenSpotV2(Benchmark):
    """ScreenSpot-V2 reader and metrics (module docstring gives the format)."""

    name = "screenspot-v2"
    listing_order = 10
    headline_rule = (
        "micro average: correct / total over every sample (the number GTA1 and the ScreenSpot leaderboards report; "
        "the macro average of the 6 platform x ui_type cells is printed beside it, bytedance/UI-TARS#1)"
    )
    headline_source = "Yan98/GTA1 README.md:21 at 81f0c4c (ScreenSpot-V2 column, one accuracy over the set)"
    layout_help = (
        "ScreenSpot-V2, published at huggingface.co/datasets/OS-Copilot/ScreenSpot-v2. DIR holds "
        "screenspot_{mobile,desktop,web}_v2.json (lists of {img_filename, bbox [x,y,w,h] px, instruction, "
        "data_type text|icon, data_source}) and screenspotv2_image/ (the unzipped images)."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read the three platform files of ``data_dir``; samples in original pixels.

        A missing platform file is a counted warning (that platform is not evaluated); an unreadable file or element, a
        missing field, a box that is not 4 numbers or a missing/corrupt image is an error (the record is not scored,
        ``file:[index]`` ref); a box outside the image, an inverted box or an empty instruction is kept with a warning
        (package docstring). Sample ids are ``<file stem>:<index>``, handed out by :class:`SampleIds` (unique by
        construction; the check guards it).

        Raises:
            FileNotFoundError: ``data_dir`` holds none of the three files.
            SampleError: in strict mode, the first bad record.
        """
        paths = {p: os.path.join(data_dir, f"screenspot_{p}_v2.json") for p in PLATFORMS}
        if not any(os.path.isfile(p) for p in paths.values()):
            raise FileNotFoundError(f"no screenspot_{{mobile,desktop,web}}_v2.json in {data_dir}. {self.layout_help}")
        image_dir = os.path.join(data_dir, IMAGE_DIR)
        load = AnnotationLoad(self.need_pixels)
        for platform, path in paths.items():
            if not os.path.isfile(path):
                load.report.warn(path, "missing_annotation_file", f"not found; platform {platform!r} is not evaluated")
                logger.warning("%s not found: platform %r is not evaluated", path, platform)
                continue
            load.read(
                path,
                lambda sid, rec, ref, pl=platform: self._sample(rec, ref, sid, pl, image_dir, load),
                strict,
                id_key=None,
            )
        return load.finish(data_dir, data_dir)

    @staticmethod
    def _sample(rec, ref, sample_id, platform, image_dir, load: AnnotationLoad) -> Sample:
        report = load.report
        require(rec, ("img_filename", "bbox", "instruction", "data_type"), ref)
        instruction = instruction_text(rec, "instruction", ref, report)
        ui_type = require_str(rec, "data_type", ref)
        box = box_from_xywh(rec["bbox"], ref, report)
        image_path, width, height = load.image(image_dir, rec["img_filename"], ref)
        check_unit(box, "pixel", ref, report, "bbox")  # [x, y, w, h] pixels, as [x_min, y_min, x_max, y_max]
        check_extent(box, width, height, ref, report, "bbox")
        extra = {"img_filename": rec["img_filename"], "data_source": rec.get("data_source")}
        return Sample(
            sample_id,
            instruction,
            image_path,
            [box],
            width,
            height,
            source=rec.get("data_source"),
            platform=platform,
            ui_type=ui_type,
            extra=extra,
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """Cells and averages (accuracy in percent, 2 decimals).

        Returns:
            ``{"by_platform_ui_type": {platform: {ui_type: cell}}, "by_platform": {platform: cell},
            "by_ui_type": {ui_type: cell}, "micro_avg": cell + definition, "macro_avg": {"accuracy", "num_cells",
            "definition"}}``; a cell is ``{"num_correct", "num_total", "wrong_format", "accuracy", "ci95"}``. The macro
            average is computed from unrounded cell accuracies, then rounded.
        """
        check_results(samples, results)
        cells = tally(
            samples, results, lambda s: [(s.platform, s.ui_type)], order=[(p, u) for p in PLATFORMS for u in UI_TYPES]
        )
        nested: dict[str, dict] = {}
        for (platform, ui_type), c in cells.items():
            nested.setdefault(platform, {})[ui_type] = c
        micro = tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0))
        fractions = [c["num_correct"] / c["num_total"] for c in cells.values()]
        macro = round(100.0 * sum(fractions) / len(fractions), 2) if fractions else 0.0
        return {
            "by_platform_ui_type": nested,
            "by_platform": tally(samples, results, lambda s: [s.platform], order=PLATFORMS),
            "by_ui_type": tally(samples, results, lambda s: [s.ui_type], order=UI_TYPES),
            "micro_avg": {**micro, "definition": "correct / total over all samples"},
            "macro_avg": {
                "accuracy": macro,
                "num_cells": len(fractions),
                "definition": "mean of the platform x ui_type cell accuracies, over the cells that have "
                "samples (SeeClick / UGround paper style)",
            },
        }

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """The micro average (correct / total over every sample)."""
        return metrics["micro_avg"]

    def table(self, metrics: dict) -> str:
        """One row per platform (text, icon, both), then the micro and macro averages, accuracy in percent."""
        rows = []
        for platform, by_ui in metrics["by_platform_ui_type"].items():
            cols = [fmt_cell(by_ui[u]) if u in by_ui else "-" for u in UI_TYPES]
            rows.append([platform, *cols, fmt_cell(metrics["by_platform"][platform])])
        ui = metrics["by_ui_type"]
        by_ui = [fmt_cell(ui[u]) if u in ui else "-" for u in UI_TYPES]
        rows.append(["all platforms", *by_ui, fmt_cell(metrics["micro_avg"])])
        macro = metrics["macro_avg"]
        return (
            md_table(["platform", "text", "icon", "all"], rows)
            + f"\n\n**micro avg** (correct / total): {fmt_cell(metrics['micro_avg'])}  \n"
            f"**macro avg** (mean of {macro['num_cells']} platform x ui_type cells): {macro['accuracy']:.2f} (no "
            "interval: a mean of cell accuracies is not one proportion)  \n"
            "Cells: accuracy % [95% Wilson interval] (correct/total)."
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (ScreenSpotV2,)
