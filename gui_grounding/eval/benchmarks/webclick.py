"""WebClick (H company): 1,639 web instructions in three buckets (agentbrowse, humanbrowse, calendars).

Published at https://huggingface.co/datasets/Hcompany/WebClick as parquet (columns and buckets: its dataset card).
Layout: ``DIR/data/test-*.parquet`` (as downloaded), else any ``*.parquet`` under ``DIR`` (or ``DIR`` itself a
parquet file), or a ``datasets`` ``save_to_disk`` folder (``DIR/dataset_info.json``; a DatasetDict's ``test``
split). Columns: ``image`` (struct ``{bytes, path}``), ``instruction``, ``bbox`` (4 floats), ``bucket``.

Images live inside the rows; each is written once to ``cache_dir`` (default ``<DIR>/.gui_grounding_images/``) as
``<row index>_<sha1 prefix>.<format>`` (the format from the bytes' signature), so ``Sample.image_path`` is a real file
and a changed dataset never reuses a stale image; its size is then read from that file by the one image-frame rule
(``groundwork.validate.ImageChecker``: the displayed frame, EXIF orientation applied). A row without bytes may name an
image file by ``path``: it must lie inside the data folder (relative, no ``..`` out of it, not absolute:
``path_outside_root``; a regular non-empty file, ``not_a_file``), and is used where it is, never copied.
``sample_id`` is the 0-based row index (as a string), counted across the parquet files in name order (the format has no
id column; the ids go through :class:`~gui_grounding.data.annotations.SampleIds` all the same).

**bbox convention.** Loaders describe ``bbox`` as normalised ``[0, 1]`` ``x_min, y_min, x_max, y_max``; one
third-party loader calls it absolute. We decide per row: all four values within ``[0, 1]`` -> normalised (multiplied
by the image width/height), otherwise pixels ``x_min, y_min, x_max, y_max``. The counts of each convention seen are
reported (``notes`` of the load report: ``bbox_normalised`` / ``bbox_pixels``, and ``bbox_convention`` in the
metrics); a mix of both in one dataset is a warning. (A real pixel box lying within ``[0, 1]`` would be a 1-pixel
box at the corner, which does not occur.)

Metrics: ``overall`` and ``by_bucket``, accuracy in percent.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import stat
from collections.abc import Iterator

from groundwork.outputs import atomic_writer
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xyxy,
    check_extent,
    handle_reject,
    image_file,
    instruction_text,
    is_number,
    require_str,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import breakdown_table, cell, check_results, tally

logger = logging.getLogger(__name__)

COLUMNS = ("image", "instruction", "bbox", "bucket")
BUCKETS = ("agentbrowse", "humanbrowse", "calendars")
CACHE_NAME = ".gui_grounding_images"
# file name extension of an image from its first bytes (the cache file's name only: the size is read by the checker)
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)


def image_extension(data: bytes) -> str:
    """``png``, ``jpg``, ``gif``, ``webp``, ``bmp`` or ``tiff`` from the signature of ``data``; ``img`` otherwise."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return next((ext for magic, ext in _SIGNATURES if data.startswith(magic)), "img")


