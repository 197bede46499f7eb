"""MMBench-GUI L2 (element grounding): screenshots of six platforms, ``basic`` and ``advanced`` instructions.

Published at https://huggingface.co/datasets/OpenGVLab/MMBench-GUI (``L2_annotations.json`` and
``MMBench-GUI-OfflineImages.zip``); official code at 896ddf1d3aa4d6464d0c55c6416518f889d78d77: the reader and
scorer open-compass/MMBench-GUI ``benchmarks/l2_element_grounding.py`` (``GUIElementGrounding``) and the summary
open-compass/MMBench-GUI ``benchmarks/matrics.py`` (``level2_calculate_scores``). Layout
(open-compass/MMBench-GUI ``README.md:88-102`` at 896ddf1)::

    DIR/L2_annotations.json
    DIR/offline_images/{os_windows,os_mac,os_linux,os_ios,os_android,os_web}/<image_path>

Records (a JSON list): ``{"index", "image_path", "platform", "app_name", "instruction", "bbox": [x1, y1, x2, y2],
"image_size": [w, h], "grounding_type": "basic"|"advanced", "data_type": "icon"|"text"}``. The field names are the
ones the official code reads (``instruction``, ``bbox``, ``platform``, ``grounding_type``, ``data_type``,
``app_name``: open-compass/MMBench-GUI ``benchmarks/l2_element_grounding.py:64-70,169-264`` at 896ddf1) plus
``index`` and ``image_size``, which third-party readers of the released file use (sjz5202/GUI-AIMA
``eval/mmbench_gui_l2.py`` at c7952311c2622efa5836c2f7e39bd2687a0c39c1: ``ex["index"]``, ``ex["image_size"]``;
unverified here: the released ``L2_annotations.json`` itself could not be read).

Image path: the official reader joins the platform folder and the record's path, ``f"{platform}/{image_path}"``
(``:66-70``), under ``offline_images/`` (``:61``): ``platform`` is the folder name (``os_windows`` ...). The platform
must stay inside ``offline_images/`` and ``image_path`` inside its platform folder (no ``..`` out, no absolute path:
``path_outside_root``). ``sample_id`` is the record's ``index`` (``groundwork.validate.explicit_id``: ``7`` and ``"7"``
are one id), else the generated ``L2_annotations:<0-based index>``; an id handed out twice refuses the load.

**Boxes** (``:169-213``): the image size is read from the image file (``Image.open(...).size``, ``:178-179``; the
record's ``image_size`` is not used by the scorer). A box whose four values all lie in ``[0, 1]`` is normalised
(the released file's form) and is multiplied by the image size here; otherwise it is pixels (the scorer divides it
by the image size). A value of exactly ``-1`` is read as ``0`` in both branches (``make_safe``, ``:181-186``). A box
that is then outside ``[0, 1]`` of the image makes the official scorer raise ``ValueError`` (``:210-213``): such a
record cannot be scored and is an error here (``bad_box``, naming the rule), not a crash. A pixel box that mixes
fractions below 1 with larger values is kept as pixels, as the scorer reads it, with a ``suspect_unit`` warning; an
inverted box is kept (no point can hit it) with an ``inverted_box`` warning. Rescoring without the image uses the
record's ``image_size`` (``image_unavailable`` warning); without either, a normalised box cannot be placed: error
``missing_image``. ``image_size`` differing from the file is an ``img_size_mismatch`` warning (the file wins, as in
the scorer).

**Predicted points**: the official scorer normalises a parsed click point by dividing it by the image size when
either coordinate is above 1, and otherwise takes it as already normalised (``:222-228``), so a raw 0-1000 answer is
read as pixels and mis-scored, and a pixel answer inside the top-left 1x1 pixel is read as normalised. Here every
prediction is in original-image pixels: the model's adapter converts its answer (0-1000, normalised or resized
pixels) before scoring, and the shared judge tests it inclusively against the pixel box, the official
``bbox[0] <= x <= bbox[2] and bbox[1] <= y <= bbox[3]`` (``:230-232``) in pixels. ``data_type`` must be ``icon`` or
``text`` and ``grounding_type`` ``basic`` or ``advanced`` (``bad_field`` otherwise): the summary counts only those
(a record of another data_type would be in its platform's total but never correct, ``matrics.py:97-115``; another
grounding_type is left out of the headline, ``:134-165``).

**Headline** (``level2_calculate_scores``, open-compass/MMBench-GUI ``benchmarks/matrics.py:91-168`` at 896ddf1):
per level (basic, advanced) and platform, ``Total accuracy = (icon correct + text correct) / total`` (``:111-115``);
``Basic accuracy`` = the sum over platforms of ``Total accuracy x platform total / level total`` (``:134-145``), i.e.
the sample-weighted mean over platforms, which is correct / total over the level's records; ``Advanced accuracy``
likewise (``:146-160``); ``Average accuracy = mean(Basic, Advanced)`` (``:162``), the number the paper's L2 table
reports as "Avg" (open-compass/MMBench-GUI ``assets/L2.png`` at 896ddf1, e.g. UI-TARS-1.5-7B 64.32, which is not the
plain mean of its 12 platform x level cells, 64.84). Beside it ``overall`` pools both levels (correct / total over all
records), what ZJU-REAL/ClawGUI ``clawgui-eval/metric/mmbenchgui_metric.py:168-198`` at
d990d3e3f2390ced708771d9681d3c4f9a6cbef5 reports as ``overall``; the two differ when the levels differ in size.
Where the official summary crashes (a level, or a platform's icon or text subset, without records: ``KeyError`` /
division by zero, ``:109-110,134-135``) ours reports what is present: the headline is the mean over the levels that
have records (``num_levels``), an empty subset has no cell.
"""

