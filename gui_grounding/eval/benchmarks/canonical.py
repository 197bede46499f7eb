"""Our canonical JSONL (e.g. the web collector's test split) as a benchmark.

``--data`` is a JSONL/JSON file, or a folder holding ``test.jsonl``. Records are read with
:func:`groundwork.records.iter_records` and validated by :func:`gui_grounding.data.schema.record_to_sample` (canonical, GTA1 and
VLM-R1 formats; image paths relative to the file's folder), with one difference from the training loader, for
benchmark denominators: boxes are **never clipped or dropped**. A box past the image edge, entirely outside the image as
we read it (e.g. an EXIF-rotated photo), inverted, or off its format's unit (``groundwork.validate.check_unit``: within [0, 1]
in a pixel or 0-1000 record) is scored as given, with a warning
(``box_partly_outside_image``, ``box_outside_image``, ``inverted_box``, ``suspect_unit``). Errors (counted with ``file:line``, not scored): an unparseable line, an
unknown format, a missing field, a box that is not 4 numbers (``bad_box``), an empty instruction, and whatever else
``record_to_sample`` rejects (text, paths, images).

Image paths follow the canonical data rule (the training loader's and ``convert``'s): a relative path is resolved
against the file's folder and must not climb out of it (``path_outside_root``); an absolute path is accepted, since
``convert`` writes the images outside its ``--image-root`` that way, and counted (``absolute_image_path`` note).
Identity (:class:`~gui_grounding.data.annotations.SampleIds`): a record's ``sample_id``, else its ``id``
(``groundwork.validate.explicit_id``: ``7`` and ``"7"`` are one id; null, a boolean, an empty string or a non-scalar is no
id), else the generated ``<file stem>:<index>``; an id handed out twice (two equal ids, or an explicit id equal to
another record's generated one) refuses the load (:class:`~gui_grounding.data.annotations.DuplicateIdError`).
Metrics: ``overall`` and ``by_platform`` / ``by_ui_type`` / ``by_source`` over the samples that carry each field,
accuracy in percent.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from groundwork import validate
from groundwork.records import RecordError, iter_records, lax_loads
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    check_extent,
    check_unit,
    handle_reject,
    is_number,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, detect_format, record_to_sample
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, tally
from gui_grounding.models.frames import Box, box_from_norm1000

logger = logging.getLogger(__name__)

BREAKDOWN_KEYS = ("platform", "ui_type", "source")
# a box that fits any image (>= 1x1): validation of everything but the boxes is record_to_sample's; the boxes
# themselves are read here, unclipped
_PROBE_PIXEL_BOX = [0, 0, 2, 2]


def _four(value: Any, ref: str, what: str) -> Box:
    if not (isinstance(value, (list, tuple)) and len(value) == 4 and all(is_number(v) for v in value)):
        raise SampleError(
            ref, "bad_box", f"{what} must be 4 finite numbers [x_min, y_min, x_max, y_max], got {short_repr(value)}"
        )
    return tuple(float(v) for v in value)


def _box_list(value: Any, ref: str, what: str) -> list[Box]:
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return [_four(v, ref, what) for v in value]
    return [_four(value, ref, what)]


def published_boxes(record: dict, fmt: str, ref: str) -> tuple[list[Box], dict]:
    """``(boxes as the record gives them, probe record)``: the probe has every box replaced by one that fits any
    image, so :func:`record_to_sample` validates the rest of the record without judging the boxes.

    Raises:
        SampleError: ``bad_box`` for a box that is not 4 finite numbers within +-1e7; ``bad_field`` for a canonical
            box without its 4 keys.
    """
    if fmt == "canonical":
        items = record["target_bbox"] if isinstance(record["target_bbox"], list) else [record["target_bbox"]]
        if not items:
            raise SampleError(ref, "bad_field", "target_bbox is an empty list")
        boxes = []
        for item in items:
            if not isinstance(item, dict) or not all(k in item for k in ("x_min", "y_min", "x_max", "y_max")):
                raise SampleError(
                    ref, "bad_field", f"target_bbox must be {{x_min, y_min, x_max, y_max}}, got {short_repr(item)}"
                )
            boxes.append(_four([item["x_min"], item["y_min"], item["x_max"], item["y_max"]], ref, "target_bbox"))
        probe = {
            **record,
            "target_bbox": dict(zip(("x_min", "y_min", "x_max", "y_max"), _PROBE_PIXEL_BOX, strict=True)),
        }
        return boxes, probe
    if fmt == "gta1":
        return _box_list(record["bbox"], ref, "bbox"), {**record, "bbox": [0, 0, 1000, 1000]}
    # vlm_r1: the gpt turn holds the box (a JSON list, optionally inside <answer> tags)
    conv = record.get("conversations")
    answer = conv[1].get("value") if isinstance(conv, list) and len(conv) > 1 and isinstance(conv[1], dict) else None
    if isinstance(answer, str):
        text = answer.replace("<answer>", "").replace("</answer>", "").strip()
        try:
            answer = lax_loads(text)  # a key twice is an error here too
        except (ValueError, RecursionError) as err:
            raise SampleError(ref, "bad_field", f"gpt turn is not a bbox list: {text[:80]!r}") from err
    boxes = _box_list(answer, ref, "gpt turn bbox")
    probe_conv = [conv[0], {**conv[1], "value": json.dumps(_PROBE_PIXEL_BOX)}, *conv[2:]]
    return boxes, {**record, "conversations": probe_conv}


class Canonical(Benchmark):
    """Canonical JSONL reader (``gui_grounding.data.schema``) and breakdown metrics."""

    name = "canonical"
    headline_source = "ours: one accuracy over every record of the file"
    listing_order = 50
    layout_help = (
        "Our canonical JSONL (docs/TRAINING.md 'Data'): a .jsonl/.json file of {instruction, image_path, target_bbox "
        "{x_min,y_min,x_max,y_max} px, ...} records (also GTA1 / VLM-R1 records), or a folder holding test.jsonl; "
        "image paths are relative to the file's folder."
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Samples of ``data_dir`` (a file, or a folder with ``test.jsonl``); rules in the module docstring.

        Raises:
            FileNotFoundError: neither an existing file nor a folder with ``test.jsonl``.
            DuplicateIdError: a sample id is handed out twice.
            SampleError: in strict mode, the first error.
        """
        path = os.path.join(data_dir, "test.jsonl") if os.path.isdir(data_dir) else data_dir
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found. {self.layout_help}")
        base_dir = os.path.dirname(os.path.abspath(path))
        stem = os.path.splitext(os.path.basename(path))[0]
        load = AnnotationLoad(self.need_pixels)
        report, samples, ids = load.report, load.samples, load.ids
        for ref, index, item in iter_records(path):
            report.num_records += 1
            mark = len(report.warnings)
            try:
                if isinstance(item, RecordError):
                    raise SampleError(item.ref, item.reason, item.message)
                # every record, scored or not, takes part in the identity check: sample_id, else id, else generated
                value = item.get("sample_id")
                value = value if validate.explicit_id(value) is not None else item.get("id")
                sample_id = ids.assign(value, f"{stem}:{index}", ref)
                sample = self._sample(item, ref, base_dir, sample_id, report, image_optional=not self.need_pixels)
                sample.sample_id = sample_id  # the same rule as record_to_sample's; the registry's id is the one
                samples.append(sample)
            except SampleError as err:
                report.rollback_warnings(mark)
                handle_reject(report, err, strict)
        return load.finish(path, path)

    @staticmethod
    def _sample(
        record: dict,
        ref: str,
        base_dir: str,
        default_id: str,
        report: BenchmarkLoadReport,
        image_optional: bool = False,
    ) -> Sample:
        fmt = detect_format(record)
        if fmt is None:
            raise SampleError(
                ref, "unknown_format", f"keys {short_repr(sorted(record), 300)} match no supported format"
            )
        boxes, probe = published_boxes(record, fmt, ref)
        sample = record_to_sample(
            probe, ref, base_dir=base_dir, default_id=default_id, contain_paths=True, image_optional=image_optional
        )
        width, height = sample.width, sample.height
        if image_optional and not os.path.isfile(sample.image_path):  # rescoring: kept, as the other readers keep it
            report.warn(
                ref,
                "image_unavailable",
                f"image {sample.image_path} is not available (kept: rescoring needs no pixels)",
            )
        for b in boxes:  # the unit rule in the unit of the record's format (GTA1: 0-1000, else pixels)
            check_unit(b, "norm1000" if fmt == "gta1" else "pixel", ref, report, "box")
        pixel_boxes = [box_from_norm1000(b, width, height) for b in boxes] if fmt == "gta1" else list(boxes)
        for b in pixel_boxes:
            if b[0] >= b[2] or b[1] >= b[3]:
                report.warn(ref, "inverted_box", f"box {list(b)} is inverted or has zero area (kept)")
            check_extent(b, width, height, ref, report, "box")
        sample.boxes = pixel_boxes
        sample.source_boxes = list(boxes)
        raw = record.get("image_path") if fmt == "canonical" else record.get("image")
        raw = raw[0] if isinstance(raw, list) and raw else raw
        if isinstance(raw, str) and validate.is_absolute(raw):  # accepted, as the canonical data rule accepts it
            report.notes["absolute_image_path"] += 1
        return sample

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"overall": cell, "by_platform": ..., "by_ui_type": ..., "by_source": ...}`` (breakdowns only for fields
        some sample has); a cell is ``{"num_correct", "num_total", "wrong_format", "accuracy", "ci95"}`` in percent
        (``gui_grounding.eval.tables.cell``)."""
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


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (Canonical,)
