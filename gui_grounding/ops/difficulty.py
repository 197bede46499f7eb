"""``gui-grounding difficulty``: each training record's pass@k and mean reward under a model, written back as columns.

The records (canonical JSONL or GTA1 JSON, any format :func:`gui_grounding.data.schema.load_samples` reads) are
answered ``K`` times each by an eval engine (``hf``, ``vllm`` or ``openai``: the consensus mode of
:mod:`gui_grounding.eval.tts`, which samples ``K`` answers per screenshot, seeded per sample, and writes them as
``"samples"`` points in original pixels to a resumable predictions file, ``OUT.predictions.jsonl``). Each sampled
point is scored by the training ``click`` reward's hit rule (:func:`gui_grounding.training.rewards.score_click`: 1.0
when the point lies in any target box, edges inclusive, :func:`gui_grounding.models.frames.point_in_box`; 0.0 for no
point, a refusal or a miss), on the sample's boxes in original pixels.

Columns added to every record of the output (same format as the input: a JSON list stays a JSON list, JSONL stays
JSONL; every other key and the record order are kept; an earlier run's columns of these names are replaced):

* ``pass_at_k``: the unbiased pass@k estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on
  Code", arXiv 2107.03374, eq. 1), ``1 - C(n - c, k) / C(n, k)`` with ``n`` answers drawn, ``c`` of them correct
  (:func:`pass_at_k`); with ``n == k`` it is 1 when any answer is correct, else 0;
* ``mean_reward``: the mean ``click`` reward of the ``n`` answers (``c / n`` for this 0/1 reward);
* ``difficulty_k``, ``difficulty_n``, ``difficulty_hits``: ``k``, ``n``, ``c``;
* ``difficulty_reject``: null, or why the record has no value (then ``pass_at_k`` and ``mean_reward`` are null): a
  reason code of the reader (``gui_grounding.data.schema.REASONS``: ``missing_image``, ``bad_box``, ...),
  ``prediction_error`` (the engine failed for good; a rerun redoes it) or ``too_few_samples`` (fewer than ``k``
  answers came back).

Nothing is lost: a record the reader rejects stays in the output with its reason; a document that is not a JSON
object at all (bad syntax, ...) cannot be written back and is listed, with its ``file:line`` and reason, in
``OUT.rejects.jsonl`` (every reject is listed there). The output and the rejects file are written atomically
(:func:`groundwork.outputs.atomic_writer`) after every sample is answered; the predictions file is appended line by
line, so an interrupted run resumes where it stopped (samples already answered are not asked again).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from collections import Counter

from groundwork import argtypes
from groundwork.outputs import OutputLock, atomic_writer, check_outputs
from groundwork.records import RecordError, iter_records
from gui_grounding.data.schema import load_samples
from gui_grounding.eval.backends import REGISTRY as BACKEND_REGISTRY
from gui_grounding.eval.backends import checkpoint_adapter, predict
from gui_grounding.eval.budget import resolve_eval_budget
from gui_grounding.eval.predictions import parse_point
from gui_grounding.eval.tts import DEFAULT_TEMPERATURE, DEFAULT_TOP_P, TTSConfig
from gui_grounding.models.adapters import ADAPTERS, resolve_adapter
from gui_grounding.models.consensus import MAX_SAMPLES
from gui_grounding.models.frames import point_in_box

logger = logging.getLogger(__name__)

#: the columns this command writes (module docstring)
COLUMNS = ("pass_at_k", "mean_reward", "difficulty_k", "difficulty_n", "difficulty_hits", "difficulty_reject")
#: reasons of our own, beside the reader's (``gui_grounding.data.schema.REASONS``)
REASONS = {
    "prediction_error": "the engine failed on this sample for good (a rerun on the same output redoes it)",
    "too_few_samples": "fewer than k sampled answers came back for this sample",
}
DEFAULT_SAMPLES = 8  # K answers per record (GUI-C2's GUI-D draws 8 rollouts per sample: z1oong/GUI-C2 README.md)
DEFAULT_K = 1


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` answers of which ``c`` are correct: ``1 - C(n-c, k) / C(n, k)`` (Chen
    et al. 2021, arXiv 2107.03374, eq. 1), computed exactly as the product ``prod_{i=n-c+1..n} (1 - k / i)`` of that
    ratio (no huge binomials). ``n == k``: 1.0 when ``c > 0`` else 0.0; ``n - c < k``: 1.0.

    Raises:
        ValueError: not ``0 <= c <= n`` and ``1 <= k <= n`` (integers).
    """
    if not all(type(v) is int for v in (n, c, k)) or not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs integers 0 <= c <= n and 1 <= k <= n, got n={n!r} c={c!r} k={k!r}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def click_hits(sample, points: list) -> list[float]:
    """The ``click`` reward of each sampled point (original pixels; ``None`` or a value
    :func:`gui_grounding.eval.predictions.parse_point` refuses scores 0.0) against ``sample.boxes``."""
    out = []
    for value in points:
        ok, point = parse_point(value)
        hit = ok and point is not None and any(point_in_box(point, box) for box in sample.boxes)
        out.append(1.0 if hit else 0.0)
    return out


