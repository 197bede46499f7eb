"""``gui-grounding convert``: public grounding datasets -> canonical JSONL, streamed, validated, nothing lost.

    gui-grounding convert --format gta1 data/grounding_dataset/*.json --image-root data/grounding_dataset \\
        --out data/gta1.jsonl --workers 8

Pipeline, record by record (``gui_grounding.data.formats`` has one reader per format, and each reader's docstring
cites the published description of its format):

1. **read** the inputs incrementally with ``groundwork.records.iter_records`` (a JSON list element by element, so a 4 GB
   file never sits in memory; JSONL line by line), parquet in row batches (``pyarrow``);
2. the format's reader turns each record into targets (instruction, image, box(es) in the format's own convention);
3. the **image size** comes from the image header (``imagesize``, PIL as fallback), read once per image path and
   cached; with ``--workers N`` the header reads (and the writing of images embedded in parquet rows) of a chunk of
   records run on N threads, while samples are still written in input order, so the output does not depend on N;
4. boxes are converted to **original-image pixels** (``gui_grounding.models.frames``) and validated by the one clipping rule
   (``gui_grounding.data.schema.clip_box``): a few pixels of overshoot are clipped and counted, more is rejected;
5. exact **duplicates** (same image, instruction and box(es) as an earlier sample of this run) are rejected.

Steps 2 to 5 are the engine, :class:`gui_grounding.data.convert_engine.Converter` (with the counts,
``ConvertReport``); this module reads the inputs (step 1), runs the engine under the output rules and holds the
command line.

Outputs, for ``--out OUT.jsonl``: ``OUT.jsonl`` (canonical records, ``gui_grounding.data.schema.Sample.to_record``, image
paths relative to ``--image-root``, with ``source``, ``platform``, ``ui_type`` where known and
``image_width``/``image_height``), ``OUT.rejects.jsonl`` (one line per rejected target: ``{"ref", "reason",
"message", "record"}``, ``reason`` a key of ``gui_grounding.data.schema.REASONS``) and ``OUT.summary.json`` (counts per
reason, clipped count, records/s, elapsed). Every target becomes a sample or a reject line: ``targets == samples +
rejected``. Files are written under temporary names and renamed at the end, so a failed run leaves no partial output.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groundwork import outputs, validate
from groundwork.argtypes import add_number_flag, flag_values, integer, number
from groundwork.argtypes import text as text_arg
from groundwork.records import RecordError, iter_records
from gui_grounding.data.convert_engine import Converter, ConvertReport
from gui_grounding.data.formats import DIRECT_FORMATS, FORMATS
from gui_grounding.data.formats_common import PLATFORMS, UNITS, ReadContext
from gui_grounding.data.schema import CLIP_TOLERANCE_PX, CLIP_TOLERANCE_RATIO, SampleError
from vlm_r1.modules import available_modules, get_vlm_module

PARQUET_BATCH_ROWS = 256

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------------------------
# reading inputs


def iter_input(path: str) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(ref, index, record_or_error)`` for each record of one input file, reading it incrementally.

    Two front ends, one per container: ``.parquet`` -> row batches (pyarrow), ref ``file:[row]``; every other file
    -> ``groundwork.records.iter_records``, the one JSON/JSONL reader (whatever the name says: a JSON list, streamed element
    by element with ``file:[index]`` refs, so a multi-GB list never sits in memory; JSONL with ``file:line`` refs; one
    object; compressed files, archives, UTF-16 and what is not a regular file named as such).

    A record that is not a JSON object, an unparseable record (a JSON list element or a line) and an object holding a
    key twice are yielded as a :class:`groundwork.records.RecordError` and the records after it are read; a parquet file
    that breaks part-way is one error naming the row, and the rest of that file is not read.
    """
    if path.endswith(".parquet"):
        yield from _iter_parquet(path)
        return
    yield from iter_records(path)


