"""OSWorld-G (JEDI): 564 instructions on desktop screenshots, 54 of them refusal items, with capability classes.

Published at https://github.com/xlang-ai/OSWorld-G, folder ``benchmark/`` (box types ``bbox`` / ``polygon`` /
``refusal`` as ZJU-REAL/ClawGUI ``clawgui-eval/judge/osworld_g_judge.py:1-26`` at d990d3e describes them).
Layout::

    DIR/OSWorld-G.json                 (and/or OSWorld-G_refined.json, the relabelled "Refined" set)
    DIR/classification_result.json     {"classified": {class_name: [{"id": ..., ...}, ...], ...}}
    DIR/images/<image_path>

Records: ``{"id", "image_path", "instruction", "box_type": "bbox"|"polygon"|"refusal", "box_coordinates"}`` with
``bbox`` = ``[x, y, w, h]`` pixels, ``polygon`` = vertices in pixels (flat ``[x1, y1, x2, y2, ...]`` or nested
``[[x, y], ...]``, both accepted), ``refusal`` = no target exists (its coordinates are ignored; the item is correct
only on an explicit refusal answer, or a point with both coordinates negative: the official rule,
``gui_grounding.eval.judge``). The image size is read from the image file (displayed frame), as the official
eval script does; ``image_path`` must stay inside ``images/`` (no ``..`` out of it, no absolute path:
``path_outside_root``). ``sample_id`` is the record's ``id`` (``groundwork.validate.explicit_id``: ``7`` and ``"7"`` are
one id); a record whose ``id`` is absent, null, a boolean, empty or not a scalar is still scored (the official script
scores it) under the generated id ``<file stem>:<index>`` and is ``unclassified``. An id handed out twice refuses
the load (:class:`~gui_grounding.data.annotations.DuplicateIdError`).

Classes: an item counts in every class whose list in ``classification_result.json`` holds its id, and in
``unclassified`` when it is in none (the official script's rule). Metrics (:meth:`OSWorldG.metrics`): ``subset``,
``overall`` (refusal items included: the official denominator), ``overall_without_refusal``, ``refusal``,
``by_class`` and ``by_box_type``, accuracy in percent.

Plain vs Refined: ``OSWorld-G_refined.json`` is the same benchmark with the instructions rewritten (a longer
description of the target); each file is read with its own box types, refusal items included. Published numbers
differ a lot between the two (GTA1-7B-2507: 55.1 plain vs 67.7 Refined, https://huggingface.co/Salesforce/GTA1-7B-2507
README "Grounding Performance", columns OSWORLD-G and OSWORLD-G-Refined), so a run scores one file and names it in
``metrics["subset"]`` and the table title. The two are reported separately, one run each (``subset="plain"`` /
``"refined"``, CLI ``--subset``); with ``subset="auto"`` and both files present the plain file is scored and the
load says so.
"""

from __future__ import annotations

import logging
import os

from groundwork import validate
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xywh,
    check_extent,
    check_unit,
    image_file,
    instruction_text,
    is_number,
    read_json_file,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, fmt_cell_columns, tally

logger = logging.getLogger(__name__)

SUBSETS = {"plain": "OSWorld-G.json", "refined": "OSWorld-G_refined.json"}
CLASSIFICATION_FILE = "classification_result.json"
UNCLASSIFIED = "unclassified"
BOX_TYPES = ("bbox", "polygon", "refusal")
#: the three OSWorld-G denominators in circulation (:meth:`OSWorldG.headline_cell`); the first is the authors' rule
DENOMINATORS = ("refusal-scored", "refusal-as-miss", "without-refusal")
#: each denominator in words (``--denominator``'s help, the headline's rule)
DENOMINATOR_RULES = {
    "refusal-scored": "every item (564 in the published files), a refusal item correct only on a refusal answer "
    "(the authors' rule)",
    "refusal-as-miss": "every item, each refusal item counted as a miss whatever the answer (what a model that cannot "
    "abstain, e.g. one decoded with a guided JSON point, is given)",
    "without-refusal": "the bbox and polygon items alone (510 of 564: the refusal items left out), as ClawGUI's default "
    "and duvo-eye-1's '510 standard subset'; about 7 points above refusal-scored for a model that never abstains",
}


