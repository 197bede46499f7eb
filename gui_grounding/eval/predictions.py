"""Reading prediction files, and judging them against a benchmark's samples.

Two input formats, detected from the content:

* **our JSONL** (what ``--model`` writes): one line per sample ``{"sample_id": str, "point": [x, y] | null,
  "raw_response": str, ...}`` with ``point`` in **original-image pixels**; ``null`` = no valid answer (the
  abstention on refusal items). Other keys (prompt, resized point, ...) are kept.
* **the official ScreenSpot-Pro harness log** (``eval_screenspot_pro.py`` / ``_parallel.py`` ``--log_path``): one JSON
  object ``{"metrics": ..., "details": [...]}``; each detail has ``img_path``, ``group``, ``platform``,
  ``application``, ``lang``, ``instruction_style``, ``prompt_to_evaluate``, ``gt_type``, ``ui_type``,
  ``task_filename``, ``pred`` (a **pixel** point of the original image, or null), ``raw_response``, ``bbox``,
  ``correctness``, and ``id`` in the serial script only (``gta1_and_peers.md`` section 2.2).

Mapping harness details to sample_ids: by ``id`` when the detail has one; otherwise by the key
``(task_filename, file name of img_path, prompt_to_evaluate)`` matched against each sample's
``(task_filename, file name of img_filename, instruction)``; when several samples share a key, the details with that
key are assigned to them in annotation order (the order the harness evaluates them). Only details with
``gt_type == "positive"``, ``instruction_style == "instruction"`` and language ``en`` (key ``lang``, or ``language``)
map to our samples; the others are counted in ``not_mapped`` with the reason. The harness's own ``correctness`` is
kept per prediction and compared with ours by :func:`results_from_predictions` (``harness_disagreements``).

Nothing is dropped silently: a line that is not JSON, has no ``sample_id``, lacks ``point``, or has a point that is
neither null nor 2 finite numbers is counted in ``malformed`` with its ``file:line`` (or raises ``ValueError`` in
strict mode); a ``sample_id`` that matches no sample is counted in ``unknown_ids``; a repeated ``sample_id`` is counted
in ``duplicates`` (the later line wins); a sample without a prediction is counted in ``missing`` and judged
``wrong_format``.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from gui_grounding.eval.benchmarks import is_number
from gui_grounding.eval.judge import WRONG_FORMAT, judge
from gui_grounding.schema import Sample

logger = logging.getLogger(__name__)

JSONL, HARNESS_LOG = "jsonl", "screenspot_pro_log"


@dataclass
class PredictionReport:
    """What :func:`load_predictions` read, and what it could not use. Every list names the record (``ref``)."""

    path: str
    format: str = JSONL
    num_records: int = 0
    num_predictions: int = 0
    malformed: list[tuple[str, str]] = field(default_factory=list)  # (ref, message)
    unknown_ids: list[tuple[str, str]] = field(default_factory=list)  # (ref, sample_id or harness key)
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (ref, sample_id); the later record wins
    not_mapped: list[tuple[str, str]] = field(default_factory=list)  # harness details outside positive/en/instruction
    missing: list[str] = field(default_factory=list)  # sample_ids without a prediction (set by results_from_...)
    harness_disagreements: list[tuple[str, str, str]] = field(default_factory=list)  # (sample_id, harness, ours)

    def counts(self) -> dict[str, int]:
        """Counts of records read, predictions kept and each kind of problem."""
        return {"records": self.num_records, "predictions": self.num_predictions, "malformed": len(self.malformed),
                "unknown_ids": len(self.unknown_ids), "duplicates": len(self.duplicates),
                "not_mapped": len(self.not_mapped), "missing": len(self.missing),
                "harness_disagreements": len(self.harness_disagreements)}  # fmt: skip

    def to_dict(self, max_examples: int = 20) -> dict:
        """JSON-ready counts plus the first ``max_examples`` of each problem with its ref."""
        return {"path": self.path, "format": self.format, **self.counts(),
                "examples": {"malformed": [list(x) for x in self.malformed[:max_examples]],
                             "unknown_ids": [list(x) for x in self.unknown_ids[:max_examples]],
                             "duplicates": [list(x) for x in self.duplicates[:max_examples]],
                             "not_mapped": [list(x) for x in self.not_mapped[:max_examples]],
                             "missing": self.missing[:max_examples],
                             "harness_disagreements": [list(x) for x in self.harness_disagreements[:max_examples]]}}  # fmt: skip

    def table(self) -> str:
        """Readable summary: one line of counts, then the first example of each problem."""
        c = self.counts()
        lines = [f"predictions {self.path} ({self.format}): " + ", ".join(f"{k} {v}" for k, v in c.items())]
        for name in ("malformed", "unknown_ids", "duplicates", "not_mapped", "harness_disagreements"):
            items = getattr(self, name)
            if items:
                lines.append(f"  {name:<22} {len(items):>6}   e.g. {' '.join(map(str, items[0]))}")
        if self.missing:
            lines.append(f"  {'missing':<22} {len(self.missing):>6}   e.g. {self.missing[0]}")
        return "\n".join(lines)


def parse_point(value: Any) -> tuple[bool, list[float] | None]:
    """``(ok, point)``: ``None`` -> ``(True, None)``; 2 finite numbers -> ``(True, [x, y])`` floats; else not ok."""
    if value is None:
        return True, None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value):
        return True, [float(value[0]), float(value[1])]
    return False, None


def load_predictions(
    path: str, samples: list[Sample], *, strict: bool = False
) -> tuple[dict[str, dict], PredictionReport]:
    """Predictions of ``path`` keyed by sample_id, with points in original pixels (module docstring: formats, rules).

    Args:
        path: our predictions JSONL or an official ScreenSpot-Pro harness log (detected from the content).
        samples: the benchmark's samples (known sample_ids; harness details are mapped onto them).
        strict: raise on the first malformed record or unknown sample_id instead of counting it.

    Returns:
        ``(predictions, report)``; each prediction is the record with ``point`` normalised to ``[x, y]`` floats or
        ``None``, plus ``ref`` (``file:line``) and, for harness logs, ``harness_correctness``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: in strict mode, the first malformed record or unknown id (naming it); in any mode, a JSON file
            that is neither of the two formats.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"predictions file not found: {path}")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    whole = None
    if text.lstrip().startswith(("{", "[")):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # JSONL with several lines
    if isinstance(whole, dict) and "details" in whole:
        return _load_harness_log(path, whole, samples, strict)
    if isinstance(whole, list) or (isinstance(whole, dict) and "sample_id" not in whole):
        raise ValueError(f"{path}: neither a predictions JSONL (one {{sample_id, point, ...}} per line) nor a "
                         "ScreenSpot-Pro harness log (an object with 'details')")  # fmt: skip
    return _load_jsonl(path, text, samples, strict)