def difficulty_columns(sample, line: dict | None, k: int) -> dict:
    """The columns (module docstring) of one sample from its predictions line (``None``: no line)."""
    empty = {"pass_at_k": None, "mean_reward": None, "difficulty_k": k, "difficulty_n": 0, "difficulty_hits": 0}
    if line is None or line.get("error") is not None:
        return {**empty, "difficulty_reject": "prediction_error"}
    points = line.get("samples")
    rewards = click_hits(sample, points if isinstance(points, list) else [])
    n, c = len(rewards), int(sum(rewards))
    if n < k:
        return {**empty, "difficulty_n": n, "difficulty_hits": c, "difficulty_reject": "too_few_samples"}
    return {
        "pass_at_k": pass_at_k(n, c, k),
        "mean_reward": sum(rewards) / n,
        "difficulty_k": k,
        "difficulty_n": n,
        "difficulty_hits": c,
        "difficulty_reject": None,
    }


def _predictions(path: str) -> dict[str, dict]:
    """Last line per ``sample_id`` of a predictions file (absent: none)."""
    out: dict[str, dict] = {}
    if not os.path.exists(path):
        return out
    for _, _, rec in iter_records(path):
        if isinstance(rec, dict) and isinstance(rec.get("sample_id"), str):
            out[rec["sample_id"]] = rec
    return out


def _json_text(record: dict) -> str:
    """One record as JSON text, non-ASCII kept as is; a record holding a lone surrogate (a legal ``\\udXXX`` escape
    of the input, not encodable as UTF-8) keeps its escapes instead, so it is written back, never a failed write."""
    text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record, ensure_ascii=True, allow_nan=False)
    return text


