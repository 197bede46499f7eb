"""Detector-IoU cleaning of grounding data, GTA1's lightweight filter: ``gui-grounding clean``.

Rule (GTA1 ``preprocessing/filter.py``: Yan98/GTA1 ``preprocessing/filter.py:33,87-98`` at 81f0c4c; described on
https://huggingface.co/datasets/HelloKKMe/grounding_dataset): detect the UI elements on each screenshot,
take the best IoU between the annotated box (any of a sample's boxes) and any detection, keep the sample when
``best_iou >= iou_threshold`` (0.1 by default, as GTA1), reject it otherwise. The IoU is :func:`gui_grounding.models.frames.
box_iou`; all boxes are in the pixels of the **displayed** image (``(x_min, y_min, x_max, y_max)``, EXIF orientation
applied): samples are sized by :func:`gui_grounding.data.schema.load_samples` and detectors read pixels through
:func:`groundwork.validate.open_image`, both through the one image-frame function ``groundwork.validate.image_frame``.

Nothing is lost: every input record ends up in ``OUT.jsonl`` (kept, canonical record + ``best_iou``) or in
``OUT.rejected.jsonl`` with a reason from ``REJECT_REASONS`` (``low_iou``, ``detection_failed``, ``invalid_record``).
A record's own fields named like the ones added here (``OUTPUT_KEYS``) are replaced, never trusted.

Detections are cached per image and per detector component in JSONL files under ``--cache-dir`` (default
``OUT.detections/``): the cache, its lines and its shards are :mod:`gui_grounding.data.clean_cache`. Every run reads
all cache files and detects only what is missing, so a killed run resumes where it stopped. ``--shard I/N`` (0-based)
takes the I-th of N contiguous slices of the sorted unique image list (``numpy.array_split`` order, as GTA1's
``run.py``), only fills the cache and writes no output; a final run without ``--shard`` merges every cache file,
detects what is still missing (``--from-cache``: detects nothing and stops with the missing shards named) and filters.

Hostile input rules:

* **cache lines and detector failures**: :mod:`gui_grounding.data.clean_cache` (a bad line is counted and its image
  detected again; a failed detection is cached as an ``error`` line) and the samples of a failed image are rejected as
  ``detection_failed``; the rest is written;
* **outputs** (``groundwork.outputs``): checked before any input is read (``--out`` equal to an input, naming a folder or
  unwritable is refused), ``--out`` locked (a second run on the same ``--out`` fails at once), every file written
  atomically under a unique temporary name, the report last; cache files are appended under a lock per file
  (:func:`gui_grounding.data.clean_cache.fill_cache`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
from collections import Counter, defaultdict
from typing import Any

from groundwork import validate
from groundwork.argtypes import add_number_flag, flag_values, number
from groundwork.outputs import OutputLock, atomic_writer, check_outputs, write_json
from gui_grounding.data.clean_cache import (
    MAX_SHARDS,
    CacheIncompleteError,
    CacheLineError,
    DetectionCache,
    fill_cache,
    missing_shards,
    parse_shard,
    shard_images,
)
from gui_grounding.data.detectors import build_detector
from gui_grounding.data.schema import Sample, load_samples
from gui_grounding.models.frames import Box, box_iou

DEFAULT_IOU_THRESHOLD = 0.1  # GTA1 preprocessing/filter.py --iou_threshold 0.1, keep when IoU >= threshold
REJECT_REASONS = {
    "low_iou": "best IoU between the annotated box(es) and any detection is under the threshold",
    "detection_failed": "the detector failed on the screenshot (undecodable image, detector error or bad detector "
    "output, recorded as an error in the cache line); the box could not be checked",
    "invalid_record": "not a valid sample (schema reason in invalid_reason), so never cleaned",
}
OUTPUT_KEYS = ("best_iou", "best_match", "reason", "error", "invalid_reason")  # fields clean adds to records
HIST_BINS = 50  # best-IoU histogram: 50 bins of width 0.02 over [0, 1]


# --------------------------------------------------------------------------------------------------------------------
# arguments


def _shard_arg(shard: Any) -> tuple[int, int] | None:
    """``shard`` as given to :func:`clean` (None, ``"I/N"`` or ``(I, N)``) checked by the same rule."""
    if shard is None:
        return None
    if isinstance(shard, str):
        return parse_shard(shard)
    if (
        isinstance(shard, (tuple, list))
        and len(shard) == 2
        and all(type(v) is int for v in shard)
        and 0 <= shard[0] < shard[1] <= MAX_SHARDS
    ):
        return int(shard[0]), int(shard[1])
    raise ValueError(f"--shard must be I/N with 0 <= I < N <= {MAX_SHARDS} (0-based), got {validate.short_repr(shard)}")


def _check_threshold(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"--iou-threshold must be a number >= 0 and <= 1, got {validate.short_repr(value)}")
    return float(value)


# --------------------------------------------------------------------------------------------------------------------
# best IoU


class ImageDetections:
    """The detections of one image with a fast candidate test; the IoU itself is :func:`box_iou`."""

    def __init__(self, detections: list[dict]):
        import numpy as np

        self.detections = detections
        self.boxes = np.asarray([d["bbox"] for d in detections], dtype=float).reshape(-1, 4)

    def best(self, boxes: list[Box]) -> tuple[float, dict | None]:
        """``(best IoU, best detection)`` over the sample's ``boxes`` and all detections; ``(0.0, None)`` if none
        overlap. Boxes in displayed-image pixels."""
        import numpy as np

        best_iou, best_det = 0.0, None
        for box in boxes:
            b = self.boxes  # candidates: detections that intersect the box (the others have IoU 0)
            hit = (b[:, 0] < box[2]) & (b[:, 2] > box[0]) & (b[:, 1] < box[3]) & (b[:, 3] > box[1])
            overlapping = np.flatnonzero(hit)
            for k in overlapping:
                iou = box_iou(box, tuple(b[k]))
                if iou > best_iou:
                    best_iou, best_det = iou, self.detections[k]
        return best_iou, best_det


# --------------------------------------------------------------------------------------------------------------------
# the run


def output_paths(out: str) -> dict[str, str]:
    """Paths written for ``--out OUT.jsonl``: kept, rejected, report, histogram, default cache dir."""
    stem = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return {
        "kept": out,
        "rejected": f"{stem}.rejected.jsonl",
        "report": f"{stem}.report.json",
        "hist": f"{stem}.iou_hist.png",
        "cache_dir": f"{stem}.detections",
    }


def _new_folders(files: list[str], folders: list[str]) -> list[str]:
    """Folders that do not exist yet on the way to ``files`` (their folders) and ``folders`` (themselves), deepest
    first: the ones a run creates, removed again when it leaves them empty."""
    new: set[str] = set()
    for folder in [*(os.path.dirname(os.path.abspath(f)) for f in files), *map(os.path.abspath, folders)]:
        while folder and not os.path.exists(folder):
            new.add(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return sorted(new, key=lambda p: (-p.count(os.sep), p))


def _remove_empty(folders: list[str]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError, ValueError):
            os.rmdir(folder)  # only an empty folder goes


def clean(
    inputs: list[str],
    out: str,
    detector: str = "ocr",
    iou_threshold: float = DEFAULT_IOU_THRESHOLD,
    *,
    image_folders: list[str] | None = None,
    cache_dir: str | None = None,
    shard: str | tuple[int, int] | None = None,
    from_cache: bool = False,
    retry_failed: bool = False,
    detector_options: dict[str, dict] | None = None,
    strict: bool = False,
    progress: bool = True,
    plot: bool = True,
) -> dict:
    """Clean grounding samples by detector IoU (GTA1): write kept/rejected JSONL, a histogram and a report.

    Args:
        inputs: data files (canonical, GTA1 or VLM-R1 records, JSON or JSONL; read by :func:`load_samples`).
        out: ``OUT.jsonl`` for kept samples; ``OUT.rejected.jsonl``, ``OUT.report.json``, ``OUT.iou_hist.png`` and
            the default cache dir ``OUT.detections/`` sit next to it (:func:`output_paths`). Image paths in the
            written records are relative to ``OUT``'s folder, so ``load_samples([OUT])`` finds the images.
        detector: detector spec, e.g. ``"ocr"``, ``"classic"``, ``"ocr+classic"`` (``detectors.build_detector``).
        iou_threshold: keep a sample when its best IoU is ``>=`` this (GTA1: 0.1); a finite number in [0, 1].
        image_folders: one folder per input that image paths are relative to (default: each file's folder).
        cache_dir: detection cache folder (default ``OUT.detections``).
        shard: ``"I/N"`` or ``(I, N)``: only fill the cache for that slice of the sorted unique images; no output
            (so no lock on ``out``: the shards of one job run at once).
        from_cache: detect nothing; raise :class:`CacheIncompleteError` naming the incomplete shards if an image has
            no (valid) cached detections.
        retry_failed: detect again the images whose cached line is an error.
        detector_options: keyword arguments per detector name (``build_detector``).
        strict: stop at the first invalid record instead of rejecting it as ``invalid_record``.
        progress: show a progress bar per image.
        plot: write the histogram PNG.

    Outputs are checked before any input is read (``groundwork.outputs.check_outputs``), ``out`` is locked for the run,
    every file is written atomically and the report last (an older report is removed before the first new file is
    written, so a report always describes the files beside it). Folders this run created are removed again when it
    leaves them empty (a failed run leaves nothing behind).

    Returns:
        The report dict (also written to ``OUT.report.json``); for a shard run, the shard's cache counts.

    Raises:
        CacheIncompleteError: ``from_cache`` with images missing from the cache.
        OutputError: an output that must not or cannot be written, or another run writing the same ``out`` or
            cache file.
        ImportError, FileNotFoundError: a detector's backend or weights are missing (before any image is processed).
        ValueError: bad ``shard``, ``iou_threshold`` or detector spec, or ``from_cache`` with ``shard`` or
            ``retry_failed``.
    """
    shard = _shard_arg(shard)
    iou_threshold = _check_threshold(iou_threshold)
    if from_cache and (shard is not None or retry_failed):
        raise ValueError("--from-cache detects nothing, --shard and --retry-failed detect: use one or the other")
    inputs, out = list(inputs), os.fspath(out)
    paths = output_paths(out)
    cache_dir = cache_dir or paths["cache_dir"]
    det = build_detector(detector, detector_options)
    caches = {c.name: DetectionCache(cache_dir, c) for c in det.components}
    appended = [] if from_cache else [c.path(shard) for c in caches.values()]
    files = [] if shard is not None else [paths[k] for k in ("kept", "rejected", "report", *(["hist"] if plot else []))]
    created = _new_folders([*files, *appended], [] if from_cache else [cache_dir])
    try:
        # before any input is read: no output may be an input (nor a cache file), nor a folder, nor unwritable
        cache_files = [c.path(s) for c in caches.values() for s in (None, shard)]
        check_outputs(files=files, inputs=[*inputs, cache_dir, *cache_files], what="--out")
        if not from_cache:
            check_outputs(folders=[cache_dir], inputs=inputs, what="--cache-dir")
            check_outputs(files=appended, inputs=inputs, what="--cache-dir")
        with OutputLock(out) if shard is None else contextlib.nullcontext():
            return _clean(
                inputs,
                out,
                det,
                caches,
                iou_threshold,
                image_folders=image_folders,
                cache_dir=cache_dir,
                shard=shard,
                from_cache=from_cache,
                retry_failed=retry_failed,
                strict=strict,
                progress=progress,
                plot=plot,
                paths=paths,
            )
    finally:
        _remove_empty(created)


def _clean(
    inputs,
    out,
    det,
    caches,
    iou_threshold,
    *,
    image_folders,
    cache_dir,
    shard,
    from_cache,
    retry_failed,
    strict,
    progress,
    plot,
    paths,
) -> dict:
    samples, load_report = load_samples(inputs, image_folders, strict=strict, verify_images=False)
    images = sorted({os.path.abspath(s.image_path) for s in samples})
    for c in caches.values():
        c.load()
    mine = images if shard is None else shard_images(images, *shard)
    try:
        counts = fill_cache(
            det, caches, mine, shard, from_cache=from_cache, retry_failed=retry_failed, progress=progress
        )
    except CacheIncompleteError as err:
        missing = [im for im in images if any(im not in c.index for c in caches.values())]
        raise CacheIncompleteError(f"{err}; {missing_shards(missing, images, cache_dir, list(caches))}") from None
    failed_images = {im for im in mine if any(c.index[im].error is not None for c in caches.values())}
    counts["failed"] = len(failed_images)
    if shard is not None:
        summary = {"shard": f"{shard[0]}/{shard[1]}", "detector": det.name, "cache_dir": cache_dir, **counts}
        print(
            f"shard {shard[0]}/{shard[1]} of {len(images)} images: {counts['images']} images, detected now "
            f"{counts['detected_now']}, already cached {counts['cached']}, failed {counts['failed']} -> {cache_dir}"
        )
        return summary

    kept, rejected = _filter(samples, caches, iou_threshold, out)
    for ref, reason, message in load_report.rejects:
        rejected.append(
            {"ref": ref, "reason": "invalid_record", "invalid_reason": reason, "message": message, "best_iou": None}
        )
    report = _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["report"])  # an older report must not describe the new files while they are written
    _write_jsonl(paths["kept"], kept)
    _write_jsonl(paths["rejected"], rejected)
    if plot:
        plot_iou_histogram(
            [r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None],
            iou_threshold,
            paths["hist"],
            title=f"best IoU vs {det.name} detections",
        )
    write_json(paths["report"], report)  # last: a report means every file beside it is complete
    print(format_report(report))
    return report


def _filter(samples: list[Sample], caches: dict[str, DetectionCache], iou_threshold: float, out: str):
    """``(kept, rejected)`` records in input order. The status is decided here, never read from a record's own
    fields: the ``OUTPUT_KEYS`` a record brings are dropped before this run's values are set."""
    out_dir = os.path.dirname(os.path.abspath(out))
    by_image: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_image[os.path.abspath(s.image_path)].append(s)
    results: dict[int, tuple[bool, dict]] = {}
    for image, group in by_image.items():
        errors, found = [], []
        for name, c in caches.items():
            entry = c.index[image]
            if entry.error is not None:
                errors.append(f"{name}: {entry.error}")
                continue
            try:
                found.extend(c.read(image)["detections"])
            except CacheLineError as err:
                errors.append(f"{name}: cache line {err}")
        dets = ImageDetections([] if errors else found)
        for s in group:
            rec = s.to_record(image_root=out_dir)
            for key in OUTPUT_KEYS:
                rec.pop(key, None)
            if errors:
                rec.update(best_iou=None, reason="detection_failed", error="; ".join(errors))
                results[id(s)] = (False, rec)
                continue
            best, match = dets.best(s.boxes)
            rec["best_iou"] = round(best, 6)
            rec["best_match"] = (
                None
                if match is None
                else {"bbox": match["bbox"], "type": match.get("type"), "source": match.get("source")}
            )
            if best < iou_threshold:
                rec["reason"] = "low_iou"
            results[id(s)] = (best >= iou_threshold, rec)
    ordered = [results[id(s)] for s in samples]  # input order
    return [r for ok, r in ordered if ok], [r for ok, r in ordered if not ok]


def _write_jsonl(path: str, records: list[dict]) -> None:
    """Records as strict JSON lines, atomically (unique temporary name, renamed when complete)."""
    with atomic_writer(path) as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


# --------------------------------------------------------------------------------------------------------------------
# report, table, histogram


def _source_key(rec: dict) -> str:
    """A record's ``source`` as a table row name: a non-empty string as is, absent/null/empty as ``unknown``, any
    other JSON value as its short repr (so a list or a number never breaks the table)."""
    src = rec.get("source")
    if isinstance(src, str) and src:
        return src
    return "unknown" if src is None or src == "" else validate.short_repr(src, 40)


def _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir) -> dict:
    import numpy as np

    rows: dict[str, Counter] = defaultdict(Counter)
    for rec in kept + [r for r in rejected if r["reason"] != "invalid_record"]:
        row = rows[_source_key(rec)]
        row["samples"] += 1
        row[rec.get("reason", "kept")] += 1
    total = Counter()
    for row in rows.values():
        total.update(row)

    def summarise(row: Counter) -> dict:
        n = row["samples"]
        removed = row["low_iou"] + row["detection_failed"]
        return {
            "samples": n,
            "kept": row["kept"],
            "low_iou": row["low_iou"],
            "detection_failed": row["detection_failed"],
            "filtered_fraction": removed / n if n else 0.0,
        }

    ious = [r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None]
    hist, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    invalid = Counter(r["invalid_reason"] for r in rejected if r["reason"] == "invalid_record")
    seconds = {}
    for name, c in caches.items():
        times = [c.index[im].seconds for im in images if im in c.index and c.index[im].seconds is not None]
        seconds[name] = round(sum(times) / len(times), 4) if times else None
    return {
        "inputs": list(inputs),
        "detector": det.name,
        "detector_config": {c.name: c.detector.config() for c in caches.values()},
        "iou_threshold": iou_threshold,
        "rule": "keep when best IoU >= threshold (GTA1 preprocessing/filter.py)",
        "records": len(samples) + sum(invalid.values()),
        "samples": len(samples),
        "kept": len(kept),
        "rejected": {reason: sum(1 for r in rejected if r["reason"] == reason) for reason in REJECT_REASONS},
        "invalid_records": dict(sorted(invalid.items())),
        "overall": summarise(total),
        "per_source": {src: summarise(row) for src, row in sorted(rows.items())},
        "images": {
            "total": len(images),
            "detected_now": counts["detected_now"],
            "cached": counts["cached"],
            "failed": counts["failed"],
        },
        "seconds_per_image": seconds,
        "cache_dir": cache_dir,
        "cache_lines": {name: c.stats() for name, c in caches.items()},
        "iou_histogram": {"bin_edges": [round(float(e), 4) for e in edges], "counts": [int(c) for c in hist]},
        "outputs": {k: v for k, v in paths.items() if k != "cache_dir"},
    }