def parse_polygon(value, ref: str, report: BenchmarkLoadReport | None = None) -> list[tuple[float, float]]:
    """Polygon vertices in pixels from a flat ``[x1, y1, x2, y2, ...]`` or nested ``[[x, y], ...]`` list.

    A polygon of zero area is kept (only its boundary can be hit) with an ``inverted_box`` warning in ``report``.

    Raises:
        SampleError: ``bad_box`` for non-numbers (finite, within +-1e7), an odd flat length or fewer than 3
            vertices.
    """
    if isinstance(value, list) and value and all(isinstance(v, (list, tuple)) for v in value):
        if not all(len(v) == 2 and all(is_number(c) for c in v) for v in value):
            raise SampleError(ref, "bad_box", f"polygon vertices must be [x, y] number pairs, got {short_repr(value)}")
        points = [(float(v[0]), float(v[1])) for v in value]
    elif isinstance(value, list) and all(is_number(v) for v in value) and len(value) % 2 == 0:
        points = [(float(value[i]), float(value[i + 1])) for i in range(0, len(value), 2)]
    else:
        raise SampleError(
            ref, "bad_box", f"polygon must be [x1, y1, x2, y2, ...] or [[x, y], ...], got {short_repr(value)}"
        )
    if len(points) < 3:
        raise SampleError(ref, "bad_box", f"polygon needs at least 3 vertices, got {len(points)}")
    area2 = sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1], strict=True))
    if area2 == 0 and report is not None:
        report.warn(ref, "inverted_box", f"polygon {short_repr(value)} has zero area (kept)")
    return points