def _iter_parquet(path: str) -> Iterator[tuple[str, int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    index = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for row in batch.to_pylist():
                yield f"{path}:[{index}]", index, row
                index += 1
    except (OSError, pa.ArrowException) as err:
        ref = f"{path}:[{index}]"
        yield (
            ref,
            index,
            RecordError(
                ref,
                f"cannot read parquet at or after row {index} (the rest of the file is "
                f"not read): {type(err).__name__}: {err}",
            ),
        )


# --------------------------------------------------------------------------------------------------------------------
# the run


def output_paths(out: str) -> tuple[str, str]:
    """``(rejects_path, summary_path)`` for ``--out``: ``X.jsonl`` -> ``X.rejects.jsonl``, ``X.summary.json``."""
    stem = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return f"{stem}.rejects.jsonl", f"{stem}.summary.json"


def convert(
    fmt: str,
    inputs: list[str],
    image_root: str,
    out: str,
    *,
    strict: bool = False,
    workers: int = 1,
    source: str | None = None,
    platform: str | None = None,
    clip_tolerance_px: float = CLIP_TOLERANCE_PX,
    box_unit: str | None = None,
    keep_duplicates: bool = False,
    progress: bool | None = None,
    verify_images: str = "decode",
    max_image_pixels: int | None = validate.DECODE_PIXEL_LIMIT,
    limits: validate.ImageLimits | None = None,
) -> ConvertReport:
    """Convert ``inputs`` in format ``fmt`` to canonical JSONL at ``out`` (plus ``.rejects.jsonl`` and
    ``.summary.json``, see the module docstring).

    Args:
        fmt: a key of ``gui_grounding.data.formats.FORMATS``.
        inputs: data files (JSON list, JSONL, a single JSON object, or parquet), read in the order given.
        image_root: folder the records' image paths are relative to (embedded parquet images are written under it).
        out: output JSONL path; boxes in original-image pixels, image paths relative to ``image_root``.
        strict: raise at the first target that would be rejected (nothing is written).
        workers: threads for image header reads / embedded image writes (1 = inline); the output is identical for
            any value.
        source: ``source`` written on every sample (default: the record's own, for canonical records, else ``fmt``).
        platform: ``mobile``/``desktop``/``web`` for every sample (default: what the format or record says, if any).
        clip_tolerance_px: pixels a box edge may stick out of the image and be clipped (``schema.clip_box``; ratio
            and 0-1000 formats also get ``schema.CLIP_TOLERANCE_RATIO`` of the image side).
        box_unit: read the format's box values as ``pixel``/``ratio``/``norm1000`` instead of its documented unit
            (for schemas not confirmed, e.g. ``aria-ui-web``); not for ``canonical``/``vlm-r1``.
        keep_duplicates: write exact duplicates instead of rejecting them as ``duplicate``.
        progress: show a tqdm progress bar with records/s (default: only on a terminal).
        verify_images: ``decode`` (default: every unique image decoded once; truncated or corrupt data is
            ``unreadable_image``), ``header`` (header only) or ``none`` (header only, for the size; same as
            ``header`` today). See ``groundwork.validate.ImageChecker``.
        max_image_pixels: the decode guard: ``image_too_large`` when the header declares more pixels of the original
            image (default ``groundwork.validate.DECODE_PIXEL_LIMIT``, 64 Mpx; None/0: no limit). Unrelated to the
            model's smart_resize ``max_pixels``.
        limits: the target model family's image limits (``--family`` / ``--model``): an image outside them (aspect
            ratio, smallest side) is ``image_unsupported``, so no training run meets it at step 1.

    Outputs (``groundwork.outputs``): checked before any input is read (``--out`` may not be an input, a folder, or in
    a folder that cannot be written), locked against a second writer, written under unique temporary names and
    renamed, the summary last; a stale summary of an earlier run is removed first, so a summary always describes
    the outputs beside it.

    Returns:
        The :class:`ConvertReport` (also written to the summary file).

    Raises:
        SampleError: in strict mode, for the first bad record; its ref names the file and line / index.
        FileNotFoundError: an input file does not exist.
        groundwork.records.DataFileError: an input that is not JSON text (gzip, bzip2, xz, zstd, zip, UTF-16/32, not a
            regular file; ``groundwork.records.check_data_file``): one error for the file, nothing written.
        ValueError: unknown format, platform, box unit or verify mode, or ``workers < 1``.
        groundwork.outputs.OutputError: an output that cannot or must not be written (one line).
    """
    if verify_images not in validate.VERIFY_MODES:
        raise ValueError(f"verify_images must be one of {validate.VERIFY_MODES}, got {verify_images!r}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if platform is not None and platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, got {platform!r}")
    if box_unit is not None and (box_unit not in UNITS or fmt in DIRECT_FORMATS):
        raise ValueError(
            f"box_unit must be one of {UNITS} and applies to every format but {DIRECT_FORMATS}; got "
            f"{box_unit!r} for {fmt!r}"
        )
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    for path in inputs:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"input file not found: {path}")
    from tqdm import tqdm

    rejects_path, summary_path = output_paths(out)
    outputs.check_outputs(files=[out, rejects_path, summary_path], inputs=inputs)
    if len({os.path.abspath(p) for p in (out, rejects_path, summary_path)}) < 3:
        raise outputs.OutputError(f"--out {out}: its rejects or summary file would be the output itself")
    report = ConvertReport(
        fmt, list(inputs), out, rejects_path, summary_path, workers, clip_tolerance_px, verify_images, max_image_pixels
    )
    stems = Counter()
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    bar = tqdm(desc=f"convert {fmt}", unit=" rec", unit_scale=True, disable=None if progress is None else not progress)
    try:
        with outputs.OutputLock(out):
            if os.path.lexists(summary_path):  # a summary must describe the outputs beside it, or not exist
                os.remove(summary_path)
            with outputs.atomic_writer(out) as out_f, outputs.atomic_writer(rejects_path) as rej_f:
                conv = Converter(
                    fmt,
                    os.path.abspath(image_root),
                    report,
                    strict=strict,
                    source=source,
                    platform=platform,
                    clip_tolerance_px=clip_tolerance_px,
                    box_unit=box_unit,
                    keep_duplicates=keep_duplicates,
                    pool=pool,
                    out_f=out_f,
                    rej_f=rej_f,
                    verify_images=verify_images,
                    max_image_pixels=max_image_pixels,
                    limits=limits,
                    parquet=any(p.endswith(".parquet") for p in inputs),
                )
                for path in inputs:
                    stem = os.path.splitext(os.path.basename(path))[0]
                    stems[stem] += 1
                    stem = stem if stems[stem] == 1 else f"{stem}#{stems[stem]}"  # two inputs with one name stay apart
                    since = 0
                    for ref, index, item in iter_input(path):
                        conv.add_record(ReadContext(path, ref, index, stem), item)
                        since += 1
                        if since == 1000:
                            bar.update(since)
                            since = 0
                    bar.update(since)
                conv.flush()
            report.elapsed_s = time.perf_counter() - start
            outputs.write_json(summary_path, report.to_dict(), indent=1)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown()
    return report


# --------------------------------------------------------------------------------------------------------------------
# command line


class _DecodeGuardFlag(argparse.Action):
    """``--max-image-pixels`` (and its deprecated old name ``--max-pixels``, which logs a one-line warning)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string == "--max-pixels":
            logger.warning(
                "convert: --max-pixels is deprecated: use --max-image-pixels (the decode guard on the "
                "original image; the model's smart_resize max_pixels is a training/eval flag)"
            )
        setattr(namespace, self.dest, values)


def _run(args: argparse.Namespace) -> None:
    same_names = ("strict", "workers", "source", "platform", "box_unit", "keep_duplicates", "verify_images")
    try:
        report = convert(
            args.format,
            args.inputs,
            args.image_root,
            args.out,
            **flag_values(args, *same_names),
            clip_tolerance_px=args.clip_tolerance,
            max_image_pixels=args.max_image_pixels or None,
            limits=_limits(args),
        )
    except SampleError as err:
        raise SystemExit(f"convert --strict: stopped at the first bad record: {err}") from None
    except (ValueError, OSError) as err:  # FileNotFoundError, groundwork.outputs.OutputError, disk full, ...
        raise SystemExit(f"convert: error: {err}") from None
    print(report.table())


def _limits(args: argparse.Namespace) -> validate.ImageLimits | None:
    """The image limits of ``--family`` or ``--model`` (``VLMBaseModule.image_limits``), or None."""
    which = getattr(args, "family", None) or getattr(args, "model", None)
    if not which:
        return None

    try:
        return get_vlm_module(which).image_limits()
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"--family/--model {which!r}: {err}") from None


def register_cli(subparsers) -> None:
    """Add the ``convert`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to convert and print the summary table.
    """
    formats = "\n".join(f"  {name:<16} {spec.summary}" for name, spec in FORMATS.items())
    p = subparsers.add_parser(
        "convert",
        help="convert a public grounding dataset to canonical JSONL (validated, nothing lost)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert published GUI grounding records (GTA1, OS-Atlas, Aria-UI, ShowUI, UGround, SeeClick, "
        "GUI-R1, ScreenSpot-V2/Pro, VLM-R1, canonical) into canonical JSONL with boxes in original-image pixels. "
        "Inputs are streamed (JSON lists element by element, JSONL, parquet); image sizes come from the image headers. Every "
        "record becomes a sample or a line of OUT.rejects.jsonl with a reason code; OUT.summary.json counts them.",
        epilog="formats (source and box convention):\n" + formats,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="data files: JSON list, JSONL or parquet")
    p.add_argument("--format", required=True, choices=list(FORMATS), help="record format of the inputs (see below)")
    p.add_argument(
        "--image-root",
        required=True,
        help="folder the records' image paths are relative to; images "
        "embedded in parquet rows are written under it (existing files are never overwritten)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output canonical JSONL (OUT.jsonl); also writes OUT.rejects.jsonl and OUT.summary.json next to it",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first record that would be rejected "
        "(duplicates included, unless --keep-duplicates) with an error naming its file and line (or "
        "[index]); nothing is written",
    )

    workers_t, tol_t, max_px_t = integer(min=1, max=1024), number(min=0, max=validate.MAX_COORD), integer(min=0)
    add_number_flag(
        p,
        "--workers",
        workers_t,
        1,
        "threads reading image headers (and writing embedded images); output is identical for any value (default 1)",
    )
    p.add_argument(
        "--source",
        type=text_arg,
        default=None,
        help="source label written on every sample (default: the format name, "
        "or the record's own source for canonical records)",
    )
    p.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=None,
        help="platform written on every sample (default: what the format or record says, else none)",
    )
    p.add_argument(
        "--clip-tolerance",
        type=tol_t,
        default=CLIP_TOLERANCE_PX,
        metavar="PX",
        help="pixels a box edge "
        "may stick out of the image and still be clipped and kept (default %(default)s; ratio/0-1000 "
        f"formats also allow {CLIP_TOLERANCE_RATIO} of the image side); beyond: box_outside_image "
        f"({tol_t.range_text})",
    )
    p.add_argument(
        "--box-unit",
        choices=UNITS,
        default=None,
        help="read the format's box values in this unit "
        "instead of its documented one (for unconfirmed schemas such as aria-ui-web/aria-ui-mobile)",
    )
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="write exact duplicates (same image, instruction and box) instead of rejecting them as 'duplicate'",
    )
    p.add_argument(
        "--verify-images",
        choices=validate.VERIFY_MODES,
        default="decode",
        help="how each unique image is checked (once): decode (default; decodes every pixel, so truncated or "
        "corrupt images are rejected before training), header (reads the header only, faster), none (header only, "
        "for the size)",
    )
    p.add_argument(
        "--max-image-pixels",
        "--max-pixels",  # its name before issue 19; deprecated (it is not the model's smart_resize max_pixels)
        dest="max_image_pixels",
        action=_DecodeGuardFlag,
        type=max_px_t,
        default=validate.DECODE_PIXEL_LIMIT,
        metavar="N",
        help="decode guard: reject an image whose header declares more than N pixels (of the ORIGINAL image) as "
        "image_too_large, before decoding (default %(default)s; 0: no limit; an integer >= 0). Not the model's "
        "smart_resize max_pixels. --max-pixels is its deprecated old name",
    )
    family = p.add_mutually_exclusive_group()
    family.add_argument(
        "--family",
        choices=sorted(available_modules()),
        default=None,
        help="the model family the data is for: images it cannot take (aspect ratio over its processor's limit, a "
        "side under one vision patch) are rejected as image_unsupported before any training starts",
    )
    family.add_argument(
        "--model",
        default=None,
        metavar="PATH",
        help="a checkpoint (or model_type): its family's image limits, as --family",
    )
    p.set_defaults(func=_run)
