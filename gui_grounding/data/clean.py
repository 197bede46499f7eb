"""Detector-IoU cleaning of grounding data, GTA1's lightweight filter: ``gui-grounding clean``.

Rule (GTA1 ``preprocessing/filter.py``, ``gta1_and_peers.md`` section 1.3): detect the UI elements on each screenshot,
take the best IoU between the annotated box (any of a sample's boxes) and any detection, keep the sample when
``best_iou >= iou_threshold`` (0.1 by default, as GTA1), reject it otherwise. The IoU is :func:`gui_grounding.frames.
box_iou`; all boxes are in original-image pixels ``(x_min, y_min, x_max, y_max)``.

Nothing is lost: every input record ends up in ``OUT.jsonl`` (kept, canonical record + ``best_iou``) or in
``OUT.rejected.jsonl`` with a reason from ``REJECT_REASONS`` (``low_iou``, ``detection_failed``, ``invalid_record``).

Detections are cached per image and per detector component (``gui_grounding.data.detectors``) in JSONL files under
``--cache-dir`` (default ``OUT.detections/``), one line per image::

    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "seconds": 0.52, "detections": [...]}
    {"image": "/abs/path.png", "detector": "ocr", "config": {...}, "error": "OSError: ..."}

Files: ``<detector>.jsonl`` (runs without ``--shard``) and ``<detector>.shard-<I>-of-<N>.jsonl``. Every run reads all
of them; images already cached (with the same detector configuration) are skipped, so a killed run resumes where it
stopped (a half-written last line is dropped and that image redone). ``--shard I/N`` (0-based) takes the I-th of N
contiguous slices of the sorted unique image list (``numpy.array_split`` order, as GTA1's ``run.py``), only fills the
cache and writes no output; a final run without ``--shard`` merges every cache file, detects what is still missing
(``--from-cache``: detects nothing and stops with the missing shards named) and filters.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from gui_grounding.data.detectors import Detector, build_detector
from gui_grounding.frames import Box, box_iou
from gui_grounding.schema import Sample, load_samples

logger = logging.getLogger(__name__)

DEFAULT_IOU_THRESHOLD = 0.1  # GTA1 preprocessing/filter.py --iou_threshold 0.1, keep when IoU >= threshold
REJECT_REASONS = {
    "low_iou": "best IoU between the annotated box(es) and any detection is under the threshold",
    "detection_failed": "the detector failed on the screenshot (error in the cache line); the box could not be checked",
    "invalid_record": "not a valid sample (schema reason in invalid_reason), so never cleaned",
}
HIST_BINS = 50  # best-IoU histogram: 50 bins of width 0.02 over [0, 1]


class CacheIncompleteError(RuntimeError):
    """``--from-cache`` was asked but some images have no cached detections."""


# --------------------------------------------------------------------------------------------------------------------
# shards


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N`` (0-based, like ``$SLURM_ARRAY_TASK_ID`` of ``--array=0-(N-1)``).

    Raises:
        ValueError: not of the form ``I/N`` or out of range.
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard must be I/N with 0 <= I < N (0-based), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def shard_bounds(num_items: int, index: int, count: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``index`` of ``count`` contiguous slices of ``num_items`` items.

    Same split as ``numpy.array_split`` (GTA1 ``run.py``): the first ``num_items % count`` shards get one extra item.
    """
    base, extra = divmod(num_items, count)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def shard_images(images: list[str], index: int, count: int) -> list[str]:
    """The images of shard ``index`` of ``count``: a contiguous slice of ``sorted(set(images))``."""
    ordered = sorted(set(images))
    start, stop = shard_bounds(len(ordered), index, count)
    return ordered[start:stop]


# --------------------------------------------------------------------------------------------------------------------
# detection cache


def _canonical_config(config: dict) -> str:
    return json.dumps(config, sort_keys=True, allow_nan=False)


@dataclass
class CacheEntry:
    """Where one image's cache line is (``path``, byte ``offset``), its error (``None`` on success) and seconds."""

    path: str
    offset: int
    error: str | None
    seconds: float | None


