"""UI-Vision element grounding (ServiceNow, ICML 2025): desktop screenshots of 83 open-source applications, three
instruction files (basic, functional, spatial).

Published at https://huggingface.co/datasets/ServiceNow/ui-vision; official evaluation code uivision/UI-Vision at
2b79355f962a2db1402ce0ad3d261aa9cb74b855, ``eval/grounding/eval_uivision.py``, run once per annotation file
(uivision/UI-Vision ``eval/grounding/sample_script.sh:3-25`` at 2b79355). Layout (the dataset card's tree)::

    DIR/annotations/element_grounding/element_grounding_basic.json
    DIR/annotations/element_grounding/element_grounding_functional.json
    DIR/annotations/element_grounding/element_grounding_spatial.json
    DIR/images/<image_path>

Each file is a JSON list of ``{"image_path", "prompt_to_evaluate" (the instruction), "bbox": [x1, y1, x2, y2]
(pixels), "image_size": [w, h], "platform" (the application, e.g. "GIMP"), "element_type", "category"}``.
``image_path`` is relative to ``images/``: the official script joins it with the folder it is given
(uivision/UI-Vision ``eval/grounding/eval_uivision.py:289-290`` at 2b79355), and third-party readers pass
``DIR/images`` (e.g. sjz5202/GUI-AIMA ``eval/ui_vision.py:5-10`` at c7952311c2622efa5836c2f7e39bd2687a0c39c1,
``images/{image_path}``); it must stay inside ``images/`` (no ``..`` out of it, no absolute path:
``path_outside_root``). Unverified: the annotation files themselves could not be read from here, so whether
``image_path`` values start with ``element_grounding/`` (the dataset's image folder has ``element_grounding/`` and
``layout_grounding/`` subfolders) is not known; the reader joins ``images/`` with the value as the official script
does, whatever it holds. The official script reads no id field: ``sample_id`` is always ``<file stem>:<0-based
index>`` (e.g. ``element_grounding_spatial:17``; an ``id`` key in a record is ignored).

Required (the official scorer reads them; a record without one is an error, ``bad_field``): ``image_path``,
``prompt_to_evaluate``, ``bbox`` (4 finite numbers, ``bad_box``) and ``image_size`` (2 numbers > 0). ``platform``,
``element_type`` and ``category`` only label the breakdowns (a record without one is scored and left out of that
breakdown). The category is the record's own label (the repository also ships an application-to-category map,
uivision/UI-Vision ``mapdict_cat2platform.json`` at 2b79355, which this reader does not use).

Correctness (``eval_sample_positive_gt``, uivision/UI-Vision ``eval/grounding/eval_uivision.py:154-174`` at 2b79355):
reversed corners are swapped (``x1 > x2`` -> exchanged, ``y1 > y2`` -> exchanged, ``:157-160``), the box is divided by
the record's ``image_size`` (``:161-162``) and the model's normalised point is tested inclusively
(``x1 <= x <= x2 and y1 <= y <= y2``, ``:171``); no point is ``wrong_format`` (``:168-169``). With our point in
original pixels of the image file, this is the shared judge's inclusive pixel test against the swapped box (each
swap is a ``bbox_corners_swapped`` warning), scaled by ``file size / image_size`` per axis when the record's
``image_size`` differs from the file as we read it (``img_size_mismatch`` warning; the official test compares
``point / file size`` with ``bbox / image_size``, the same test). Boxes are never clipped; a box outside the image, a
zero-area box or a box whose values are all in [0, 1] (``suspect_unit``) is kept and scored with a warning.

Metrics (:meth:`UIVision.metrics`): per file ``files[basic|functional|spatial]`` = the official script's
``action_acc`` for that file (``correct / total``, ``:139-148``); ``final_avg`` = the mean of the per-file
accuracies, the README's "Final Avg" (uivision/UI-Vision ``README.md:26-55`` at 2b79355, e.g. UI-TARS-7B
(20.10 + 24.30 + 8.37) / 3 = 17.60): **the headline**. ``overall`` is the pooled micro average (correct / total over
the three files), what ZJU-REAL/ClawGUI ``clawgui-eval/metric/uivision_metric.py:155-173`` at
d990d3e3f2390ced708771d9681d3c4f9a6cbef5 prints as its "Overall Accuracy"; the files differ in size (1,772 / 1,772 /
1,935 records, sjz5202/GUI-AIMA ``eval/ui_vision.py:7-9`` at c795231), so the two differ. Breakdowns:
``by_platform`` (application), ``by_element_type``, ``by_category``, pooled over the files.
"""