def format_report(report: dict) -> str:
    """The printed summary: one row per ``source`` and an ``ALL`` row, filtered fraction in percent."""
    lines = [
        f"detector-IoU cleaning with {report['detector']}: keep when best IoU >= {report['iou_threshold']} "
        f"(GTA1 filter)",
        f"{'source':<24} {'samples':>9} {'kept':>9} {'low_iou':>9} {'det_failed':>10} {'filtered':>9}",
    ]
    rows = [*report["per_source"].items(), ("ALL", report["overall"])]
    for src, r in rows:
        lines.append(
            f"{src:<24} {r['samples']:>9} {r['kept']:>9} {r['low_iou']:>9} {r['detection_failed']:>10} "
            f"{100 * r['filtered_fraction']:>8.2f}%"
        )
    if report["invalid_records"]:
        detail = ", ".join(f"{k} {v}" for k, v in report["invalid_records"].items())
        lines.append(f"invalid records (rejected as invalid_record, not cleaned): {detail}")
    im = report["images"]
    secs = ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in report["seconds_per_image"].items())
    lines.append(
        f"images: {im['total']} (detected now {im['detected_now']}, from cache {im['cached']}, failed "
        f"{im['failed']}); seconds per image: {secs}"
    )
    bad = Counter()
    for stats in report.get("cache_lines", {}).values():
        bad.update(stats["bad_lines"])
    if bad:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(bad.items()))
        lines.append(f"bad cache lines ignored (their images detected again): {detail}")
    o = report["outputs"]
    lines.append(
        f"wrote {o['kept']} ({report['kept']}), {o['rejected']} ({sum(report['rejected'].values())}), "
        f"{o['report']}, {o['hist']}"
    )
    return "\n".join(lines)