@dataclass
class DetectionCache:
    """The cache files of one leaf detector in ``cache_dir`` (``<name>.jsonl`` and ``<name>.shard-I-of-N.jsonl``).

    :meth:`load` indexes every file of this detector (``index``: image -> :class:`CacheEntry`; detections stay on disk
    and :meth:`read` fetches one image's line, so memory does not grow with the detections of millions of images).
    Lines made with another configuration are ignored (counted in ``stale``), unparseable lines too (``bad_lines``; a
    line without its final newline is a half-written line of a killed run). For one image, a success wins over an
    error, and a later line over an earlier one of the same kind.
    """

    cache_dir: str
    detector: Detector
    index: dict[str, CacheEntry] = field(default_factory=dict)
    stale: int = 0
    bad_lines: int = 0

    @property
    def name(self) -> str:
        return self.detector.name

    def path(self, shard: tuple[int, int] | None = None) -> str:
        """File this run appends to: ``<name>.jsonl``, or ``<name>.shard-I-of-N.jsonl`` for a shard run."""
        suffix = "" if shard is None else f".shard-{shard[0]}-of-{shard[1]}"
        return os.path.join(self.cache_dir, f"{self.name}{suffix}.jsonl")

    def files(self) -> list[str]:
        """Existing cache files of this detector, sorted."""
        pattern = os.path.join(glob.escape(self.cache_dir), f"{self.name}.shard-*-of-*.jsonl")
        return sorted(p for p in [self.path(), *glob.glob(pattern)] if os.path.isfile(p))

    def _add(self, image: str, entry: CacheEntry) -> None:
        old = self.index.get(image)
        if old is None or old.error is not None or entry.error is None:
            self.index[image] = entry

    def load(self) -> dict[str, CacheEntry]:
        """Index all cache files of this detector into ``index`` (image path -> :class:`CacheEntry`)."""
        want = _canonical_config(self.detector.config())
        self.index, self.stale, self.bad_lines = {}, 0, 0
        for path in self.files():
            with open(path, "rb") as f:
                offset = 0
                for line in f:
                    start, offset = offset, offset + len(line)
                    if not line.endswith(b"\n"):
                        self.bad_lines += 1  # half-written last line: the image is detected again
                        continue
                    try:
                        entry = json.loads(line)
                        image = entry["image"]
                    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                        self.bad_lines += int(bool(line.strip()))
                        continue
                    if entry.get("detector") != self.name or _canonical_config(entry.get("config", {})) != want:
                        self.stale += 1
                        continue
                    self._add(image, CacheEntry(path, start, entry.get("error"), entry.get("seconds")))
        if self.stale:
            logger.warning("%s: %d cached lines were made with another %s configuration; ignored (recomputed)",
                           self.cache_dir, self.stale, self.name)  # fmt: skip
        if self.bad_lines:
            logger.warning("%s: %d unreadable or half-written cache lines of %s ignored (those images are redone)",
                           self.cache_dir, self.bad_lines, self.name)  # fmt: skip
        return self.index

    def read(self, image: str) -> dict:
        """The cache line of ``image`` (``detections`` or ``error``)."""
        entry = self.index[image]
        with open(entry.path, "rb") as f:
            f.seek(entry.offset)
            return json.loads(f.readline())

    def open_for_append(self, shard: tuple[int, int] | None = None):
        """Open this run's file for appending (binary), first cutting a half-written last line (no final newline)."""
        os.makedirs(self.cache_dir, exist_ok=True)
        path = self.path(shard)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, "rb+") as f:
                data = f.read()
                if not data.endswith(b"\n"):
                    f.truncate(data.rfind(b"\n") + 1)
        return open(path, "ab")

    def append(self, handle, entry: dict) -> None:
        """Write one cache line to ``handle`` (from :meth:`open_for_append`), flush it and index it."""
        offset = handle.tell()
        handle.write((json.dumps(entry, allow_nan=False) + "\n").encode("utf-8"))
        handle.flush()
        self._add(entry["image"], CacheEntry(handle.name, offset, entry.get("error"), entry.get("seconds")))