from __future__ import annotations

import logging
import os

from groundwork import validate
from groundwork.markdown import md_table
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    check_extent,
    check_unit,
    instruction_text,
    scale_box_to_file,
    short_repr,
    stated_image_size,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, fmt_cell, tally
from gui_grounding.models.frames import Box

logger = logging.getLogger(__name__)

#: the three instruction files, in the README's column order
FILES = ("basic", "functional", "spatial")
ANNOTATION_DIR = os.path.join("annotations", "element_grounding")
IMAGE_DIR = "images"
BREAKDOWNS = ("platform", "element_type", "category")


def annotation_name(kind: str) -> str:
    """``element_grounding_<kind>.json``, the published name of one instruction file."""
    return f"element_grounding_{kind}.json"


def swapped_box(value, ref: str, report: BenchmarkLoadReport) -> Box:
    """``[x1, y1, x2, y2]`` (pixels) as ``(x_min, y_min, x_max, y_max)``, reversed corners exchanged as the official
    scorer exchanges them (``bbox_corners_swapped`` warning); a zero-width or zero-height box is kept with an
    ``inverted_box`` warning (only its edge can be hit).

    Raises:
        SampleError: ``bad_box`` for anything but 4 finite numbers within +-1e7 (booleans excluded).
    """
    try:
        x1, y1, x2, y2 = validate.box4(value, "bbox")
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None
    if x1 > x2 or y1 > y2:
        report.warn(
            ref, "bbox_corners_swapped", f"bbox {short_repr(value)} has reversed corners; exchanged as the scorer does"
        )
    box = (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))
    if box[0] == box[2] or box[1] == box[3]:
        report.warn(ref, "inverted_box", f"bbox {short_repr(value)} has zero width or height (kept)")
    return box


def optional_label(rec: dict, key: str, ref: str) -> str | None:
    """``rec[key]`` when it is a non-empty string (a breakdown label), None when absent or null.

    Raises:
        SampleError: ``bad_field`` for another type or an empty string; ``bad_text`` for a string that is not
            valid Unicode.
    """
    value = rec.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SampleError(ref, "bad_field", f"{key} must be a non-empty string, got {short_repr(value)}")
    try:
        return validate.text(value, key)
    except validate.Invalid as err:
        raise SampleError(ref, err.reason, err.message) from None


