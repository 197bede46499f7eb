"""ScreenSpot-Pro: 1,581 instructions on high-resolution professional software (23 applications, 6 groups, 3 OSes).

Published at https://huggingface.co/datasets/likaixin/ScreenSpot-Pro; its harness is
likaixin2000/ScreenSpot-Pro-GUI-Grounding at bd8bbbb (scoring: ``eval_screenspot_pro.py:137-160``).
Layout::

    DIR/annotations/<task>.json      one JSON list per application/OS, e.g. vscode_macos.json
    DIR/images/<img_filename>        img_filename is relative to images/ (e.g. vscode_macos/screenshot_....png)

Records: ``{"id", "img_filename", "bbox": [x1, y1, x2, y2] (pixels), "img_size": [w, h], "instruction",
"instruction_cn", "application", "platform", "ui_type": "text"|"icon", "group"}``. ``sample_id`` is the record's
``id`` (``groundwork.validate.explicit_id``: ``7`` and ``"7"`` are one id); a record whose ``id`` is absent, null, a
boolean, empty or not a scalar is still scored (the harness scores it) under the generated id ``<task>:<index>``.
The annotation file stem is kept as ``task_filename`` (what the harness logs). ``img_filename`` must stay inside
``images/`` (no ``..`` out of it, no absolute path: ``path_outside_root``).

Metrics reproduce the official harness (``eval_screenspot_pro.py``, ``evaluate()``) in our own code, for the setting
every leaderboard uses: instruction style ``instruction``, ground truth ``positive``, language ``en``. Each result
carries platform, application, group, ui_type and those three constants; :func:`calc` gives a harness cell
``{"num_correct_action", "num_total", "wrong_format_num", "action_acc", "text_acc", "icon_acc"}`` with accuracies as
**fractions** (0-1, unrounded; 0 when the subset is empty), and beside them (ours, not the harness's)
``action_ci95`` / ``text_ci95`` / ``icon_ci95``, their 95% Wilson intervals ``[low, high]`` in **percent** (null when
empty; :mod:`gui_grounding.eval.stats`). Breakdowns, keyed exactly like the harness:
``fine_grained`` "plat:{platform} app:{application} inst_style:{inst_style} gt_type:{gt_type}", ``seeclick_style``
"plat:{platform} inst_style:{inst_style} gt_type:{gt_type}", ``leaderboard_simple_style`` "group:{group}",
``leaderboard_detailed_style`` "app:{application}", and ``overall``. The harness enumerates every combination of the
values present and skips empty ones, which is the same as grouping by the combinations that occur; keys are sorted.

Correctness: the harness divides the GT box by ``img_size`` and tests the normalised point inclusively
(``x1 <= x <= x2``); with the point in pixels of the same image this is our inclusive pixel test (``judge``). A record
whose ``img_size`` differs from the image file as we read it (a resized copy, or an EXIF rotation) is kept with an
``img_size_mismatch`` warning and its box scaled by ``file size / img_size`` per axis: the harness compares
``point / image size`` with ``bbox / img_size``, which is the same test. An id handed out twice across the
annotation files (two equal ids, or an id equal to a generated one) refuses the load
(:class:`~gui_grounding.data.annotations.DuplicateIdError`). Not copied: the serial script's stale ``gt_type``
variable and the ``lang``/``language`` filter mismatch (section 2.2).
"""

from __future__ import annotations

import glob
import logging
import os

from groundwork.markdown import md_table
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xyxy,
    check_extent,
    check_unit,
    instruction_text,
    is_number,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.judge import CORRECT, WRONG_FORMAT
from gui_grounding.eval.stats import wilson_interval
from gui_grounding.eval.tables import cell, check_results, fmt_ci

logger = logging.getLogger(__name__)

# the harness settings our metrics correspond to (its --inst_style / --gt_type / --language values)
INSTRUCTION_STYLE, GT_TYPE, LANG = "instruction", "positive", "en"