class _Collector:
    """Shared bookkeeping of both readers."""

    def __init__(self, path: str, fmt: str, samples: list[Sample], strict: bool):
        self.report = PredictionReport(path, fmt)
        self.known = {s.sample_id for s in samples}
        self.strict = strict
        self.predictions: dict[str, dict] = {}
        self.first_ref: dict[str, str] = {}

    def malformed(self, ref: str, message: str) -> None:
        if self.strict:
            raise ValueError(f"{ref}: malformed prediction: {message}")
        self.report.malformed.append((ref, message))

    def unknown(self, ref: str, what: str) -> None:
        if self.strict:
            raise ValueError(f"{ref}: prediction for unknown sample {what} (wrong predictions file for this data?)")
        self.report.unknown_ids.append((ref, what))

    def add(self, ref: str, sample_id: str, record: dict, point: list[float] | None) -> None:
        if sample_id not in self.known:
            self.unknown(ref, sample_id)
            return
        if sample_id in self.predictions:
            self.report.duplicates.append((ref, sample_id))
        self.predictions[sample_id] = {**record, "sample_id": sample_id, "point": point, "ref": ref}

    def finish(self) -> tuple[dict[str, dict], PredictionReport]:
        self.report.num_predictions = len(self.predictions)
        problems = {k: v for k, v in self.report.counts().items() if k in ("malformed", "unknown_ids", "duplicates",
                                                                           "not_mapped") and v}  # fmt: skip
        if problems:
            logger.warning("%s: %s\n%s", self.report.path, problems, self.report.table())
        return self.predictions, self.report


