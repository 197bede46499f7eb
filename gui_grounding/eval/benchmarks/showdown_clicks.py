"""Showdown-clicks (General Agents): human left clicks on macOS desktop screenshots; the released ``dev`` split holds
557 of them.

Published at https://huggingface.co/datasets/generalagents/showdown-clicks (config ``dev`` =
``showdown-clicks-dev/data.csv``); official evaluation code generalagents/showdown at
86cbd20d161eb3a3e49babe677a26dcec4beb91a, folder ``clicks/``. Layout (generalagents/showdown ``clicks/README.md:57-63``
and ``clicks/eval.py:303-308`` at 86cbd20: the CSV, and the folder the ``image`` column is relative to)::

    DIR/showdown-clicks-dev/data.csv          (DIR may also be the showdown-clicks-dev folder itself)
    DIR/showdown-clicks-dev/<image>            e.g. frames/<recording>/<n>.webp

Columns (generalagents/showdown ``clicks/README.md:15-25`` at 86cbd20): ``id`` (an alphanumeric string), ``image`` (the
screenshot's path relative to the folder of ``data.csv``: the official client opens ``os.path.join(frames_dir,
image)`` with ``frames_dir`` that folder, ``clicks/src/clicks/evaluate/ace.py:81-84``), ``instruction``, ``x1``,
``y1`` (top-left), ``x2``, ``y2`` (bottom-right) in pixels of the screenshot, ``width``, ``height``. The official item
model also has ``recording_id`` (``clicks/src/clicks/evaluate/models.py:49-59``), which the dataset card does not list:
unverified whether ``data.csv`` carries it (the file could not be read from here); it is kept when present, never
required.

Reading: the file is read with the standard library's ``csv`` module (the official script uses ``pandas.read_csv``,
``clicks/eval.py:65``) through the same reject rules as the JSON readers: a file that is not text (compressed, an
archive, UTF-16) refuses the load (:class:`groundwork.records.DataFileError`); a header naming a column twice is one
``duplicate_key`` error for the file (which column is meant is unknowable); each data row is one record, named
``data.csv:<line>`` (the 1-based line where the row starts), and a row that cannot be parsed (bad quoting, a
field over the ``csv`` size limit, more fields than the header) is one ``unparseable_record`` error, its neighbours
read on; blank lines are skipped (as ``pandas.read_csv`` skips them). Cell values are JSON numbers
(``groundwork.records.strict_loads``: no NaN, inf or empty cell; a box value must be finite within +-1e7,
``bad_box``); text that is not valid UTF-8 is ``bad_text``. ``image`` must stay inside the CSV's folder (no ``..``
out of it, no absolute path: ``path_outside_root``). ``sample_id`` is the ``id`` cell
(``groundwork.validate.explicit_id``), else the generated ``data:<0-based row index>``; an id handed out twice
refuses the load.

Correctness: ``is_in_bbox`` = ``x1 <= x <= x2 and y1 <= y <= y2`` in pixels, edges included (generalagents/showdown
``clicks/src/clicks/evaluate/utils.py:15-26`` at 86cbd20), the shared judge's rule; a missing point is not in the box.
The official predictions are integer pixels (``ParsedPrediction.pred_x: Optional[int]``, ``models.py:27-30``); ours
are original-image pixels as the adapter maps them, judged unrounded. The box is compared with the point as given (no
rescaling by ``width`` / ``height``, which the scorer does not read): ``width`` / ``height`` differing from the image
file is an ``img_size_mismatch`` warning (kept, box unchanged); an inverted box, a box outside the image or a box with
all values in [0, 1] (``suspect_unit``) is kept with a warning.

Metrics: ``overall`` = correct / total over every row (``analyze_results``, ``utils.py:144-157``): the headline.
The official 95% interval is a percentile bootstrap (``scipy.stats.bootstrap``, ``utils.py:159-171``); ours is the
Wilson interval of the same proportion (no resampling, so it does not change between runs), close to it at n = 557.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterator

from groundwork import validate
from groundwork.records import DataFileError, RecordError, container_problem, strict_loads
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xyxy,
    check_extent,
    check_unit,
    handle_reject,
    instruction_text,
    is_number,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, tally

logger = logging.getLogger(__name__)

SPLIT_DIR = "showdown-clicks-dev"
CSV_NAME = "data.csv"
BOX_COLUMNS = ("x1", "y1", "x2", "y2")


def iter_csv_records(path: str) -> Iterator[tuple[str, int, dict | RecordError]]:
    """``(ref, index, row)`` for each data row of the CSV file ``path``: ``row`` maps the header's column names to the
    row's cells (strings; a short row lacks its last columns) or is a :class:`~groundwork.records.RecordError` for a
    row that cannot be parsed; ``ref`` is ``path:<line>`` (1-based, the line where the row starts), ``index`` the
    0-based count of data rows. Blank lines are skipped. Text is read as UTF-8 (a byte-order mark is accepted); bytes
    that are not UTF-8 are kept as lone surrogates, for the caller's ``bad_text`` check.

    An empty file, or a header that cannot be parsed, is one ``unparseable_record`` error with ``path`` as its ref; a
    header naming a column twice is one ``duplicate_key`` error (nothing else is read).

    Raises:
        DataFileError: ``path`` is not a regular text file (compressed, an archive, UTF-16/32, a FIFO, a folder).
    """
    problem = container_problem(path, "CSV text")
    if problem is not None:
        raise DataFileError(path, problem)
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        reader = csv.reader(f, strict=True)
        try:
            header = next(reader, None)
        except csv.Error as err:
            yield path, 0, RecordError(path, f"cannot parse the CSV header: {err}")
            return
        if not header:
            yield path, 0, RecordError(path, "the file is empty: expected a CSV header and rows")
            return
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            yield path, 0, RecordError(path, f"the header names column(s) {repeated} twice", reason="duplicate_key")
            return
        index = 0
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                yield f"{path}:{start}", index, RecordError(f"{path}:{start}", f"cannot parse the CSV row: {err}")
                index += 1
                continue
            if not row:
                continue
            ref = f"{path}:{start}"
            if len(row) > len(header):
                message = f"the row has {len(row)} fields, the header {len(header)}"
                yield ref, index, RecordError(ref, message)
            else:
                yield ref, index, dict(zip(header, row, strict=False))
            index += 1


def csv_number(row: dict, key: str, ref: str, reason: str = "bad_box") -> int | float:
    """The number in ``row[key]`` (a CSV cell: a JSON number, ``groundwork.records.strict_loads``), finite within +-1e7,
    as read (an int for an integer cell).

    Raises:
        SampleError: ``reason`` (``bad_box`` for a box value) for an empty cell, NaN, inf, text or a huge number.
    """
    text = row[key]
    try:
        value = strict_loads(text)
    except (ValueError, RecursionError):
        value = text
    if not is_number(value):
        raise SampleError(ref, reason, f"{key} must be a finite number within +-1e7, got {short_repr(text)}")
    return value


class ShowdownClicks(Benchmark):
    """Showdown-clicks (dev) reader and metrics (module docstring gives the format and the rules)."""

    name = "showdown-clicks"
    listing_order = 62
    headline_rule = "correct / total over every row (is_in_bbox, edges included)"
    headline_source = (
        "generalagents/showdown clicks/src/clicks/evaluate/utils.py:15-26 (is_point_in_bbox) and :144-157 "
        "(analyze_results) at 86cbd20d161eb3a3e49babe677a26dcec4beb91a"
    )
    layout_help = (
        "Showdown-clicks dev, published at huggingface.co/datasets/generalagents/showdown-clicks. DIR holds "
        "showdown-clicks-dev/data.csv (columns id, image, instruction, x1, y1, x2, y2 px, width, height) and the "
        "screenshots under showdown-clicks-dev/ (image is relative to it); DIR may be that folder itself."
    )

    def csv_path(self, data_dir: str) -> str:
        """``data.csv`` of ``data_dir`` (``DIR/showdown-clicks-dev/data.csv`` or ``DIR/data.csv``).

        Raises:
            FileNotFoundError: neither exists.
        """
        for path in (os.path.join(data_dir, SPLIT_DIR, CSV_NAME), os.path.join(data_dir, CSV_NAME)):
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(f"no {SPLIT_DIR}/{CSV_NAME} or {CSV_NAME} in {data_dir}. {self.layout_help}")

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read ``data.csv`` (module docstring: framing and rules); samples in original pixels.

        Errors (not scored, counted with ``data.csv:<line>``): a row that cannot be parsed, a missing column or
        cell, a box value that is not a finite number, a ``width`` / ``height`` that is not a number > 0, an image
        path outside the folder, a missing or corrupt image. Warnings (kept and scored): an inverted box, a box
        outside the image or in fractions, ``width`` / ``height`` differing from the file, an empty instruction.

        Raises:
            FileNotFoundError: no ``data.csv``.
            DataFileError: ``data.csv`` is not text (compressed, UTF-16, ...).
            DuplicateIdError: an ``id`` handed out twice.
            SampleError: in strict mode, the first error.
        """
        path = self.csv_path(data_dir)
        image_root = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        load = AnnotationLoad(self.need_pixels)
        report = load.report
        for ref, index, row in iter_csv_records(path):
            report.num_records += 1
            if isinstance(row, RecordError):
                handle_reject(report, SampleError(row.ref, row.reason, row.message), strict)
                continue
            sample_id = load.ids.assign(row.get("id"), f"{stem}:{index}", ref)
            mark = len(report.warnings)
            try:
                load.samples.append(self._sample(sample_id, row, ref, image_root, load))
            except SampleError as err:
                report.rollback_warnings(mark)
                handle_reject(report, err, strict)
        return load.finish(path, path)

    @staticmethod
    def _sample(sample_id, row, ref, image_root, load: AnnotationLoad) -> Sample:
        report = load.report
        require(row, ("image", "instruction", *BOX_COLUMNS), ref)
        instruction = instruction_text(row, "instruction", ref, report)
        box = box_from_xyxy([csv_number(row, k, ref) for k in BOX_COLUMNS], ref, report)
        stated = None
        if row.get("width", "").strip() or row.get("height", "").strip():
            stated = [csv_number(row, k, ref, "bad_field") for k in ("width", "height")]
            if not all(v > 0 for v in stated):
                raise SampleError(ref, "bad_field", f"width and height must be > 0, got {stated}")
        image_path, width, height = load.image(image_root, row["image"], ref, stated=stated)
        if stated is not None and width > 0 and (width, height) != (stated[0], stated[1]):
            report.warn(
                ref,
                "img_size_mismatch",
                f"width x height {stated[0]:g}x{stated[1]:g} differs from the image file as read, {width}x{height} "
                "(kept; the box is not rescaled: the official scorer compares pixels as given)",
            )
        check_unit(box, "pixel", ref, report, "bbox")
        check_extent(box, width, height, ref, report, "bbox")
        recording = row.get("recording_id")
        extra = {
            "image_rel": row["image"],
            "recording_id": recording if recording and validate.is_text(recording) else None,
            "stated_size": stated,
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            [box],
            width,
            height,
            source="showdown-clicks",
            platform="macos",
            extra=extra,
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"overall": cell}``: correct / total over every row, accuracy in percent with its 95% Wilson interval
        (:func:`gui_grounding.eval.tables.cell`)."""
        check_results(samples, results)
        return {"overall": tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0))}

    def table(self, metrics: dict) -> str:
        """The overall accuracy (percent) with its interval."""
        return (
            breakdown_table("Showdown-clicks accuracy (is_in_bbox, edges included)", metrics, [])
            + "\n\nThe official 95% interval is a percentile bootstrap; this one is the Wilson interval of the same "
            "proportion."
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (ShowdownClicks,)