def detect_one(detector: Detector, image: str) -> dict:
    """Run one leaf detector on one image and return its cache line; a failure becomes an ``error`` line."""
    entry: dict[str, Any] = {"image": image, "detector": detector.name, "config": detector.config()}
    start = time.perf_counter()
    try:
        entry["detections"] = detector.detect(image)
    except Exception as err:  # any per-image failure is recorded, the run goes on
        entry["error"] = f"{type(err).__name__}: {err}"
    entry["seconds"] = round(time.perf_counter() - start, 4)
    return entry


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
        overlap. Boxes in original pixels."""
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
    return {"kept": out, "rejected": f"{stem}.rejected.jsonl", "report": f"{stem}.report.json",
            "hist": f"{stem}.iou_hist.png", "cache_dir": f"{stem}.detections"}  # fmt: skip


def _fill_cache(detector: Detector, caches: dict[str, DetectionCache], images: list[str], shard, *,
                from_cache: bool, retry_failed: bool, progress: bool) -> dict[str, int]:  # fmt: skip
    """Detect every image of ``images`` missing from the caches; returns counts (detected, cached, failed)."""
    todo = {name: [im for im in images if im not in c.index or (retry_failed and c.index[im].error is not None)]
            for name, c in caches.items()}  # fmt: skip
    todo_images = sorted({im for ims in todo.values() for im in ims})
    counts = {"images": len(images), "detected_now": len(todo_images), "cached": len(images) - len(todo_images)}
    if todo_images and from_cache:
        raise CacheIncompleteError(f"{len(todo_images)} of {len(images)} images have no cached detections "
                                   f"(e.g. {todo_images[0]})")  # fmt: skip
    if not todo_images:
        return counts
    from tqdm.auto import tqdm

    needed = [c for c in detector.components if todo[c.name]]
    for comp in needed:
        comp.load()
    handles = {c.name: caches[c.name].open_for_append(shard) for c in needed}
    sets = {name: set(ims) for name, ims in todo.items()}
    try:
        for image in tqdm(todo_images, desc=f"detect ({detector.name})", unit="img", disable=not progress):
            for comp in needed:
                if image in sets[comp.name]:
                    caches[comp.name].append(handles[comp.name], detect_one(comp, image))
    finally:
        for h in handles.values():
            h.close()
    return counts


def _missing_shards(missing: list[str], images: list[str], cache_dir: str, names: list[str]) -> str:
    """Which ``--shard I/N`` runs would fill ``missing`` (N taken from the shard files present)."""
    files = [p for n in names for p in glob.glob(os.path.join(glob.escape(cache_dir), f"{n}.shard-*"))]
    counts = sorted({int(m.group(1)) for p in files if (m := re.search(r"-of-(\d+)\.jsonl$", p))})
    if not counts:
        return "no shard cache files found; run without --from-cache to detect them here"
    position = {im: i for i, im in enumerate(images)}
    parts = []
    for n in counts:
        idx = sorted({next(i for i in range(n) if shard_bounds(len(images), i, n)[1] > position[im]) for im in missing})
        parts.append(", ".join(f"--shard {i}/{n}" for i in idx))
    return "incomplete shards: " + "; ".join(parts)


def clean(inputs: list[str], out: str, detector: str = "ocr", iou_threshold: float = DEFAULT_IOU_THRESHOLD, *,
          image_folders: list[str] | None = None, cache_dir: str | None = None, shard: str | tuple[int, int] | None = None,
          from_cache: bool = False, retry_failed: bool = False, detector_options: dict[str, dict] | None = None,
          strict: bool = False, progress: bool = True, plot: bool = True) -> dict:  # fmt: skip
    """Clean grounding samples by detector IoU (GTA1): write kept/rejected JSONL, a report and a histogram.

    Args:
        inputs: data files (canonical, GTA1 or VLM-R1 records, JSON or JSONL; read by :func:`load_samples`).
        out: ``OUT.jsonl`` for kept samples; ``OUT.rejected.jsonl``, ``OUT.report.json``, ``OUT.iou_hist.png`` and
            the default cache dir ``OUT.detections/`` sit next to it (:func:`output_paths`). Image paths in the
            written records are relative to ``OUT``'s folder, so ``load_samples([OUT])`` finds the images.
        detector: detector spec, e.g. ``"ocr"``, ``"classic"``, ``"ocr+classic"`` (``detectors.build_detector``).
        iou_threshold: keep a sample when its best IoU is ``>=`` this (GTA1: 0.1).
        image_folders: one folder per input that image paths are relative to (default: each file's folder).
        cache_dir: detection cache folder (default ``OUT.detections``).
        shard: ``"I/N"`` or ``(I, N)``: only fill the cache for that slice of the sorted unique images; no output.
        from_cache: detect nothing; raise :class:`CacheIncompleteError` naming the incomplete shards if an image has
            no cached detections.
        retry_failed: detect again the images whose cached line is an error.
        detector_options: keyword arguments per detector name (``build_detector``).
        strict: stop at the first invalid record instead of rejecting it as ``invalid_record``.
        progress: show a progress bar per image.
        plot: write the histogram PNG.

    Returns:
        The report dict (also written to ``OUT.report.json``); for a shard run, the shard's cache counts.

    Raises:
        CacheIncompleteError: ``from_cache`` with images missing from the cache.
        ImportError, FileNotFoundError: a detector's backend or weights are missing (before any image is processed).
        ValueError: bad ``shard`` or detector spec, or ``from_cache`` with ``shard`` or ``retry_failed``.
    """
    if isinstance(shard, str):
        shard = parse_shard(shard)
    if from_cache and (shard is not None or retry_failed):
        raise ValueError("--from-cache detects nothing, --shard and --retry-failed detect: use one or the other")
    paths = output_paths(out)
    cache_dir = cache_dir or paths["cache_dir"]
    det = build_detector(detector, detector_options)
    samples, load_report = load_samples(list(inputs), image_folders, strict=strict, verify_images=False)
    images = sorted({os.path.abspath(s.image_path) for s in samples})
    caches = {c.name: DetectionCache(cache_dir, c) for c in det.components}
    for c in caches.values():
        c.load()
    mine = images if shard is None else shard_images(images, *shard)
    try:
        counts = _fill_cache(det, caches, mine, shard, from_cache=from_cache, retry_failed=retry_failed,
                             progress=progress)  # fmt: skip
    except CacheIncompleteError as err:
        missing = [im for im in images if any(im not in c.index for c in caches.values())]
        raise CacheIncompleteError(f"{err}; {_missing_shards(missing, images, cache_dir, list(caches))}") from None
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
        rejected.append({"ref": ref, "reason": "invalid_record", "invalid_reason": reason, "message": message,
                         "best_iou": None})  # fmt: skip
    report = _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    _write_jsonl(paths["kept"], kept)
    _write_jsonl(paths["rejected"], rejected)
    with open(paths["report"], "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, allow_nan=False)
    if plot:
        plot_iou_histogram([r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None], iou_threshold,
                           paths["hist"], title=f"best IoU vs {det.name} detections")  # fmt: skip
    print(format_report(report))
    return report


def _filter(samples: list[Sample], caches: dict[str, DetectionCache], iou_threshold: float, out: str):
    out_dir = os.path.dirname(os.path.abspath(out))
    by_image: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_image[os.path.abspath(s.image_path)].append(s)
    results: dict[int, dict] = {}
    for image, group in by_image.items():
        errors = [f"{name}: {c.index[image].error}" for name, c in caches.items() if c.index[image].error is not None]
        dets = ImageDetections([] if errors else [d for c in caches.values() for d in c.read(image)["detections"]])
        for s in group:
            rec = s.to_record(image_root=out_dir)
            if errors:
                rec.update(best_iou=None, reason="detection_failed", error="; ".join(errors))
            else:
                best, match = dets.best(s.boxes)
                rec["best_iou"] = round(best, 6)
                rec["best_match"] = None if match is None else {k: match[k] for k in ("bbox", "type", "source")}
                if best < iou_threshold:
                    rec["reason"] = "low_iou"
            results[id(s)] = rec
    ordered = [results[id(s)] for s in samples]  # input order
    return [r for r in ordered if "reason" not in r], [r for r in ordered if "reason" in r]


def _write_jsonl(path: str, records: list[dict]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------------------------
# report, table, histogram


def _report(inputs, det, iou_threshold, samples, kept, rejected, caches, images, counts, paths, cache_dir) -> dict:
    import numpy as np

    rows: dict[str, Counter] = defaultdict(Counter)
    for rec in kept + [r for r in rejected if r["reason"] != "invalid_record"]:
        row = rows[rec.get("source") or "unknown"]
        row["samples"] += 1
        row[rec.get("reason", "kept")] += 1
    total = Counter()
    for row in rows.values():
        total.update(row)

    def summarise(row: Counter) -> dict:
        n = row["samples"]
        removed = row["low_iou"] + row["detection_failed"]
        return {"samples": n, "kept": row["kept"], "low_iou": row["low_iou"],
                "detection_failed": row["detection_failed"], "filtered_fraction": removed / n if n else 0.0}  # fmt: skip

    ious = [r["best_iou"] for r in kept + rejected if r.get("best_iou") is not None]
    hist, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    invalid = Counter(r["invalid_reason"] for r in rejected if r["reason"] == "invalid_record")
    seconds = {}
    for name, c in caches.items():
        times = [c.index[im].seconds for im in images if im in c.index and c.index[im].seconds is not None]
        seconds[name] = round(sum(times) / len(times), 4) if times else None
    return {
        "inputs": list(inputs), "detector": det.name, "detector_config": {c.name: c.detector.config()
                                                                          for c in caches.values()},
        "iou_threshold": iou_threshold, "rule": "keep when best IoU >= threshold (GTA1 preprocessing/filter.py)",
        "records": len(samples) + sum(invalid.values()), "samples": len(samples), "kept": len(kept),
        "rejected": {reason: sum(1 for r in rejected if r["reason"] == reason) for reason in REJECT_REASONS},
        "invalid_records": dict(sorted(invalid.items())),
        "overall": summarise(total), "per_source": {src: summarise(row) for src, row in sorted(rows.items())},
        "images": {"total": len(images), "detected_now": counts["detected_now"], "cached": counts["cached"],
                   "failed": counts["failed"]},
        "seconds_per_image": seconds, "cache_dir": cache_dir,
        "iou_histogram": {"bin_edges": [round(float(e), 4) for e in edges], "counts": [int(c) for c in hist]},
        "outputs": {k: v for k, v in paths.items() if k != "cache_dir"},
    }  # fmt: skip


def format_report(report: dict) -> str:
    """The printed summary: one row per ``source`` and an ``ALL`` row, filtered fraction in percent."""
    lines = [f"detector-IoU cleaning with {report['detector']}: keep when best IoU >= {report['iou_threshold']} "
             f"(GTA1 filter)",
             f"{'source':<24} {'samples':>9} {'kept':>9} {'low_iou':>9} {'det_failed':>10} {'filtered':>9}"]  # fmt: skip
    rows = [*report["per_source"].items(), ("ALL", report["overall"])]
    for src, r in rows:
        lines.append(f"{src:<24} {r['samples']:>9} {r['kept']:>9} {r['low_iou']:>9} {r['detection_failed']:>10} "
                     f"{100 * r['filtered_fraction']:>8.2f}%")  # fmt: skip
    if report["invalid_records"]:
        detail = ", ".join(f"{k} {v}" for k, v in report["invalid_records"].items())
        lines.append(f"invalid records (rejected as invalid_record, not cleaned): {detail}")
    im = report["images"]
    secs = ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in report["seconds_per_image"].items())
    lines.append(f"images: {im['total']} (detected now {im['detected_now']}, from cache {im['cached']}, failed "
                 f"{im['failed']}); seconds per image: {secs}")  # fmt: skip
    o = report["outputs"]
    lines.append(f"wrote {o['kept']} ({report['kept']}), {o['rejected']} ({sum(report['rejected'].values())}), "
                 f"{o['report']}, {o['hist']}")  # fmt: skip
    return "\n".join(lines)


def plot_iou_histogram(ious: list[float], threshold: float, out_png: str, title: str = "best IoU") -> str:
    """Histogram PNG of best IoUs (``HIST_BINS`` bins over [0, 1]) with the threshold as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts, edges = np.histogram(ious, bins=HIST_BINS, range=(0.0, 1.0))
    below = sum(1 for v in ious if v < threshold)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4878cf", edgecolor="white", lw=0.5)
    ax.axvline(threshold, color="#d62728", ls="--", lw=1.5, label=f"threshold {threshold:g}")
    ax.set_xlim(0, 1)
    ax.set_xlabel("best IoU of the annotated box with any detection")
    ax.set_ylabel("samples")
    ax.set_title(f"{title}: {len(ious)} samples, {below} under threshold", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


# --------------------------------------------------------------------------------------------------------------------
# command line


def _detector_options(args: argparse.Namespace) -> dict[str, dict]:
    return {"ocr": {"min_text_score": args.ocr_min_text_score},
            "omniparser": {"weights": args.omniparser_weights, "box_threshold": args.omniparser_box_threshold}}  # fmt: skip


def _run_cli(args: argparse.Namespace) -> None:
    try:
        clean(args.inputs, args.out, args.detector, args.iou_threshold, image_folders=args.image_folders,
              cache_dir=args.cache_dir, shard=args.shard, from_cache=args.from_cache, retry_failed=args.retry_failed,
              detector_options=_detector_options(args), strict=args.strict)  # fmt: skip
    except (CacheIncompleteError, ImportError, FileNotFoundError, ValueError) as err:
        raise SystemExit(f"gui-grounding clean: error: {err}") from None


def register_cli(subparsers) -> None:
    """Add the ``clean`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to run the cleaning and print the table.
    """
    p = subparsers.add_parser(
        "clean", help="drop samples whose box matches no detected UI element (GTA1 detector-IoU filter)",
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
    )  # fmt: skip
    p.add_argument("inputs", nargs="+", metavar="IN.jsonl",
                   help="data files: canonical, GTA1 or VLM-R1 records (JSONL, or a .json list)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="OUT.jsonl",
                   help="kept samples; OUT.rejected.jsonl, OUT.report.json, OUT.iou_hist.png and the default cache "
                   "dir OUT.detections/ are written next to it; image paths are written relative to its folder")  # fmt: skip
    p.add_argument(
        "--detector",
        default="ocr",
        help="ocr, classic, omniparser, or a union joined with + such as ocr+classic (default: ocr)",
    )
    p.add_argument("--iou-threshold", type=float, default=DEFAULT_IOU_THRESHOLD,
                   help="keep a sample when its best IoU is >= this (default 0.1, GTA1)")  # fmt: skip
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
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="0-based shard I of N of the sorted unique images (e.g. $SLURM_ARRAY_TASK_ID/8): only fill "
                   "the cache, write no output; finish with a run without --shard (or with --from-cache)")  # fmt: skip
    p.add_argument("--from-cache", action="store_true",
                   help="detect nothing: merge all cache files and filter; stop naming the incomplete shards if an "
                   "image has no cached detections")  # fmt: skip
    p.add_argument("--retry-failed", action="store_true",
                   help="detect again the images whose cached line is an error (default: errors are final and their "
                   "samples are rejected as detection_failed)")  # fmt: skip
    p.add_argument("--ocr-min-text-score", type=float, default=None,
                   help="also run text recognition and keep text lines with confidence >= this (GTA1/OmniParser: "
                   "0.9; ~15x slower, and drops true boxes of short/symbol text); default: detection only")  # fmt: skip
    p.add_argument(
        "--omniparser-weights",
        default=None,
        metavar="PATH",
        help="omniparser detector: OmniParser-v2.0 YOLO weights, .../icon_detect/model.pt (not needed "
        "with --from-cache; the cache does not record which weights made it: use a new --cache-dir for "
        "other weights)",
    )
    p.add_argument(
        "--omniparser-box-threshold",
        type=float,
        default=0.05,
        help="omniparser detector: YOLO confidence threshold (default 0.05, GTA1 run.py BOX_TRESHOLD)",
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