class OSWorldG(Benchmark):
    """OSWorld-G reader and metrics (module docstring gives format and rules).

    Args:
        subset: ``"plain"`` (``OSWorld-G.json``), ``"refined"`` (``OSWorld-G_refined.json``) or ``"auto"`` (the
            plain file when present, else the refined one).
        denominator: the headline's denominator, one of :data:`DENOMINATORS` (``None``: ``"refusal-scored"``, the
            authors' rule). ``metrics.json`` holds all three cells whichever is chosen.

    Raises:
        ValueError: an unknown subset or denominator.
    """

    name = "osworld-g"
    listing_order = 30
    layout_help = (
        "OSWorld-G, published at github.com/xlang-ai/OSWorld-G (folder benchmark/). DIR holds OSWorld-G.json "
        "(or OSWorld-G_refined.json; records {id, image_path, instruction, box_type bbox|polygon|refusal, "
        "box_coordinates: [x,y,w,h] px or polygon vertices}), classification_result.json and images/."
    )

    denominators = DENOMINATORS
    denominator_rules = DENOMINATOR_RULES
    headline_rule = DENOMINATOR_RULES[DENOMINATORS[0]]
    refusal_handling = (
        "54 of 564 items (box_type refusal) have no target: correct only on an explicit refusal or a point with both "
        "coordinates negative (gui_grounding.eval.judge); a refusal answer elsewhere is wrong"
    )
    headline_source = (
        "GroundingEval's contract, Onifin/Holo3.1-OSWorld-G evaluation/holo_osworld_g.py:33,85-91 at 0fbdd89"
    )

    def __init__(self, subset: str = "auto", denominator: str | None = None):
        if subset not in ("auto", *SUBSETS):
            raise ValueError(f"OSWorld-G subset must be auto, plain or refined, got {subset!r}")
        self.subset = subset
        self.denominator = self.check_denominator(denominator)
        self.resolved_subset: str | None = None  # set by load(): the file read ("plain" or "refined")
        self.class_order: list[str] = []  # set by load(), from classification_result.json

    def annotation_path(self, data_dir: str) -> str:
        """The annotation file this instance reads in ``data_dir``.

        Raises:
            FileNotFoundError: it does not exist.
        """
        names = [SUBSETS["plain"], SUBSETS["refined"]] if self.subset == "auto" else [SUBSETS[self.subset]]
        for name in names:
            path = os.path.join(data_dir, name)
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(f"no {' or '.join(names)} in {data_dir}. {self.layout_help}")

    def read_classes(self, data_dir: str, report: BenchmarkLoadReport) -> tuple[dict[str, list[str]], list[str]]:
        """``(id -> classes, class order)`` from ``classification_result.json``.

        Raises:
            FileNotFoundError: the file is missing.
            ValueError: it is unreadable or lacks ``{"classified": {class: [...]}}``.
        """
        path = os.path.join(data_dir, CLASSIFICATION_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found (needed for the per-class table). {self.layout_help}")
        try:
            data = read_json_file(path)
        except SampleError as err:
            raise ValueError(str(err)) from err
        classified = data.get("classified") if isinstance(data, dict) else None
        if not isinstance(classified, dict):
            raise ValueError(f"{path}: expected {{'classified': {{class_name: [{{'id': ...}}, ...]}}}}")
        by_id: dict[str, list[str]] = {}
        for cls, items in classified.items():
            if not isinstance(items, list):
                raise ValueError(f"{path}: class {cls!r} must map to a list of items, got {type(items).__name__}")
            for j, item in enumerate(items):
                item_id = validate.explicit_id(item.get("id")) if isinstance(item, dict) else None
                if item_id is None:  # the identity rule: null, booleans, empty strings and non-scalars are no id
                    where = f"{path}:classified[{cls!r}][{j}]"
                    report.warn(where, "classification_item_without_id", f"item {short_repr(item)} has no id; ignored")
                    continue
                classes = by_id.setdefault(item_id, [])
                if cls not in classes:
                    classes.append(cls)
        return by_id, list(classified)

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read the annotation file, the classes and the image sizes.

        Errors (not scored, counted): unreadable file or element, missing field, malformed box or polygon, unknown
        box_type, missing or corrupt image. Warnings (kept and scored): box or polygon outside the image, zero-area
        box or polygon, empty instruction.

        Raises:
            FileNotFoundError: no annotation file or no classification file.
            ValueError: unreadable classification file.
            DuplicateIdError: a sample id is handed out twice in the annotation file.
            SampleError: in strict mode, the first error.
        """
        path = self.annotation_path(data_dir)
        self.resolved_subset = next(k for k, v in SUBSETS.items() if v == os.path.basename(path))
        if self.subset == "auto" and all(os.path.isfile(os.path.join(data_dir, f)) for f in SUBSETS.values()):
            logger.warning(
                "%s holds both %s and %s: scoring the plain set; the Refined set is a separate run "
                "(subset='refined', gui-grounding eval --subset refined)",
                data_dir,
                SUBSETS["plain"],
                SUBSETS["refined"],
            )
        load = AnnotationLoad(self.need_pixels)
        classes_by_id, self.class_order = self.read_classes(data_dir, load.report)
        image_dir = os.path.join(data_dir, "images")
        load.read(path, lambda sid, rec, ref: self._sample(sid, rec, ref, image_dir, load, classes_by_id), strict)
        for item_id in classes_by_id:  # every record's id, scored or not
            if item_id not in load.ids:
                load.report.warn(
                    os.path.join(data_dir, CLASSIFICATION_FILE),
                    "classified_id_not_in_annotations",
                    f"id {item_id!r} is classified but not in {os.path.basename(path)}",
                )
        return load.finish(path, path)

    @staticmethod
    def _sample(sample_id, rec, ref, image_dir, load: AnnotationLoad, classes_by_id) -> Sample:
        report = load.report
        require(rec, ("image_path", "instruction", "box_type"), ref)
        instruction = instruction_text(rec, "instruction", ref, report)
        box_type = rec["box_type"]
        if not isinstance(box_type, str) or box_type not in BOX_TYPES:
            raise SampleError(ref, "bad_field", f"box_type must be one of {BOX_TYPES}, got {short_repr(box_type)}")
        image_path = image_file(image_dir, rec["image_path"], ref)  # path_outside_root before any box error
        boxes, polygons = [], []
        if box_type != "refusal":
            require(rec, ("box_coordinates",), ref)
        if box_type == "bbox":
            boxes = [box_from_xywh(rec["box_coordinates"], ref, report, "box_coordinates")]
        elif box_type == "polygon":
            polygons = [parse_polygon(rec["box_coordinates"], ref, report)]
        width, height = load.sizes(image_path, ref, stated=rec.get("image_size"), report=report)
        for box in boxes:
            check_unit(box, "pixel", ref, report, "bbox")
            check_extent(box, width, height, ref, report, "bbox")
        for poly in polygons:
            xs, ys = [p[0] for p in poly], [p[1] for p in poly]
            check_extent((min(xs), min(ys), max(xs), max(ys)), width, height, ref, report, "polygon extent")
        extra = {
            "box_type": box_type,
            "classes": classes_by_id.get(sample_id, [UNCLASSIFIED]),
            "image_rel": rec["image_path"],
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            boxes,
            width,
            height,
            source="osworld-g",
            platform="desktop",
            extra=extra,
            polygons=polygons,
            refusal=box_type == "refusal",
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"subset", "overall", "overall_without_refusal", "refusal", "by_class", "by_box_type"}``, accuracy in
        percent.

        ``overall`` counts every item, refusal items included: the official denominator (``accuracy = correct / lt``
        with ``lt`` every record, open-compass/VLMEvalKit ``vlmeval/dataset/GUI/osworld_g.py:252,315`` at
        ae5fdb19c321c4900a189506fedf27e9992b6eda, a port of the official scorer whose author is not identified); a refusal item is correct on a
        refusal answer: the explicit ``"refusal": true``, or a point with both coordinates negative
        (``gui_grounding.eval.judge``). ``overall_without_refusal`` leaves the refusal items out (denominator: the
        bbox and polygon items), the number harnesses that skip refusal items report, e.g. ClawGUI's default
        (gta886/ClawGUI ``clawgui-eval/metric/osworldg_metric.py:97-98`` at faa266512e4756b8a491ef4c18f266cbbfac5f04:
        "By default, refusal samples ... are EXCLUDED from the Overall accuracy"); ``refusal`` is the refusal items
        alone. ``subset`` names the annotation file scored: ``plain`` (``OSWorld-G.json``) or ``refined``
        (``OSWorld-G_refined.json``), which are reported separately, one run each. Classes come in
        ``classification_result.json`` order (those with samples), ``unclassified`` last.
        """
        check_results(samples, results)
        order = [*self.class_order, UNCLASSIFIED]
        empty = cell(0, 0, 0)
        overall = tally(samples, results, lambda s: ["all"]).get("all", empty)
        targets = tally(samples, results, lambda s: [] if s.refusal else ["all"]).get("all", empty)
        return {
            "subset": self.resolved_subset or self.subset,
            "denominator": self.denominator or DENOMINATORS[0],
            "overall": overall,
            "overall_refusal_as_miss": cell(targets["num_correct"], overall["num_total"], overall["wrong_format"]),
            "overall_without_refusal": targets,
            "refusal": tally(samples, results, lambda s: ["all"] if s.refusal else []).get("all", empty),
            "by_class": tally(samples, results, lambda s: s.extra.get("classes", [UNCLASSIFIED]), order=order),
            "by_box_type": tally(samples, results, lambda s: [s.extra.get("box_type")], order=BOX_TYPES),
        }

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """``overall`` (refusal-scored), ``overall_refusal_as_miss`` or ``overall_without_refusal``."""
        key = {
            "refusal-scored": "overall",
            "refusal-as-miss": "overall_refusal_as_miss",
            "without-refusal": "overall_without_refusal",
        }[denominator]
        return metrics[key]

    def table(self, metrics: dict) -> str:
        """Overall (refusal items scored, counted as misses, left out), per class and per box type (accuracy in
        percent)."""
        subset = metrics.get("subset", "?")
        rows = breakdown_table(
            f"OSWorld-G ({subset}) accuracy (refusal items correct only on a refusal answer)",
            metrics,
            [("by_class", "class"), ("by_box_type", "box_type")],
        )
        extra = [
            f"| refusal items as misses |  | {_cols(metrics.get('overall_refusal_as_miss'))} |",
            f"| without refusal items |  | {_cols(metrics.get('overall_without_refusal'))} |",
            f"| refusal items only |  | {_cols(metrics.get('refusal'))} |",
        ]
        lines = rows.split("\n")
        return "\n".join(lines[:5] + extra + lines[5:]) if len(lines) >= 5 else rows


def _cols(c: dict | None) -> str:
    """The table cells of one accuracy cell (``breakdown_table``'s columns)."""
    return " | ".join(str(v) for v in fmt_cell_columns(c or cell(0, 0, 0)))


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (OSWorldG,)