from __future__ import annotations

import logging
import os

from groundwork import validate
from groundwork.markdown import md_table
from gui_grounding.data.annotations import (
    UNKNOWN_SIZE,
    BenchmarkLoadReport,
    box_from_xyxy,
    check_extent,
    image_file,
    instruction_text,
    is_number,
    require_str,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, fmt_cell, tally

logger = logging.getLogger(__name__)

ANNOTATION_FILE = "L2_annotations.json"
IMAGE_DIR = "offline_images"
#: the platform folders, in the README's order (the table's column order; other values come after, as found)
PLATFORMS = ("os_windows", "os_mac", "os_linux", "os_ios", "os_android", "os_web")
LEVELS = ("basic", "advanced")
DATA_TYPES = ("icon", "text")


def one_of(rec: dict, key: str, allowed: tuple[str, ...], ref: str) -> str:
    """``rec[key]`` when it is one of ``allowed``.

    Raises:
        SampleError: ``bad_field`` otherwise (naming the allowed values).
    """
    value = require_str(rec, key, ref)
    if value not in allowed:
        raise SampleError(ref, "bad_field", f"{key} must be one of {', '.join(allowed)}, got {short_repr(value)}")
    return value


def official_box(raw: tuple, width: int, height: int, ref: str, report: BenchmarkLoadReport) -> tuple[tuple, str]:
    """``(box in pixels of the width x height image, "normalised"|"pixels")`` of a record's ``bbox`` ``raw`` (4
    numbers, :func:`~gui_grounding.data.annotations.box_from_xyxy`) by the official rule (module docstring): all four
    values in [0, 1] -> normalised, multiplied by the size; else pixels; ``-1`` read as ``0``.

    Raises:
        SampleError: ``bad_box`` for a box outside ``[0, 1]`` of the image after that reading (the official scorer
            raises on it); ``missing_image`` when the image size is unknown (0x0: rescoring without the image and no
            ``image_size``).
    """
    value = list(raw)
    if (width, height) == UNKNOWN_SIZE:
        raise SampleError(
            ref,
            "missing_image",
            "the image is unavailable and the record states no image_size: the box cannot be placed",
        )
    normalised = validate.all_fractions(raw)
    safe = [0.0 if v == -1 else v for v in raw]
    size = (width, height, width, height)
    fractions = safe if normalised else [v / s for v, s in zip(safe, size, strict=True)]
    if not all(0.0 <= f <= 1.0 for f in fractions):
        raise SampleError(
            ref,
            "bad_box",
            f"bbox {short_repr(value)} lies outside the {width}x{height} image ({[round(f, 4) for f in fractions]} "
            "of it): the official scorer raises 'bbox out of range' on it (l2_element_grounding.py:210-213)",
        )
    if not normalised and any(0.0 < v < 1.0 and v != int(v) for v in safe):
        report.warn(ref, "suspect_unit", f"bbox {short_repr(value)} mixes fractions and pixels; read as pixels (kept)")
    box = tuple(f * s for f, s in zip(fractions, size, strict=True)) if normalised else tuple(safe)
    return box, "normalised" if normalised else "pixels"


class MMBenchGUIL2(Benchmark):
    """MMBench-GUI L2 reader and metrics (module docstring gives the format and the rules)."""

    name = "mmbench-gui-l2"
    listing_order = 61
    headline_rule = (
        "Average accuracy = mean(Basic, Advanced), each level's accuracy the sample-weighted mean of its platforms' "
        "accuracies (= correct / total over the level); the pooled correct / total over both levels is printed "
        "beside it"
    )
    headline_source = (
        "open-compass/MMBench-GUI benchmarks/matrics.py:91-168 (level2_calculate_scores) at "
        "896ddf1d3aa4d6464d0c55c6416518f889d78d77"
    )
    layout_help = (
        "MMBench-GUI L2, published at huggingface.co/datasets/OpenGVLab/MMBench-GUI. DIR holds L2_annotations.json "
        "(a list of {index, image_path, platform, app_name, instruction, bbox [x1,y1,x2,y2] normalised 0-1 (or px), "
        "image_size, grounding_type basic|advanced, data_type icon|text}) and offline_images/<platform>/<image_path> "
        "(the unzipped MMBench-GUI-OfflineImages.zip)."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read ``L2_annotations.json``; samples in original pixels of the image files.

        Errors (not scored, counted with ``file:[index]``): an unreadable file or element, a missing field, a
        ``data_type`` / ``grounding_type`` outside the official values, a box that is not 4 numbers or lies outside
        the image (the official scorer raises), a missing or corrupt image. Warnings (kept and scored): an inverted
        box, a box mixing fractions and pixels, an ``image_size`` differing from the file, an empty instruction.

        Raises:
            FileNotFoundError: no ``L2_annotations.json`` in ``data_dir``.
            DuplicateIdError: an ``index`` handed out twice.
            SampleError: in strict mode, the first error.
        """
        path = os.path.join(data_dir, ANNOTATION_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found. {self.layout_help}")
        image_root = os.path.join(data_dir, IMAGE_DIR)
        load = AnnotationLoad(self.need_pixels)
        load.read(path, lambda sid, rec, ref: self._sample(sid, rec, ref, image_root, load), strict, id_key="index")
        return load.finish(path, path)

    @staticmethod
    def _sample(sample_id, rec, ref, image_root, load: AnnotationLoad) -> Sample:
        report = load.report
        require(rec, ("image_path", "platform", "instruction", "bbox", "grounding_type", "data_type"), ref)
        instruction = instruction_text(rec, "instruction", ref, report)
        level = one_of(rec, "grounding_type", LEVELS, ref)
        data_type = one_of(rec, "data_type", DATA_TYPES, ref)
        platform = require_str(rec, "platform", ref)
        raw = box_from_xyxy(rec["bbox"], ref, report)  # 4 finite numbers (bad_box); inverted_box warning
        platform_dir = image_file(image_root, platform, ref)  # the platform folder, inside offline_images/
        image_path = image_file(platform_dir, rec["image_path"], ref)
        stated = rec.get("image_size")
        width, height = load.sizes(image_path, ref, stated=stated, report=report)
        known = isinstance(stated, (list, tuple)) and len(stated) == 2 and all(is_number(v) for v in stated)
        if known and (width, height) != UNKNOWN_SIZE and (width, height) != (stated[0], stated[1]):
            report.warn(
                ref,
                "img_size_mismatch",
                f"image_size {short_repr(stated)} differs from the image file as read, {width}x{height}: the file's "
                "size is used, as the official scorer uses it",
            )
        box, convention = official_box(raw, width, height, ref, report)
        report.notes[f"bbox_{convention}"] += 1
        check_extent(box, width, height, ref, report, "bbox")
        app = rec.get("app_name")
        extra = {
            "grounding_type": level,
            "app_name": app if isinstance(app, str) else None,
            "image_rel": rec["image_path"],
            "bbox_raw": list(rec["bbox"]),
            "bbox_convention": convention,
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            [box],
            width,
            height,
            source="mmbench-gui",
            platform=platform,
            ui_type=data_type,
            extra=extra,
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """The official summary's numbers and ours beside them (accuracy in percent, 2 decimals).

        Returns:
            ``{"levels": {level: cell}`` (the official Basic / Advanced accuracy: correct / total over the level),
            ``"average": {"accuracy", "num_levels", "definition"}`` (mean of the level accuracies, unrounded then
            rounded: the headline), ``"overall": cell`` (pooled over both levels), ``"by_level_platform": {level:
            {platform: {"all": cell, "icon": cell, "text": cell}}}`` (the official per-platform Total / Icon / Text
            accuracy; a subset without records has no cell), ``"by_platform"`` and ``"by_data_type"`` (pooled over
            both levels)``}``; cells are :func:`gui_grounding.eval.tables.cell`. Platforms in :data:`PLATFORMS` order,
            others after.
        """
        check_results(samples, results)
        levels = tally(samples, results, lambda s: [s.extra.get("grounding_type")], order=LEVELS)
        fractions = [c["num_correct"] / c["num_total"] for c in levels.values()]
        average = round(100.0 * sum(fractions) / len(fractions), 2) if fractions else 0.0
        nested: dict[str, dict] = {}
        for level in levels:
            in_level = [s for s in samples if s.extra.get("grounding_type") == level]
            totals = tally(in_level, results, lambda s: [s.platform], order=PLATFORMS)
            types = tally(in_level, results, lambda s: [(s.platform, s.ui_type)])
            nested[level] = {
                p: {"all": c, **{t: types[(p, t)] for t in DATA_TYPES if (p, t) in types}} for p, c in totals.items()
            }
        pooled = tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0))
        return {
            "levels": levels,
            "average": {
                "accuracy": average,
                "num_levels": len(fractions),
                "definition": "mean of the level accuracies (basic, advanced), each correct / total over its level "
                "(the sample-weighted mean of its platforms): the official Average accuracy",
            },
            "overall": {**pooled, "definition": "correct / total pooled over both levels (ClawGUI's overall)"},
            "by_level_platform": nested,
            "by_platform": tally(samples, results, lambda s: [s.platform], order=PLATFORMS),
            "by_data_type": tally(samples, results, lambda s: [s.ui_type], order=DATA_TYPES),
        }

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """``{"accuracy": Average accuracy}`` alone: a mean of two level accuracies has no single count or interval."""
        return {"accuracy": metrics["average"]["accuracy"]}

    def table(self, metrics: dict) -> str:
        """Level x platform accuracies (the paper's L2 table layout) with each level's accuracy, the Average and the
        pooled accuracy, then per (level, platform) icon / text and the pooled breakdowns (accuracy in percent)."""
        platforms = list(metrics["by_platform"])
        rows = []
        for level, by_platform in metrics["by_level_platform"].items():
            cols = [f"{by_platform[p]['all']['accuracy']:.2f}" if p in by_platform else "-" for p in platforms]
            rows.append([level, *cols, fmt_cell(metrics["levels"][level])])
        detail = []
        for level, by_platform in metrics["by_level_platform"].items():
            for p, cells in by_platform.items():
                detail.append([level, p, *(fmt_cell(cells[t]) if t in cells else "-" for t in ("all", *DATA_TYPES))])
        average = metrics["average"]
        return (
            md_table(["level", *platforms, "level accuracy % [95% CI] (correct/total)"], rows)
            + f"\n\n**Average** (mean of {average['num_levels']} level accuracies, the headline): "
            f"{average['accuracy']:.2f} (no interval: a mean of two accuracies is not one proportion)  \n"
            f"**pooled** (correct / total over both levels, ClawGUI's overall): {fmt_cell(metrics['overall'])}\n\n"
            + md_table(["level", "platform", "all", "icon", "text"], detail, left=2)
            + "\n\n"
            + breakdown_table(
                "MMBench-GUI L2 pooled accuracy by platform and data type",
                metrics,
                [("by_platform", "platform"), ("by_data_type", "data_type")],
            )
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (MMBenchGUIL2,)