def _is_json_list(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def annotate(data: str, samples: list, report, predictions_path: str, out: str, k: int) -> dict:
    """Write ``out`` (the records of ``data`` with the difficulty columns) and ``out.rejects.jsonl``, atomically.

    ``samples`` / ``report``: what :func:`gui_grounding.data.schema.load_samples` read from ``data`` (one sample or
    one reject per record, in record order). Returns counts: ``{"records", "scored", "rejects": {reason: n}}``.

    Raises:
        OutputError: a write fails.
    """
    preds = _predictions(predictions_path)
    rejected = {ref: (reason, message) for ref, reason, message in report.rejects}
    queue = iter(samples)
    records, rejects, counts = [], [], Counter()
    total = 0
    for ref, _, item in iter_records(data):
        total += 1
        if isinstance(item, RecordError):
            rejects.append({"ref": ref, "reason": item.reason, "message": item.message})
            counts[item.reason] += 1
            continue
        base = {key: value for key, value in item.items() if key not in COLUMNS}
        if ref in rejected:
            reason, message = rejected[ref]
            cols = {"pass_at_k": None, "mean_reward": None, "difficulty_k": k, "difficulty_n": 0}
            cols.update(difficulty_hits=0, difficulty_reject=reason)
            rejects.append({"ref": ref, "reason": reason, "message": message})
        else:
            sample = next(queue)
            cols = difficulty_columns(sample, preds.get(sample.sample_id), k)
            if cols["difficulty_reject"] is not None:
                rejects.append({"ref": ref, "sample_id": sample.sample_id, "reason": cols["difficulty_reject"]})
        if cols["difficulty_reject"] is not None:
            counts[cols["difficulty_reject"]] += 1
        records.append({**base, **cols})
    with atomic_writer(out) as f:
        if _is_json_list(data):
            f.write("[\n" + ",\n".join(map(_json_text, records)) + "\n]\n")
        else:
            f.writelines(_json_text(rec) + "\n" for rec in records)
    with atomic_writer(out + ".rejects.jsonl") as f:
        f.writelines(_json_text(rec) + "\n" for rec in rejects)
    scored = sum(1 for r in records if r["difficulty_reject"] is None)
    return {"records": total, "scored": scored, "rejects": dict(counts)}


def run_difficulty(
    data: str,
    out: str,
    *,
    model: str,
    backend: str = "hf",
    adapter: str | None = None,
    image_folder: str | None = None,
    samples: int = DEFAULT_SAMPLES,
    k: int = DEFAULT_K,
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    seed: int = 0,
    **backend_kwargs,
) -> dict:
    """Answer every record of ``data`` ``samples`` times with ``model`` on ``backend`` and write ``out`` (module
    docstring). ``backend_kwargs`` go to the backend (``max_new_tokens``, ``batch_size``, ``base_url``, ...).

    Raises:
        ValueError: ``k`` not in ``[1, samples]``, an unknown backend, openai without ``adapter``.
        OutputError: ``out`` is an input, unwritable, or locked by another run.
    """
    if not 1 <= k <= samples:
        raise ValueError(f"--k must be in [1, --samples={samples}], got {k}")
    if backend == "openai" and adapter is None:
        raise ValueError("--backend openai needs --adapter (the served model's prompt/coordinate convention)")
    predictions_path = out + ".predictions.jsonl"
    check_outputs(files=[out, predictions_path, out + ".rejects.jsonl"], inputs=[data])
    tts = TTSConfig(mode="consensus", samples=samples, temperature=temperature, top_p=top_p, seed=seed)
    with OutputLock(out):
        loaded, report = load_samples([data], [image_folder] if image_folder else None)
        run_adapter = resolve_adapter(adapter) if adapter is not None else checkpoint_adapter(model)
        local = model if backend != "openai" else None
        budget_flags = {key: backend_kwargs.pop(key, None) for key in ("min_pixels", "max_pixels", "max_tiles")}
        budget, _ = resolve_eval_budget(run_adapter, model=local, flags=budget_flags, profile=None, limits=None)
        if loaded:
            predict(
                backend, model, loaded, predictions_path, adapter=run_adapter, budget=budget, tts=tts, **backend_kwargs
            )
        summary = annotate(data, loaded, report, predictions_path, out, k)
    logger.info("difficulty: %s", summary)
    print(f"wrote {out}: {summary['scored']} records scored, rejects {summary['rejects'] or 'none'}")
    return summary


def register_cli(sub) -> None:
    """Add the ``difficulty`` subcommand to the ``gui-grounding`` subparsers ``sub``."""
    p = sub.add_parser(
        "difficulty",
        help="write each training record's pass@k and mean click reward under a model (K samples each)",
        description=__doc__.split("\n\n")[0] + " Columns: " + ", ".join(COLUMNS) + " (docs/TRAINING.md, "
        "'Difficulty-aware data').",
    )
    p.add_argument("data", help="training data file (canonical JSONL, GTA1 JSON, VLM-R1 JSONL)")
    p.add_argument("--out", required=True, help="output data file (same format, with the difficulty columns)")
    p.add_argument("--model", required=True, help="checkpoint (hf, vllm) or served model name (openai)")
    p.add_argument("--backend", default="hf", choices=sorted(BACKEND_REGISTRY.names()), help="eval engine")
    p.add_argument("--adapter", default=None, choices=sorted(ADAPTERS), help="default: the checkpoint's")
    p.add_argument("--image-folder", default=None, help="image paths are relative to it (default: the file's)")
    count = argtypes.integer(min=1, max=MAX_SAMPLES)
    argtypes.add_number_flag(p, "--samples", count, DEFAULT_SAMPLES, "K answers drawn per record")
    argtypes.add_number_flag(p, "--k", count, DEFAULT_K, "k of pass@k (<= --samples)")
    temp = argtypes.number(min=0, max=100, min_open=True)
    argtypes.add_number_flag(p, "--temperature", temp, DEFAULT_TEMPERATURE, "sampling temperature")
    top_p = argtypes.number(min=0, max=1, min_open=True)
    argtypes.add_number_flag(p, "--top-p", top_p, DEFAULT_TOP_P, "nucleus sampling mass")
    seed = argtypes.integer(min=0, max=2**31 - 1)
    argtypes.add_number_flag(p, "--seed", seed, 0, "sampling seed (per sample from it and the sample_id)")
    tokens = argtypes.integer(min=1, max=1_000_000)
    argtypes.add_number_flag(p, "--max-new-tokens", tokens, None, "generated tokens per answer (default: backend's)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> None:
    extra = {"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}
    run_difficulty(
        args.data,
        args.out,
        model=args.model,
        backend=args.backend,
        adapter=args.adapter,
        image_folder=args.image_folder,
        samples=args.samples,
        k=args.k,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        **extra,
    )
