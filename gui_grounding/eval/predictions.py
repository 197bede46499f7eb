"""Reading prediction files, and judging them against a benchmark's samples.

Input formats, detected from the content (a UTF-8 byte-order mark is ignored):

* **our JSONL** (what ``--model`` writes): one line per sample ``{"sample_id": str, "point": [x, y] | null,
  "raw_response": str, ...}`` with ``point`` in **original-image pixels**; ``null`` = no valid answer (the
  abstention on refusal items). Other keys (prompt, resized point, ...) are kept.
* **a JSON list** of those same objects (refs ``file:[index]``). A list that does not parse as a whole (one bad
  element: a 5000-digit number, deep nesting, bytes that are not UTF-8) is read element by element
  (:func:`vlm_r1.data.iter_json_list`: a bad element is one malformed record, the others are read); a list of which
  no element is an object is refused with a one-line :class:`EvalInputError`.
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

Nothing is dropped silently, and no line makes eval crash:

* a **malformed** record (not JSON, not UTF-8, nested too deeply, a number over the parser's digit limit, not an
  object, no ``sample_id``, no ``point`` key, a point that is not null or 2 finite numbers within +-1e7: NaN, inf,
  ``"12"``, a 400-digit integer) is counted in ``malformed`` with its ``file:line``. When its sample can be told (the
  parsed ``sample_id``, or for a line that does not parse, a ``"sample_id": ...`` found in its text) that sample is
  scored as the harness scores an unparseable answer, ``wrong_format``, also on refusal items (an unreadable answer is
  not an abstention). Strict mode raises :class:`EvalInputError` at the first one instead;
* a ``sample_id`` that matches no sample is counted in ``unknown_ids``;
* several records for one sample (``duplicates``) refuse the file with an :class:`EvalInputError` naming them, unless
  ``on_duplicate`` is ``"first"`` or ``"last"`` (that record counts; the others are counted in ``duplicates``).
  ScreenSpot-Pro harness logs are exempt (the harness repeats keys legitimately): their duplicates are counted, and
  the later detail wins unless ``on_duplicate="first"``;
* a sample without a prediction is counted in ``missing`` and judged ``wrong_format``.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gui_grounding.eval import ON_DUPLICATE, EvalInputError
from gui_grounding.eval.benchmarks import is_number, short_repr
from gui_grounding.eval.judge import WRONG_FORMAT, judge
from gui_grounding.schema import Sample
from vlm_r1.data import RecordError, iter_json_list

logger = logging.getLogger(__name__)

JSONL, JSON_LIST, HARNESS_LOG = "jsonl", "json_list", "screenspot_pro_log"

# "sample_id": "..." or "sample_id": 123 in the text of a line that does not parse (linear: the string alternatives
# are disjoint and the lengths bounded)
_SAMPLE_ID_IN_TEXT = re.compile(r'"sample_id"\s{0,64}:\s{0,64}(?:"((?:[^"\\\n]|\\.){1,512})"|(-?\d{1,64})\b)')


@dataclass
class PredictionReport:
    """What :func:`load_predictions` read, and what it could not use. Every list names the record (``ref``)."""

    path: str
    format: str = JSONL
    num_records: int = 0
    num_predictions: int = 0
    on_duplicate: str = "error"
    malformed: list[tuple[str, str]] = field(default_factory=list)  # (ref, message)
    malformed_samples: list[str] = field(default_factory=list)  # samples scored wrong_format for a malformed record
    unknown_ids: list[tuple[str, str]] = field(default_factory=list)  # (ref, sample_id or harness key)
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (ref, sample_id) of each repeat
    not_mapped: list[tuple[str, str]] = field(default_factory=list)  # harness details outside positive/en/instruction
    missing: list[str] = field(default_factory=list)  # sample_ids without a prediction (set by results_from_...)
    harness_disagreements: list[tuple[str, str, str]] = field(default_factory=list)  # (sample_id, harness, ours)

    def counts(self) -> dict[str, int]:
        """Counts of records read, predictions kept and each kind of problem."""
        return {"records": self.num_records, "predictions": self.num_predictions, "malformed": len(self.malformed),
                "malformed_samples": len(self.malformed_samples), "unknown_ids": len(self.unknown_ids),
                "duplicates": len(self.duplicates), "not_mapped": len(self.not_mapped), "missing": len(self.missing),
                "harness_disagreements": len(self.harness_disagreements)}  # fmt: skip

    def to_dict(self, max_examples: int = 20) -> dict:
        """JSON-ready counts plus the first ``max_examples`` of each problem with its ref."""
        return {"path": self.path, "format": self.format, "on_duplicate": self.on_duplicate, **self.counts(),
                "examples": {"malformed": [list(x) for x in self.malformed[:max_examples]],
                             "malformed_samples": self.malformed_samples[:max_examples],
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
    """``(ok, point)``: ``None`` -> ``(True, None)``; 2 finite numbers within +-1e7 -> ``(True, [x, y])`` floats;
    anything else (NaN, inf, booleans, strings, huge integers) -> not ok. Never raises."""
    if value is None:
        return True, None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value):
        return True, [float(value[0]), float(value[1])]
    return False, None


def _parse_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, why not)``; never raises on content (same rules as ``vlm_r1.data``'s reader)."""
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as err:  # JSONDecodeError, and ints of more than sys.get_int_max_str_digits() digits
        return None, f"invalid JSON: {str(err)[:200]}"