class WebClick(Benchmark):
    """WebClick reader and metrics (module docstring gives format and the bbox rule).

    Args:
        cache_dir: where row images are written; default ``<DIR>/.gui_grounding_images/``.
    """

    name = "webclick"
    headline_source = "Hcompany/WebClick dataset card: one accuracy over every row"
    listing_order = 40
    layout_help = (
        "WebClick, published at huggingface.co/datasets/Hcompany/WebClick. DIR holds data/test-*.parquet (or any "
        "*.parquet, or a datasets save_to_disk folder) with columns image {bytes,path}, instruction, bbox (4 floats, "
        "normalised [0,1] x_min,y_min,x_max,y_max; pixel boxes are detected per row) and bucket. Images are written "
        "once to DIR/.gui_grounding_images/."
    )

    def __init__(self, cache_dir: str | None = None):
        self.cache_dir = cache_dir

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read the rows of ``data_dir`` (see module docstring), write their images to the cache, build samples.

        Raises:
            FileNotFoundError: no parquet file and no ``save_to_disk`` folder at ``data_dir``.
            ValueError: a ``save_to_disk`` folder that cannot be read, or lacks the columns.
            OSError: the image cache cannot be written (one line naming it).
            SampleError: in strict mode, the first bad row or unreadable file.
        """
        root = data_dir if os.path.isdir(data_dir) else os.path.dirname(os.path.abspath(data_dir))
        cache_dir = self.cache_dir or os.path.join(root, CACHE_NAME)
        load = AnnotationLoad()  # every row's image is written and read, rescoring or not
        report, samples, sizes, ids = load.report, load.samples, load.sizes, load.ids
        index = 0
        for ref, row in self._rows(data_dir, report, strict):
            report.num_records += 1
            mark = len(report.warnings)
            sample_id = ids.assign(None, str(index), ref)  # no id column: the row index (unique by construction)
            try:
                samples.append(self._sample(row, ref, sample_id, root, cache_dir, sizes, report))
            except SampleError as err:
                report.rollback_warnings(mark)
                handle_reject(report, err, strict)
            index += 1
        if report.notes["bbox_normalised"] and report.notes["bbox_pixels"]:
            report.warn(
                data_dir,
                "mixed_bbox_conventions",
                f"{report.notes['bbox_normalised']} rows normalised and {report.notes['bbox_pixels']} rows in pixels",
            )
        return load.finish(data_dir, data_dir)

    # ---------------------------------------------------------------------------------------------------------------
    # reading rows

    def _rows(self, data_dir: str, report: BenchmarkLoadReport, strict: bool) -> Iterator[tuple[str, dict]]:
        if os.path.isdir(data_dir) and any(
            os.path.isfile(os.path.join(data_dir, n)) for n in ("dataset_info.json", "dataset_dict.json")
        ):
            yield from self._rows_from_disk(data_dir)
            return
        if os.path.isfile(data_dir) and data_dir.endswith(".parquet"):
            files = [data_dir]
        else:
            files = sorted(glob.glob(os.path.join(data_dir, "data", "test-*.parquet")))
            files = files or sorted(glob.glob(os.path.join(data_dir, "**", "*.parquet"), recursive=True))
        if not files:
            raise FileNotFoundError(f"no parquet file or save_to_disk folder at {data_dir}. {self.layout_help}")
        for path in files:
            yield from self._rows_from_parquet(path, report, strict)

    @staticmethod
    def _rows_from_parquet(path: str, report: BenchmarkLoadReport, strict: bool) -> Iterator[tuple[str, dict]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
            missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
            if missing:
                raise SampleError(
                    path, "bad_field", f"parquet file lacks column(s) {missing}; has {pf.schema_arrow.names}"
                )
            batches = pf.iter_batches(batch_size=64, columns=list(COLUMNS))
            i = 0
            for batch in batches:
                for row in batch.to_pylist():
                    yield f"{path}:[{i}]", row
                    i += 1
        except (OSError, pa.ArrowException) as err:
            report.num_records += 1
            handle_reject(report, SampleError(path, "unparseable_record", f"cannot read parquet: {err}"), strict)
        except SampleError as err:
            report.num_records += 1
            handle_reject(report, err, strict)

    @staticmethod
    def _rows_from_disk(path: str) -> Iterator[tuple[str, dict]]:
        import datasets

        try:
            ds = datasets.load_from_disk(path)
        except Exception as err:  # datasets raises many types for a broken folder (FileNotFoundError, JSON, Arrow)
            why = f"{type(err).__name__}: {str(err)[:300]}"
            raise ValueError(f"{path}: cannot read the datasets save_to_disk folder: {why}") from None
        if isinstance(ds, datasets.DatasetDict):
            if "test" in ds:
                ds = ds["test"]
            elif len(ds) == 1:
                ds = next(iter(ds.values()))
            else:
                raise ValueError(f"{path}: a DatasetDict with splits {list(ds)} and no 'test' split")
        missing = [c for c in COLUMNS if c not in ds.column_names]
        if missing:
            raise ValueError(f"{path}: dataset lacks column(s) {missing}; has {ds.column_names}")
        if isinstance(ds.features["image"], datasets.Image):
            ds = ds.cast_column("image", datasets.Image(decode=False))
        for i, row in enumerate(ds):
            yield f"{path}:[{i}]", row

    # ---------------------------------------------------------------------------------------------------------------
    # one row

    @staticmethod
    def _image_file(image, ref: str, sample_id: str, root: str, cache_dir: str) -> str:
        """Path of the row's image: its bytes written to the cache, or the file named by ``path`` inside ``root``
        (:func:`~gui_grounding.data.annotations.image_file`: no ``..`` out of it, no absolute path; never copied).
        Whether the file is a readable image, and its displayed size, is :class:`ImageSizes`' check.

        Raises:
            SampleError: ``bad_field`` for image bytes of another type, ``missing_image`` for a row with neither,
                ``path_outside_root`` / ``not_a_file`` / ``bad_text`` for its path.
        """
        data = image.get("bytes") if isinstance(image, dict) else image
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            if not isinstance(image, dict):
                raise SampleError(ref, "bad_field", f"image must be {{bytes, path}} or bytes, got {short_repr(image)}")
            raise SampleError(ref, "bad_field", f"image bytes must be binary, got {short_repr(data)}")
        if not data:  # no bytes (None or empty): the row may name a file
            path = image.get("path") if isinstance(image, dict) else None
            if path is None or path == "":
                raise SampleError(ref, "missing_image", "row has no image bytes and no image path")
            return image_file(root, path, ref)
        data = bytes(data)
        digest = hashlib.sha1(data).hexdigest()[:12]
        target = os.path.join(cache_dir, f"{int(sample_id):06d}_{digest}.{image_extension(data)}")
        try:
            st = os.lstat(target)
            cached = stat.S_ISREG(st.st_mode) and st.st_size == len(data)  # a link or a short file is rewritten
        except OSError:
            cached = False
        if not cached:
            try:
                os.makedirs(cache_dir, exist_ok=True)
                with atomic_writer(target, "wb") as f:
                    f.write(data)
            except OSError as err:
                raise OSError(
                    f"cannot write WebClick images to {cache_dir} ({err}); give a writable cache_dir"
                ) from None
        return target

    def _sample(self, row, ref, sample_id, root, cache_dir, sizes, report) -> Sample:
        require(row, COLUMNS, ref)
        bucket = require_str(row, "bucket", ref)
        values = row["bbox"]
        if not (isinstance(values, (list, tuple)) and len(values) == 4 and all(is_number(v) for v in values)):
            raise SampleError(ref, "bad_box", f"bbox must be 4 finite numbers within +-1e7, got {short_repr(values)}")
        image_path = self._image_file(row["image"], ref, sample_id, root, cache_dir)
        width, height = sizes(image_path, ref)
        instruction = instruction_text(row, "instruction", ref, report)
        normalised = all(0 <= v <= 1 for v in values)
        box = box_from_xyxy(values, ref, report)
        if normalised:
            box = (box[0] * width, box[1] * height, box[2] * width, box[3] * height)
        report.notes["bbox_normalised" if normalised else "bbox_pixels"] += 1
        check_extent(box, width, height, ref, report, "bbox")
        extra = {
            "bucket": bucket,
            "bbox_convention": "normalised" if normalised else "pixels",
            "bbox_raw": list(values),
        }
        return Sample(
            sample_id, instruction, image_path, [box], width, height, source="webclick", platform="web", extra=extra
        )

    # ---------------------------------------------------------------------------------------------------------------
    # metrics

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"overall": cell, "by_bucket": {bucket: cell}, "bbox_convention": {"normalised": n, "pixels": m}}``,
        accuracy in percent."""
        check_results(samples, results)
        conventions = {"normalised": 0, "pixels": 0}
        for s in samples:
            conventions[s.extra.get("bbox_convention", "normalised")] += 1
        return {
            "overall": tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0)),
            "by_bucket": tally(samples, results, lambda s: [s.extra.get("bucket")], order=BUCKETS),
            "bbox_convention": conventions,
        }

    def table(self, metrics: dict) -> str:
        """Overall and per bucket (accuracy in percent), and the bbox conventions seen."""
        conv = metrics.get("bbox_convention", {})
        return (
            breakdown_table("WebClick accuracy", metrics, [("by_bucket", "bucket")])
            + f"\n\nbbox convention seen: {conv.get('normalised', 0)} normalised rows, {conv.get('pixels', 0)} "
            "pixel rows"
        )


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (WebClick,)