def _load_jsonl(path: str, text: str, samples: list[Sample], strict: bool) -> tuple[dict[str, dict], PredictionReport]:
    c = _Collector(path, JSONL, samples, strict)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        c.report.num_records += 1
        ref = f"{path}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            c.malformed(ref, f"not JSON ({err.msg})")
            continue
        if not isinstance(rec, dict):
            c.malformed(ref, f"not a JSON object: {type(rec).__name__}")
            continue
        sid = rec.get("sample_id")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool) or sid == "":
            c.malformed(ref, f"no usable sample_id (got {sid!r})")
            continue
        if "point" not in rec:
            c.malformed(ref, f"sample {sid}: no 'point' key (use null for no answer)")
            continue
        ok, point = parse_point(rec["point"])
        if not ok:
            c.malformed(ref, f"sample {sid}: point must be null or [x, y] finite numbers, got {rec['point']!r}")
            continue
        c.add(ref, str(sid), rec, point)
    return c.finish()


def _harness_key(task: Any, image: Any, prompt: Any) -> tuple[str, str, str]:
    return str(task), os.path.basename(str(image)), str(prompt)


def _load_harness_log(
    path: str, log: dict, samples: list[Sample], strict: bool
) -> tuple[dict[str, dict], PredictionReport]:
    c = _Collector(path, HARNESS_LOG, samples, strict)
    details = log["details"]
    if not isinstance(details, list):
        raise ValueError(f"{path}: 'details' must be a list, got {type(details).__name__}")
    by_key: dict[tuple[str, str, str], list[str]] = {}
    for s in samples:
        key = _harness_key(s.extra.get("task_filename"), s.extra.get("img_filename", s.image_path), s.instruction)
        by_key.setdefault(key, []).append(s.sample_id)
    for i, d in enumerate(details):
        c.report.num_records += 1
        ref = f"{path}:details[{i}]"
        if not isinstance(d, dict):
            c.malformed(ref, f"detail is not a JSON object: {type(d).__name__}")
            continue
        lang = d.get("lang", d.get("language"))
        setting = (d.get("gt_type"), d.get("instruction_style"), lang)
        if setting != ("positive", "instruction", "en"):
            c.report.not_mapped.append((ref, f"gt_type={setting[0]} instruction_style={setting[1]} lang={setting[2]} "
                                             "(only positive / instruction / en map to benchmark samples)"))  # fmt: skip
            continue
        if "pred" not in d:
            c.malformed(ref, "no 'pred' key")
            continue
        ok, point = parse_point(d["pred"])
        if not ok:
            c.malformed(ref, f"pred must be null or [x, y] finite pixel numbers, got {d['pred']!r}")
            continue
        record = {"raw_response": d.get("raw_response"), "harness_correctness": d.get("correctness"),
                  "prompt": d.get("prompt_to_evaluate")}  # fmt: skip
        if d.get("id") is not None:
            c.add(ref, str(d["id"]), record, point)
            continue
        missing_keys = [k for k in ("task_filename", "img_path", "prompt_to_evaluate") if k not in d]
        if missing_keys:
            c.malformed(ref, f"detail has no id and lacks {missing_keys} to match it to a sample")
            continue
        key = _harness_key(d["task_filename"], d["img_path"], d["prompt_to_evaluate"])
        queue = by_key.get(key)
        if not queue:
            c.unknown(ref, f"(task_filename={key[0]!r}, image={key[1]!r}, prompt={key[2]!r})")
            continue
        c.add(ref, queue.pop(0), record, point)
    return c.finish()


def results_from_predictions(
    samples: list[Sample], predictions: dict[str, dict], report: PredictionReport | None = None
) -> dict[str, dict]:
    """Judge every sample: ``{sample_id: {"correctness", "point", "missing"}}`` (``point`` in original pixels).

    A sample without a prediction is ``wrong_format`` with ``missing: True`` -- also on refusal items, where only an
    explicit null counts as abstaining. With ``report``, fills ``report.missing`` and, for harness logs,
    ``report.harness_disagreements`` (samples where the log's ``correctness`` differs from ours).
    """
    results = {}
    if report is not None:
        report.missing, report.harness_disagreements = [], []
    for s in samples:
        pred = predictions.get(s.sample_id)
        if pred is None:
            results[s.sample_id] = {"correctness": WRONG_FORMAT, "point": None, "missing": True}
            if report is not None:
                report.missing.append(s.sample_id)
            continue
        correctness = judge(s, pred["point"])
        results[s.sample_id] = {"correctness": correctness, "point": pred["point"], "missing": False}
        harness = pred.get("harness_correctness")
        if report is not None and harness is not None and harness != correctness:
            report.harness_disagreements.append((s.sample_id, str(harness), correctness))
    if report is not None and report.missing:
        logger.warning("%d samples have no prediction (counted wrong_format), e.g. %s", len(report.missing),
                       report.missing[:3])  # fmt: skip
    return results