def calc(rows: list[dict]) -> dict:
    """The harness's cell for ``rows`` (dicts with ``correctness`` and ``ui_type``); accuracies are fractions 0-1."""
    total = len(rows)
    correct = sum(r["correctness"] == CORRECT for r in rows)
    text = [r for r in rows if r["ui_type"] == "text"]
    icon = [r for r in rows if r["ui_type"] == "icon"]
    text_correct = sum(r["correctness"] == CORRECT for r in text)
    icon_correct = sum(r["correctness"] == CORRECT for r in icon)
    return {
        "num_correct_action": correct,
        "num_total": total,
        "wrong_format_num": sum(r["correctness"] == WRONG_FORMAT for r in rows),
        "action_acc": correct / total if total else 0,
        "text_acc": text_correct / len(text) if text else 0,
        "icon_acc": icon_correct / len(icon) if icon else 0,
        # ours, beside the harness's keys: 95% Wilson intervals in percent (gui_grounding.eval.stats)
        "action_ci95": wilson_interval(correct, total),
        "text_ci95": wilson_interval(text_correct, len(text)),
        "icon_ci95": wilson_interval(icon_correct, len(icon)),
    }


def _breakdown(rows: list[dict], fields: tuple[str, ...], key_format: str) -> dict:
    """``{key_format.format(**values): calc(rows with those values)}`` for each combination of ``fields`` present."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[f] for f in fields), []).append(r)
    return {
        key_format.format(**dict(zip(fields, combo, strict=True))): calc(groups[combo])
        for combo in sorted(groups, key=lambda c: tuple(str(v) for v in c))
    }


class ScreenSpotPro(Benchmark):
    """ScreenSpot-Pro reader and harness-equivalent metrics (module docstring gives format and rules)."""

    name = "screenspot-pro"
    listing_order = 20
    headline_rule = "micro average: correct / total over every sample (the harness's \"overall\" action_acc)"
    headline_source = "likaixin2000/ScreenSpot-Pro-GUI-Grounding eval_screenspot_pro.py evaluate() at bd8bbbb"
    layout_help = (
        "ScreenSpot-Pro, published at huggingface.co/datasets/likaixin/ScreenSpot-Pro. DIR holds annotations/*.json "
        "(lists of {id, img_filename, bbox [x1,y1,x2,y2] px, img_size [w,h], instruction, application, platform, "
        "ui_type, group}) and images/ (img_filename is relative to it)."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read every ``annotations/*.json`` (sorted by name) of ``data_dir``.

        Errors (not scored, counted): unreadable file or element, missing field, box not 4 numbers, missing or
        corrupt image. Warnings (kept and scored): box outside the image, inverted box, empty instruction,
        ``img_size`` differing from the file.

        Raises:
            FileNotFoundError: no ``annotations/*.json``.
            DuplicateIdError: a sample id is handed out twice (in one file or across files).
            SampleError: in strict mode, the first error.
        """
        files = sorted(glob.glob(os.path.join(data_dir, "annotations", "*.json")))
        if not files:
            raise FileNotFoundError(f"no annotations/*.json in {data_dir}. {self.layout_help}")
        image_dir = os.path.join(data_dir, "images")
        load = AnnotationLoad(self.need_pixels)
        for path in files:
            task = os.path.splitext(os.path.basename(path))[0]
            load.read(path, lambda sid, rec, ref, t=task: self._sample(rec, ref, sid, t, image_dir, load), strict)
        return load.finish(os.path.join(data_dir, "annotations"), data_dir)

    @staticmethod
    def _sample(rec, ref, sample_id, task, image_dir, load: AnnotationLoad) -> Sample:
        report = load.report
        require(rec, ("img_filename", "bbox", "img_size", "instruction", "application", "platform", "ui_type"), ref)
        instruction = instruction_text(rec, "instruction", ref, report)
        box = box_from_xyxy(rec["bbox"], ref, report)
        check_unit(box, "pixel", ref, report, "bbox")
        img_size = rec["img_size"]
        if not (isinstance(img_size, list) and len(img_size) == 2 and all(is_number(v) and v > 0 for v in img_size)):
            raise SampleError(ref, "bad_field", f"img_size must be [width, height] > 0, got {short_repr(img_size)}")
        image_path, width, height = load.image(image_dir, rec["img_filename"], ref, stated=img_size)
        if (width, height) != (img_size[0], img_size[1]):
            sx, sy = width / img_size[0], height / img_size[1]
            report.warn(
                ref,
                "img_size_mismatch",
                f"img_size {img_size} differs from the image file as read, "
                f"{width}x{height} ({image_path}); bbox {list(box)} scaled by "
                f"({sx:g}, {sy:g}) as the harness normalises it by img_size",
            )
            box = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
        check_extent(box, width, height, ref, report, "bbox")
        extra = {
            "group": rec.get("group"),
            "application": rec["application"],
            "task_filename": task,
            "img_filename": rec["img_filename"],
            "img_size": [width, height],
            "instruction_cn": rec.get("instruction_cn"),
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            [box],
            width,
            height,
            source=task,
            platform=rec["platform"],
            ui_type=rec["ui_type"],
            extra=extra,
        )

    @staticmethod
    def harness_rows(samples: list[Sample], results: dict[str, dict]) -> list[dict]:
        """One harness-style result per sample: platform, application, group, ui_type, the fixed instruction style /
        gt_type / lang, and our ``correctness``."""
        return [
            {
                "platform": s.platform,
                "application": s.extra.get("application"),
                "group": s.extra.get("group"),
                "ui_type": s.ui_type,
                "instruction_style": INSTRUCTION_STYLE,
                "gt_type": GT_TYPE,
                "lang": LANG,
                "correctness": results[s.sample_id]["correctness"],
            }
            for s in samples
        ]

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """The harness's ``metrics`` object: ``fine_grained``, ``seeclick_style``, ``leaderboard_simple_style``,
        ``leaderboard_detailed_style``, ``overall`` (cells from :func:`calc`, fractions 0-1)."""
        check_results(samples, results)
        rows = self.harness_rows(samples, results)
        return {
            "fine_grained": _breakdown(
                rows,
                ("platform", "application", "instruction_style", "gt_type"),
                "plat:{platform} app:{application} inst_style:{instruction_style} gt_type:{gt_type}",
            ),
            "seeclick_style": _breakdown(
                rows,
                ("platform", "instruction_style", "gt_type"),
                "plat:{platform} inst_style:{instruction_style} gt_type:{gt_type}",
            ),
            "leaderboard_simple_style": _breakdown(rows, ("group",), "group:{group}"),
            "leaderboard_detailed_style": _breakdown(rows, ("application",), "app:{application}"),
            "overall": calc(rows),
        }

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """The harness's ``overall`` as a percent :func:`~gui_grounding.eval.tables.cell` (its ``action_acc``, a
        fraction, times 100)."""
        c = metrics["overall"]
        return cell(c["num_correct_action"], c["num_total"], c["wrong_format_num"])

    def table(self, metrics: dict) -> str:
        """Leaderboard-style tables in percent: per group and per application text / icon / avg, then overall."""

        def row(label: str, c: dict) -> list:
            accuracies = [f"{100 * c['text_acc']:.2f}", fmt_ci(c, "text_ci95"), f"{100 * c['icon_acc']:.2f}"]
            accuracies += [fmt_ci(c, "icon_ci95"), f"{100 * c['action_acc']:.2f}", fmt_ci(c, "action_ci95")]
            return [label, *accuracies, c["num_correct_action"], c["num_total"], c["wrong_format_num"]]

        header = [
            *("text %", "text 95% CI", "icon %", "icon 95% CI", "avg %", "avg 95% CI"),
            *("correct", "total", "no point"),
        ]
        groups = [row(k.removeprefix("group:"), c) for k, c in metrics["leaderboard_simple_style"].items()]
        groups.append(row("overall", metrics["overall"]))
        apps = [row(k.removeprefix("app:"), c) for k, c in metrics["leaderboard_detailed_style"].items()]
        return (
            md_table(["group", *header], groups)
            + "\n\n"
            + md_table(["application", *header], apps)
            + "\n\nAccuracies are micro averages (correct / total), as the ScreenSpot-Pro harness and leaderboard "
            "report them; each 95% CI is the Wilson interval of the accuracy before it."
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (ScreenSpotPro,)