def _decode(data: bytes) -> tuple[str, str | None]:
    """``(text, None)`` for UTF-8 bytes, else ``(text with replacement characters, "not valid UTF-8")``."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), "not valid UTF-8"


def _lines(path: str, raw: bytes) -> Iterator[tuple[str, Any, str | None, str]]:
    """``(ref, value, error, text)`` per non-blank line (ref ``file:line``, 1-based; ``value`` None and ``error`` the
    reason when it does not parse; ``text`` for recovering its sample_id)."""
    for lineno, data in enumerate(raw.split(b"\n"), start=1):
        text, err = _decode(data)
        text = text.strip()
        if not text:
            continue
        value, perr = (None, err) if err else _parse_json(text)
        yield f"{path}:{lineno}", value, perr, text


def _items(path: str, raw: bytes) -> tuple[str, Any]:
    """``(format, items or harness log)`` of a predictions file's bytes (module docstring: formats).

    Raises:
        EvalInputError: a JSON object that is neither a harness log nor one prediction; a JSON list that cannot be
            read.
    """
    head = raw.lstrip()[:1]
    if head not in (b"{", b"["):
        return JSONL, _lines(path, raw)
    text, err = _decode(raw)
    whole, perr = (None, err) if err else _parse_json(text)
    if perr is None:
        if isinstance(whole, dict) and "details" in whole:
            return HARNESS_LOG, whole
        if isinstance(whole, list):
            return JSON_LIST, ((f"{path}:[{i}]", item, None, "") for i, item in enumerate(whole))
        if isinstance(whole, dict) and "sample_id" not in whole:
            raise EvalInputError(f"{path}: neither a predictions JSONL (one {{sample_id, point, ...}} per line), a JSON "
                                 "list of such objects, nor a ScreenSpot-Pro harness log (an object with 'details'); "
                                 f"its keys: {short_repr(sorted(whole), 200)}")  # fmt: skip
        return JSONL, _lines(path, raw)
    if head == b"{":
        return JSONL, _lines(path, raw)  # several lines of JSONL (or a broken object: every line counts as malformed)
    # a JSON list that does not parse as a whole: element by element (vlm_r1.data's recovering reader); refused when
    # not one element is an object
    items = [(ref, None, item.message, "") if isinstance(item, RecordError) else (ref, item, None, "")
             for ref, _, item in iter_json_list(path)]  # fmt: skip
    if any(value is not None for _, value, _, _ in items):
        return JSON_LIST, items
    raise EvalInputError(f"{path}: a JSON list that cannot be read ({perr}) and of which no element is a prediction "
                         "object; write JSONL (one {sample_id, point} object per line)")  # fmt: skip


def load_predictions(
    path: str, samples: list[Sample], *, strict: bool = False, on_duplicate: str = "error"
) -> tuple[dict[str, dict], PredictionReport]:
    """Predictions of ``path`` keyed by sample_id, with points in original pixels (module docstring: formats, rules).

    Args:
        path: our predictions JSONL, a JSON list of the same objects, or an official ScreenSpot-Pro harness log
            (detected from the content).
        samples: the benchmark's samples (known sample_ids; harness details are mapped onto them).
        strict: raise on the first malformed record or unknown sample_id instead of counting it.
        on_duplicate: several records for one sample: ``"error"`` (refuse), ``"first"`` or ``"last"``.

    Returns:
        ``(predictions, report)``; each prediction is the record with ``point`` normalised to ``[x, y]`` floats or
        ``None``, plus ``ref`` (``file:line``), ``malformed`` (the message, for a malformed record scored
        ``wrong_format``) and, for harness logs, ``harness_correctness``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        EvalInputError: duplicate predictions with ``on_duplicate="error"`` (not for harness logs); a file that is
            none of the formats (one line, naming the file).
        EvalInputError: also in strict mode, the first malformed record or unknown id (naming it).
        ValueError: an unknown ``on_duplicate``.
    """
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"predictions file not found: {path}")
    with open(path, "rb") as f:
        raw = f.read()
    raw = raw.removeprefix(codecs.BOM_UTF8)
    fmt, content = _items(path, raw)
    if fmt == HARNESS_LOG:
        return _load_harness_log(path, content, samples, strict, on_duplicate)
    return _load_records(path, fmt, content, samples, strict, on_duplicate)


class _Collector:
    """Shared bookkeeping of both readers."""

    def __init__(self, path: str, fmt: str, samples: list[Sample], strict: bool, on_duplicate: str):
        self.report = PredictionReport(path, fmt, on_duplicate=on_duplicate)
        self.known = {s.sample_id for s in samples}
        self.strict = strict
        self.on_duplicate = on_duplicate
        self.predictions: dict[str, dict] = {}
        self.first_ref: dict[str, str] = {}

    def malformed(self, ref: str, message: str, sample_id: str | None = None) -> None:
        """Count a malformed record; when its sample is known, that sample is scored ``wrong_format``."""
        if self.strict:
            raise EvalInputError(f"{ref}: malformed prediction: {message}")
        self.report.malformed.append((ref, message))
        if sample_id is not None and sample_id in self.known:
            self.add(ref, sample_id, {"raw_response": None}, None, malformed=message)

    def unknown(self, ref: str, what: str) -> None:
        if self.strict:
            raise EvalInputError(f"{ref}: prediction for unknown sample {what} (wrong predictions file for this "
                                 "data?)")  # fmt: skip
        self.report.unknown_ids.append((ref, what))

    def add(self, ref: str, sample_id: str, record: dict, point: list[float] | None, malformed: str | None = None):
        if sample_id not in self.known:
            self.unknown(ref, sample_id)
            return
        if sample_id in self.predictions:
            self.report.duplicates.append((ref, sample_id))
            if self.on_duplicate == "first":
                return
        else:
            self.first_ref[sample_id] = ref
        pred = {**record, "sample_id": sample_id, "point": point, "ref": ref}
        if malformed is not None:
            pred["malformed"] = malformed
        self.predictions[sample_id] = pred

    def finish(self, exempt_duplicates: bool = False) -> tuple[dict[str, dict], PredictionReport]:
        dups = self.report.duplicates
        if dups and self.on_duplicate == "error" and not exempt_duplicates:
            shown = "; ".join(f"sample {sid!r} at {self.first_ref[sid]} and {ref}" for ref, sid in dups[:3])
            more = f" (and {len(dups) - 3} more)" if len(dups) > 3 else ""
            raise EvalInputError(f"{self.report.path}: {len(dups)} duplicate prediction(s): {shown}{more}. Which one "
                                 "counts would depend on line order; remove them, or pass --on-duplicate first|last "
                                 "(run_eval(on_duplicate=...))")  # fmt: skip
        self.report.num_predictions = len(self.predictions)
        self.report.malformed_samples = [sid for sid, p in self.predictions.items() if "malformed" in p]
        problems = {k: v for k, v in self.report.counts().items() if k in ("malformed", "unknown_ids", "duplicates",
                                                                           "not_mapped") and v}  # fmt: skip
        if problems:
            logger.warning("%s: %s\n%s", self.report.path, problems, self.report.table())
        return self.predictions, self.report


def _recover_id(text: str) -> str | None:
    """The ``sample_id`` written in the text of a record that does not parse, if one can be read."""
    m = _SAMPLE_ID_IN_TEXT.search(text)
    if m is None:
        return None
    if m.group(2) is not None:
        return m.group(2)
    value, err = _parse_json(f'"{m.group(1)}"')
    return value if err is None and isinstance(value, str) else None


def _load_records(
    path: str, fmt: str, items, samples: list[Sample], strict: bool, on_duplicate: str
) -> tuple[dict[str, dict], PredictionReport]:
    c = _Collector(path, fmt, samples, strict, on_duplicate)
    for ref, rec, error, text in items:
        c.report.num_records += 1
        if error is not None:
            c.malformed(ref, error, _recover_id(text))
            continue
        if not isinstance(rec, dict):
            c.malformed(ref, f"not a JSON object: {type(rec).__name__}")
            continue
        sid = rec.get("sample_id")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool) or sid == "":
            c.malformed(ref, f"no usable sample_id (got {short_repr(sid)})")
            continue
        sid = str(sid)
        if "point" not in rec:
            c.malformed(ref, f"sample {sid}: no 'point' key (use null for no answer)", sid)
            continue
        ok, point = parse_point(rec["point"])
        if not ok:
            c.malformed(ref, f"sample {sid}: point must be null or [x, y] finite numbers (|v| <= 1e7), got "
                             f"{short_repr(rec['point'])}", sid)  # fmt: skip
            continue
        c.add(ref, sid, rec, point)
    return c.finish()


def _harness_key(task: Any, image: Any, prompt: Any) -> tuple[str, str, str]:
    return str(task), os.path.basename(str(image)), str(prompt)


def _load_harness_log(
    path: str, log: dict, samples: list[Sample], strict: bool, on_duplicate: str
) -> tuple[dict[str, dict], PredictionReport]:
    c = _Collector(path, HARNESS_LOG, samples, strict, "last" if on_duplicate == "error" else on_duplicate)
    details = log["details"]
    if not isinstance(details, list):
        raise EvalInputError(f"{path}: 'details' must be a list, got {type(details).__name__}")
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
        # the sample first (so a malformed pred still takes its place in the key order), then the point
        if d.get("id") is not None:
            sid = str(d["id"])
        else:
            missing_keys = [k for k in ("task_filename", "img_path", "prompt_to_evaluate") if k not in d]
            if missing_keys:
                c.malformed(ref, f"detail has no id and lacks {missing_keys} to match it to a sample")
                continue
            key = _harness_key(d["task_filename"], d["img_path"], d["prompt_to_evaluate"])
            queue = by_key.get(key)
            if not queue:
                c.unknown(ref, f"(task_filename={key[0]!r}, image={key[1]!r}, prompt={short_repr(key[2])})")
                continue
            sid = queue.pop(0)
        if "pred" not in d:
            c.malformed(ref, "no 'pred' key", sid)
            continue
        ok, point = parse_point(d["pred"])
        if not ok:
            c.malformed(ref, f"pred must be null or [x, y] finite pixel numbers, got {short_repr(d['pred'])}", sid)
            continue
        record = {"raw_response": d.get("raw_response"), "harness_correctness": d.get("correctness"),
                  "prompt": d.get("prompt_to_evaluate")}  # fmt: skip
        c.add(ref, sid, record, point)
    return c.finish(exempt_duplicates=True)


def results_from_predictions(
    samples: list[Sample], predictions: dict[str, dict], report: PredictionReport | None = None
) -> dict[str, dict]:
    """Judge every sample: ``{sample_id: {"correctness", "point", "missing"}}`` (``point`` in original pixels).

    A sample without a prediction is ``wrong_format`` with ``missing: True`` -- also on refusal items, where only an
    explicit null counts as abstaining; a sample whose record was malformed is ``wrong_format`` with ``malformed``
    (the message), on refusal items too. With ``report``, fills ``report.missing`` and, for harness logs,
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
        if pred.get("malformed") is not None:
            results[s.sample_id] = {"correctness": WRONG_FORMAT, "point": None, "missing": False,
                                    "malformed": pred["malformed"]}  # fmt: skip
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
