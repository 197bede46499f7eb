"""WebClick (H company): 1,639 web instructions in three buckets (agentbrowse, humanbrowse, calendars).

Published at https://huggingface.co/datasets/Hcompany/WebClick as parquet (``gta1_and_peers.md`` section 2.1).
Layout: ``DIR/data/test-*.parquet`` (as downloaded), else any ``*.parquet`` under ``DIR`` (or ``DIR`` itself a
parquet file), or a ``datasets`` ``save_to_disk`` folder (``DIR/dataset_info.json``; a DatasetDict's ``test``
split). Columns: ``image`` (struct ``{bytes, path}``), ``instruction``, ``bbox`` (4 floats), ``bucket``.

Images live inside the rows; each is written once to ``cache_dir`` (default ``<DIR>/.gui_grounding_images/``) as
``<row index>_<sha1 prefix>.<format>``, so ``Sample.image_path`` is a real file and a changed dataset never reuses a
stale image. ``sample_id`` is the 0-based row index (as a string), counted across the parquet files in name order.

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
import io
import logging
import os
from collections.abc import Iterator

from gui_grounding.eval.benchmarks import (
    BenchmarkLoadReport,
    ImageSizes,
    box_from_xyxy,
    breakdown_table,
    cell,
    check_extent,
    check_results,
    handle_reject,
    instruction_text,
    is_number,
    log_load_report,
    require,
    require_str,
    short_repr,
    tally,
)
from gui_grounding.eval.benchmarks.base import Benchmark
from gui_grounding.schema import Sample, SampleError

logger = logging.getLogger(__name__)

COLUMNS = ("image", "instruction", "bbox", "bucket")
BUCKETS = ("agentbrowse", "humanbrowse", "calendars")
CACHE_NAME = ".gui_grounding_images"


class WebClick(Benchmark):
    """WebClick reader and metrics (module docstring gives format and the bbox rule).

    Args:
        cache_dir: where row images are written; default ``<DIR>/.gui_grounding_images/``.
    """

    name = "webclick"
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
            SampleError: in strict mode, the first bad row or unreadable file.
        """
        root = data_dir if os.path.isdir(data_dir) else os.path.dirname(os.path.abspath(data_dir))
        cache_dir = self.cache_dir or os.path.join(root, CACHE_NAME)
        report, samples, sizes = BenchmarkLoadReport(), [], ImageSizes()
        index = 0
        for ref, row in self._rows(data_dir, report, strict):
            report.num_records += 1
            mark = len(report.warnings)
            try:
                samples.append(self._sample(row, ref, str(index), root, cache_dir, sizes, report))
            except SampleError as err:
                report.rollback_warnings(mark)
                handle_reject(report, err, strict)
            index += 1
        if report.notes["bbox_normalised"] and report.notes["bbox_pixels"]:
            report.warn(data_dir, "mixed_bbox_conventions", f"{report.notes['bbox_normalised']} rows normalised and "
                                                            f"{report.notes['bbox_pixels']} rows in pixels")  # fmt: skip
        report.num_samples = len(samples)
        log_load_report(report, data_dir)
        return samples, report

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
                raise SampleError(path, "bad_field", f"parquet file lacks column(s) {missing}; has "
                                                     f"{pf.schema_arrow.names}")  # fmt: skip
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

        ds = datasets.load_from_disk(path)
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
        """Path of the row's image: its bytes written to the cache, or an existing file named by ``path``."""
        from PIL import Image

        data = image.get("bytes") if isinstance(image, dict) else image if isinstance(image, bytes) else None
        if data is None:
            path = image.get("path") if isinstance(image, dict) else None
            if isinstance(path, str) and path:
                full = path if os.path.isabs(path) else os.path.join(root, path)
                if os.path.isfile(full):
                    return full
            raise SampleError(ref, "missing_image", f"row has no image bytes and no existing image path ({path!r})")
        try:
            with Image.open(io.BytesIO(data)) as im:
                fmt = (im.format or "img").lower()
        except Exception as err:  # PIL raises many types for corrupt data
            raise SampleError(ref, "unreadable_image", f"image bytes cannot be decoded: {type(err).__name__}") from err
        digest = hashlib.sha1(data).hexdigest()[:12]
        target = os.path.join(cache_dir, f"{int(sample_id):06d}_{digest}.{'jpg' if fmt == 'jpeg' else fmt}")
        if not os.path.isfile(target):
            try:
                os.makedirs(cache_dir, exist_ok=True)
                tmp = f"{target}.tmp{os.getpid()}"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except OSError as err:
                raise OSError(
                    f"cannot write WebClick images to {cache_dir} ({err}); give a writable cache_dir"
                ) from err
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
        return Sample(sample_id, instruction, image_path, [box], width, height, source="webclick", platform="web",
                      extra=extra)  # fmt: skip

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
        return (breakdown_table("WebClick accuracy", metrics, [("by_bucket", "bucket")])
                + f"\n\nbbox convention seen: {conv.get('normalised', 0)} normalised rows, {conv.get('pixels', 0)} "
                "pixel rows")  # fmt: skip