class UIVision(Benchmark):
    """UI-Vision element grounding reader and metrics (module docstring gives the format and the rules)."""

    name = "ui-vision"
    listing_order = 60
    headline_rule = (
        "Final Avg: the mean of the three files' accuracies (basic, functional, spatial; each correct / total over "
        "its file), a macro average; the pooled correct / total over all three files (ClawGUI's 'overall') is "
        "printed beside it"
    )
    headline_source = (
        "uivision/UI-Vision README.md:26-55 ('Final Avg' column) and eval/grounding/eval_uivision.py:139-148 "
        "(per-file action_acc) at 2b79355f962a2db1402ce0ad3d261aa9cb74b855"
    )
    layout_help = (
        "UI-Vision element grounding, published at huggingface.co/datasets/ServiceNow/ui-vision. DIR holds "
        "annotations/element_grounding/element_grounding_{basic,functional,spatial}.json (lists of {image_path, "
        "prompt_to_evaluate, bbox [x1,y1,x2,y2] px, image_size [w,h], platform, element_type, category}) and "
        "images/ (image_path is relative to it)."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read the three instruction files of ``data_dir``; samples in original pixels of the image files.

        A missing file is a counted warning (that file is not evaluated, and the headline averages the files
        present); an unreadable file or element, a record without a required field, a box that is not 4 numbers,
        an ``image_size`` that is not 2 numbers > 0 or a missing/corrupt image is an error (the record is not
        scored, ``file:[index]`` ref). Warnings (kept and scored): reversed corners (exchanged), a zero-area box, a
        box outside the image, an ``image_size`` differing from the file (box scaled), an empty instruction.

        Raises:
            FileNotFoundError: ``data_dir`` holds none of the three files.
            SampleError: in strict mode, the first bad record.
        """
        paths = {k: os.path.join(data_dir, ANNOTATION_DIR, annotation_name(k)) for k in FILES}
        if not any(os.path.isfile(p) for p in paths.values()):
            raise FileNotFoundError(
                f"no {ANNOTATION_DIR}/element_grounding_{{basic,functional,spatial}}.json in {data_dir}. "
                f"{self.layout_help}"
            )
        image_dir = os.path.join(data_dir, IMAGE_DIR)
        load = AnnotationLoad(self.need_pixels)
        for kind, path in paths.items():
            if not os.path.isfile(path):
                load.report.warn(path, "missing_annotation_file", f"not found; file {kind!r} is not evaluated")
                logger.warning("%s not found: the %r instructions are not evaluated", path, kind)
                continue
            load.read(
                path, lambda sid, rec, ref, k=kind: self._sample(sid, rec, ref, k, image_dir, load), strict, id_key=None
            )
        return load.finish(data_dir, data_dir)

    @staticmethod
    def _sample(sample_id, rec, ref, kind, image_dir, load: AnnotationLoad) -> Sample:
        report = load.report
        require(rec, ("image_path", "prompt_to_evaluate", "bbox", "image_size"), ref)
        instruction = instruction_text(rec, "prompt_to_evaluate", ref, report)
        box = swapped_box(rec["bbox"], ref, report)
        stated = stated_image_size(rec["image_size"], ref)
        labels = {key: optional_label(rec, key, ref) for key in BREAKDOWNS}
        image_path, width, height = load.image(image_dir, rec["image_path"], ref, stated=rec["image_size"])
        check_unit(box, "pixel", ref, report, "bbox")
        box = scale_box_to_file(box, stated, width, height, ref, report)
        check_extent(box, width, height, ref, report, "bbox")
        extra = {
            "file": kind,
            "image_rel": rec["image_path"],
            "bbox_raw": list(rec["bbox"]),
            "image_size": [stated[0], stated[1]],
            "category": labels["category"],
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            [box],
            width,
            height,
            source=kind,
            platform=labels["platform"],
            ui_type=labels["element_type"],
            extra=extra,
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """Per-file cells, the Final Avg and the pooled average, and the breakdowns (accuracy in percent).

        Returns:
            ``{"files": {file: cell}, "final_avg": {"accuracy", "num_files", "definition"}, "overall": cell +
            definition (pooled), "by_platform": {app: cell}, "by_element_type": {...}, "by_category": {...}}``; a
            cell is :func:`gui_grounding.eval.tables.cell`. ``final_avg`` is the mean of the unrounded accuracies of
            the files that have samples, then rounded to 2 decimals; breakdown keys in order of first appearance.
        """
        check_results(samples, results)
        files = tally(samples, results, lambda s: [s.extra.get("file")], order=FILES)
        fractions = [c["num_correct"] / c["num_total"] for c in files.values()]
        final = round(100.0 * sum(fractions) / len(fractions), 2) if fractions else 0.0
        pooled = tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0))
        out = {
            "files": files,
            "final_avg": {
                "accuracy": final,
                "num_files": len(fractions),
                "definition": "mean of the per-file accuracies (basic, functional, spatial): the README's Final Avg",
            },
            "overall": {**pooled, "definition": "correct / total pooled over the files (ClawGUI's overall)"},
        }
        getters = {
            "platform": lambda s: s.platform,
            "element_type": lambda s: s.ui_type,
            "category": lambda s: s.extra.get("category"),
        }
        for key, get in getters.items():
            out[f"by_{key}"] = tally(samples, results, lambda s, g=get: [] if g(s) is None else [g(s)])
        return out

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """``{"accuracy": Final Avg}`` alone: a mean of per-file accuracies has no single count or interval."""
        return {"accuracy": metrics["final_avg"]["accuracy"]}

    def table(self, metrics: dict) -> str:
        """One row per file, the Final Avg and the pooled average, then the breakdowns (accuracy in percent)."""
        rows = [[kind, fmt_cell(c)] for kind, c in metrics["files"].items()]
        final = metrics["final_avg"]
        return (
            md_table(["file", "accuracy % [95% CI] (correct/total)"], rows)
            + f"\n\n**Final Avg** (mean of {final['num_files']} files, the headline): {final['accuracy']:.2f} (no "
            "interval: a mean of file accuracies is not one proportion)  \n"
            f"**pooled** (correct / total over the files, ClawGUI's overall): {fmt_cell(metrics['overall'])}\n\n"
            + breakdown_table(
                "UI-Vision pooled accuracy by application, element type and category",
                metrics,
                [("by_platform", "platform"), ("by_element_type", "element_type"), ("by_category", "category")],
            )
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (UIVision,)