def plot_iou_histogram(ious: list[float], threshold: float, out_png: str, title: str = "best IoU") -> str:
    """Histogram PNG of best IoUs (``HIST_BINS`` bins over [0, 1]) with the threshold as a vertical line, written
    atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    below = sum(1 for v in ious if v < threshold)
    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4878cf", edgecolor="white", lw=0.5)
        ax.axvline(threshold, color="#d62728", ls="--", lw=1.5, label=f"threshold {threshold:g}")
        ax.set_xlim(0, 1)
        ax.set_xlabel("best IoU of the annotated box with any detection")
        ax.set_ylabel("samples")
        ax.set_title(f"{title}: {len(ious)} samples, {below} under threshold", fontsize=10)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_writer(out_png, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return out_png


# --------------------------------------------------------------------------------------------------------------------
# command line

IOU_THRESHOLD_ARG = number(min=0, max=1)
SCORE_ARG = number(min=0, max=1)


def _detector_options(args: argparse.Namespace) -> dict[str, dict]:
    return {
        "ocr": {"min_text_score": args.ocr_min_text_score},
        "omniparser": {"weights": args.omniparser_weights, "box_threshold": args.omniparser_box_threshold},
    }


def _run_cli(args: argparse.Namespace) -> None:
    try:
        clean(
            args.inputs,
            args.out,
            args.detector,
            args.iou_threshold,
            **flag_values(args, "image_folders", "cache_dir", "shard", "from_cache", "retry_failed", "strict"),
            detector_options=_detector_options(args),
        )
    except (CacheIncompleteError, ImportError, OSError, ValueError) as err:  # OSError: OutputError, FileNotFoundError
        raise SystemExit(f"gui-grounding clean: error: {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    text = err.strerror if isinstance(err, OSError) and err.strerror and not err.filename else str(err)
    return " ".join(str(text).split())


def register_cli(subparsers) -> None:
    """Add the ``clean`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to run the cleaning and print the table.
    """
    p = subparsers.add_parser(
        "clean",
        help="drop samples whose box matches no detected UI element (GTA1 detector-IoU filter)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="GTA1's lightweight cleaning: detect the UI elements of each screenshot, take the best IoU "
        "between the annotated box (any of a sample's boxes) and any detection, keep the sample when it is >= "
        "--iou-threshold. Writes OUT.jsonl (kept, canonical records + best_iou), OUT.rejected.jsonl (records + "
        "best_iou + reason: low_iou, detection_failed, invalid_record), OUT.report.json (filtered fraction per "
        "source) and OUT.iou_hist.png. Detections are cached per image (resumable, shardable).",
        epilog="examples:\n"
        "  gui-grounding clean data/train.jsonl --detector ocr+classic --out data/clean/train.jsonl\n"
        "  # SLURM array (sbatch --array=0-7): each task fills its part of the cache, then one merge run filters\n"
        "  gui-grounding clean data/aria.jsonl --detector omniparser --omniparser-weights w/icon_detect/model.pt \\\n"
        "      --out clean/aria.jsonl --shard $SLURM_ARRAY_TASK_ID/8\n"
        "  gui-grounding clean data/aria.jsonl --detector omniparser --out clean/aria.jsonl --from-cache\n\n"
        "detectors: ocr (RapidOCR PP-OCRv4 text lines + words, onnxruntime, models in the wheel), classic (OpenCV "
        "edges/outlines/colour regions, no weights), omniparser (OmniParser YOLO icons + ocr; needs ultralytics and "
        "weights); join with + for their union.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="IN.jsonl",
        help="data files: canonical, GTA1 or VLM-R1 records (JSONL, or a .json list)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="OUT.jsonl",
        help="kept samples; OUT.rejected.jsonl, OUT.report.json, OUT.iou_hist.png and the default cache "
        "dir OUT.detections/ are written next to it; image paths are written relative to its folder",
    )
    p.add_argument(
        "--detector",
        default="ocr",
        help="ocr, classic, omniparser, or a union joined with + such as ocr+classic (default: ocr)",
    )
    add_number_flag(
        p,
        "--iou-threshold",
        IOU_THRESHOLD_ARG,
        DEFAULT_IOU_THRESHOLD,
        "keep a sample when its best IoU is >= this (default 0.1, GTA1)",
    )
    p.add_argument(
        "--image-folders",
        nargs="+",
        default=None,
        metavar="DIR",
        help="one folder per input that its image paths are relative to (default: each file's folder)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="detection cache folder, one JSONL file per detector (and shard); default OUT.detections",
    )
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="0-based shard I of N of the sorted unique images (e.g. $SLURM_ARRAY_TASK_ID/8): only fill the cache, "
        f"write no output; finish with a run without --shard (or with --from-cache) (integers 0 <= I < N <= "
        f"{MAX_SHARDS})",
    )
    p.add_argument(
        "--from-cache",
        action="store_true",
        help="detect nothing: merge all cache files and filter; stop naming the incomplete shards if an "
        "image has no cached detections",
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="detect again the images whose cached line is an error (default: errors are final and their "
        "samples are rejected as detection_failed)",
    )
    add_number_flag(
        p,
        "--ocr-min-text-score",
        SCORE_ARG,
        None,
        "also run text recognition and keep text lines with confidence >= this (GTA1/OmniParser: 0.9; ~15x "
        "slower, and drops true boxes of short/symbol text); default: detection only",
    )
    p.add_argument(
        "--omniparser-weights",
        default=None,
        metavar="PATH",
        help="omniparser detector: OmniParser-v2.0 YOLO weights, .../icon_detect/model.pt (not needed "
        "with --from-cache; the cache does not record which weights made it: use a new --cache-dir for "
        "other weights)",
    )
    add_number_flag(
        p,
        "--omniparser-box-threshold",
        SCORE_ARG,
        0.05,
        "omniparser detector: YOLO confidence threshold (default 0.05, GTA1 run.py BOX_TRESHOLD)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first invalid record instead of rejecting it as invalid_record",
    )
    p.set_defaults(func=_run_cli)


if __name__ == "__main__":  # python -m gui_grounding.data.clean IN.jsonl --out OUT.jsonl (same flags as `clean`)
    import sys

    _parser = argparse.ArgumentParser(prog="python -m gui_grounding.data.clean")
    register_cli(_parser.add_subparsers(dest="command", required=True))
    _args = _parser.parse_args(["clean", *sys.argv[1:]])
    _args.func(_args)
