"""Reading prediction files, and judging them against a benchmark's samples.

Every predictions file is read by the one record reader, :func:`groundwork.records.iter_records`: any framing (one object per
line, a JSON list, a list followed by JSONL lines, concatenated objects), LF / CRLF / CR-only line endings (a raw CR
inside a line never splits a record), a UTF-8 byte-order mark ignored. What is not JSON text (gzip, bzip2, a zip
archive, parquet, UTF-16/32) is refused with one line naming what the file is.

Formats (``format=`` / ``--predictions-format``):

* ``auto`` (default): **a ScreenSpot-Pro harness log** when, and only when, the file holds exactly one JSON document
  with the harness's full published shape (:func:`harness_shape_problem`: top-level keys exactly ``metrics`` (an
  object) and ``details`` (a list), every detail an object with every key the harness writes); **our predictions**
  otherwise. An extra key on a prediction (``details``, ``metrics``, ...) never changes how a file is read;
* ``jsonl`` / ``json-list``: our predictions (the two names are synonyms: the reader takes any framing);
* ``harness-log``: the file is a harness log (one object with a ``details`` list); a detail that lacks keys is one
  malformed record rather than a reason to read the file another way.

**Our predictions** (what ``--model`` writes): records ``{"sample_id": str | int, "point": [x, y] | null,
"raw_response": str, "refusal": bool, "outside_frame": bool, ...}`` with ``point`` in **original-image pixels**; ``null`` = no answer could
be read (``wrong_format``, on OSWorld-G refusal items too: the official scorer never credits an unparsable answer as
a refusal, ``gui_grounding.eval.judge``); optional ``"refusal": true`` (with a null point) = the model's explicit
"no target" answer (UI-Venus ``[-1,-1]``; ``Adapter.is_refusal``), ``correct`` on refusal items and ``wrong`` (not
``wrong_format``) on the others. ``refusal`` absent, ``false`` or ``null`` = no refusal; any other value (a string,
a number, ``1``, a list, an object) or ``true`` beside a point is a malformed record (reason given, the sample scored
``wrong_format``). Other keys (prompt, adapter, resized point, ...) are kept, except the reader's own bookkeeping keys
``ref``, ``malformed`` and ``harness_correctness``, which a record cannot set. ``report.format`` says how the file
was framed: ``json_list`` (it starts with a JSON list; refs ``file:[index]``) or ``jsonl`` (refs ``file:line``).

**The official ScreenSpot-Pro harness log** (``eval_screenspot_pro.py`` / ``_parallel.py`` ``--log_path``): one JSON
object ``{"details": [...], "metrics": {...}}``; each detail has ``img_path``, ``group``, ``platform``,
``application``, ``lang``, ``instruction_style``, ``prompt_to_evaluate``, ``gt_type``, ``ui_type``,
``task_filename``, ``pred`` (a **pixel** point of the original image, or null), ``raw_response``, ``correctness``,
``bbox`` (positives) and ``id`` in the serial script only (likaixin2000/ScreenSpot-Pro-GUI-Grounding
``eval_screenspot_pro.py`` at d66d7a8 and ``eval_screenspot_pro_parallel.py`` at 6ca3cf9).

Mapping harness details to sample_ids: by ``id`` when the detail has one; otherwise by the key
``(task_filename, file name of img_path, prompt_to_evaluate)`` matched against each sample's
``(task_filename, file name of img_filename, instruction)``; when several samples share a key, the details with that
key are assigned to them in annotation order (the order the harness evaluates them). Only details with
``gt_type == "positive"``, ``instruction_style == "instruction"`` and language ``en`` (key ``lang``, or ``language``)
map to our samples; the others are counted in ``not_mapped`` with the reason. The harness's own ``correctness`` is
kept per prediction and compared with ours by :func:`results_from_predictions` (``harness_disagreements``).

Nothing is dropped silently, and no record makes eval crash:

* a **malformed** record (not JSON -- NaN, ``Infinity``, ``1e999``, bad syntax --, not UTF-8, nested too deeply, a
  number over the parser's digit limit, not an object, no usable ``sample_id`` (:func:`groundwork.validate.explicit_id`),
  no ``point`` key, a point that is not null or 2 finite numbers within +-1e7: ``"12"``, a 400-digit integer,
  booleans) is counted in ``malformed`` with its ref. When its sample can be told (the parsed ``sample_id``, or for a
  record that does not parse, a ``"sample_id": ...`` found in its text) that sample is scored as the harness scores
  an unparseable answer, ``wrong_format``, also on refusal items (an unreadable answer is not an abstention). Strict
  mode raises :class:`EvalInputError` at the first one instead;
* a **number beside the point** that lies outside its range (:data:`VALUE_FIELDS`: an ``agreement`` or
  ``confidence`` that is not a finite number in ``[0, 1]``, e.g. ``tts.agreement`` 7.5 or -3; a token count, call
  count or vote count that is not an integer in ``[0, 1e15]``; ``wall_s`` seconds that are not a finite number in
  ``[0, 1e15]``; booleans are never numbers: :func:`groundwork.validate.bounded_number`) is **dropped** from the
  prediction and counted in ``bad_values`` with its ref and a warning; the point is still scored (a bad confidence
  does not make the answer unreadable), and no mean, calibration bin or cost total sees the value. Strict mode
  raises at the first one;
* ``"outside_frame": true`` (a 0-1000 answer beyond the grid, written by ``gui_grounding.eval.backends.record``:
  the point was mapped as written) is counted in ``outside_frame`` (the kept predictions that carry it; the point is
  scored as it is); a value other than true, false or null is dropped and counted in ``bad_values``;
* a ``sample_id`` that matches no sample is counted in ``unknown_ids``;
* several records for one sample (``duplicates``) refuse the file with an :class:`EvalInputError` naming them, unless
  ``on_duplicate`` is ``"first"`` or ``"last"`` (that record counts; the others are counted in ``duplicates``).
  ScreenSpot-Pro harness logs are exempt (the harness repeats keys legitimately): their duplicates are counted, and
  the later detail wins unless ``on_duplicate="first"``;
* a sample without a prediction is counted in ``missing`` and judged ``wrong_format``;
* a file with records of which **not one** is a prediction (no object with a ``sample_id``, no unparseable record
  naming one: a compressed file, a metrics file, a list of numbers) is refused as a whole with one
  :class:`EvalInputError` line naming the file and what it holds; an empty file is zero predictions (every sample
  ``missing``).

Every sample of the benchmark gets exactly one result: the denominator is always the number of samples.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from groundwork.records import DataFileError, RecordError, iter_records, lax_loads, strict_loads
from gui_grounding.data.annotations import EvalInputError, is_number, short_repr
from gui_grounding.data.schema import Sample
from gui_grounding.eval.judge import WRONG_FORMAT, judge

#: what a second prediction for one sample does: refuse the file, keep the first, keep the last
ON_DUPLICATE = ("error", "first", "last")

logger = logging.getLogger(__name__)

JSONL, JSON_LIST, HARNESS_LOG = "jsonl", "json_list", "screenspot_pro_log"
#: values of ``format=`` / ``--predictions-format``
PREDICTION_FORMATS = ("auto", "jsonl", "json-list", "harness-log")

#: the top-level keys of the official harness's ``--log_path`` file (``evaluate()``'s ``result_report``)
HARNESS_TOP_KEYS = frozenset({"details", "metrics"})
#: the keys the harness writes on every detail (``sample_result``; ``lang`` may also be spelled ``language``; ``id``
#: in the serial script only and ``bbox`` on positives only, so neither is required)
HARNESS_DETAIL_KEYS = (
    "img_path",
    "group",
    "platform",
    "application",
    "instruction_style",
    "prompt_to_evaluate",
    "gt_type",
    "ui_type",
    "task_filename",
    "pred",
    "raw_response",
    "correctness",
)
#: the reader's own keys on a prediction (a record's keys of these names are not kept)
INTERNAL_KEYS = ("ref", "malformed", "harness_correctness")

#: ranges of the numbers a predictions line carries beside its point: ``(low, high, integer)`` for
#: :func:`groundwork.validate.bounded_number`
FRACTION = (0.0, 1.0, False)
COUNT = (0.0, validate.MAX_COUNT, True)
SECONDS = (0.0, validate.MAX_COUNT, False)
#: every number read from a predictions line beside the point, by its key path (``*``: any key, a cost phase), and
#: its range; ``null`` is no value. The one place the value rule is applied to predictions (:func:`checked_values`)
VALUE_FIELDS = {
    ("agreement",): FRACTION,
    ("confidence",): FRACTION,
    ("tts", "agreement"): FRACTION,
    ("tts", "votes"): COUNT,
    ("cost", "*", "calls"): COUNT,
    ("cost", "*", "sequences"): COUNT,
    ("cost", "*", "prompt_tokens"): COUNT,
    ("cost", "*", "generated_tokens"): COUNT,
    ("cost", "*", "wall_s"): SECONDS,
}

# "sample_id": "..." or "sample_id": 123 in the text of a record that does not parse (linear: the string alternatives
# are disjoint and the lengths bounded)
_SAMPLE_ID_IN_TEXT = re.compile(r'"sample_id"\s{0,64}:\s{0,64}(?:"((?:[^"\\\n\r]|\\.){1,512})"|(-?\d{1,64})\b)')
# the text of a record that does not parse is searched for its sample_id up to this many characters
_RECOVER_CHARS = 1 << 20


def show_path(path: str) -> str:
    """``path`` for a message: bytes that are not UTF-8 (surrogate-escaped by the OS layer) as ``\\xNN``, so the
    message itself can always be printed and written."""
    try:
        return os.fsencode(path).decode("utf-8", errors="backslashreplace")
    except (TypeError, ValueError):
        return repr(path)


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
    bad_values: list[tuple[str, str]] = field(default_factory=list)  # (ref, message) of each number dropped
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (ref, sample_id) of each repeat
    not_mapped: list[tuple[str, str]] = field(default_factory=list)  # harness details outside positive/en/instruction
    missing: list[str] = field(default_factory=list)  # sample_ids without a prediction (set by results_from_...)
    harness_disagreements: list[tuple[str, str, str]] = field(default_factory=list)  # (sample_id, harness, ours)
    # sample_ids whose kept prediction says "outside_frame": true (a 0-1000 answer beyond the grid, mapped as written)
    outside_frame: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Counts of records read, predictions kept and each kind of problem."""
        return {
            "records": self.num_records,
            "predictions": self.num_predictions,
            "malformed": len(self.malformed),
            "malformed_samples": len(self.malformed_samples),
            "unknown_ids": len(self.unknown_ids),
            "bad_values": len(self.bad_values),
            "duplicates": len(self.duplicates),
            "not_mapped": len(self.not_mapped),
            "missing": len(self.missing),
            "harness_disagreements": len(self.harness_disagreements),
        }

    def to_dict(self, max_examples: int = 20) -> dict:
        """JSON-ready counts plus the first ``max_examples`` of each problem with its ref."""
        return {
            "path": self.path,
            "format": self.format,
            "on_duplicate": self.on_duplicate,
            **self.counts(),
            "outside_frame": len(self.outside_frame),
            "examples": {
                "malformed": [list(x) for x in self.malformed[:max_examples]],
                "malformed_samples": self.malformed_samples[:max_examples],
                "unknown_ids": [list(x) for x in self.unknown_ids[:max_examples]],
                "bad_values": [list(x) for x in self.bad_values[:max_examples]],
                "duplicates": [list(x) for x in self.duplicates[:max_examples]],
                "not_mapped": [list(x) for x in self.not_mapped[:max_examples]],
                "missing": self.missing[:max_examples],
                "harness_disagreements": [list(x) for x in self.harness_disagreements[:max_examples]],
                "outside_frame": self.outside_frame[:max_examples],
            },
        }

    def table(self) -> str:
        """Readable summary: one line of counts, then the first example of each problem."""
        c = self.counts()
        lines = [f"predictions {self.path} ({self.format}): " + ", ".join(f"{k} {v}" for k, v in c.items())]
        for name in ("malformed", "unknown_ids", "bad_values", "duplicates", "not_mapped", "harness_disagreements"):
            items = getattr(self, name)
            if items:
                lines.append(f"  {name:<22} {len(items):>6}   e.g. {' '.join(map(str, items[0]))}")
        if self.missing:
            lines.append(f"  {'missing':<22} {len(self.missing):>6}   e.g. {self.missing[0]}")
        if self.outside_frame:
            lines.append(f"  {'outside_frame':<22} {len(self.outside_frame):>6}   e.g. {self.outside_frame[0]}")
        return "\n".join(lines)


def parse_point(value: Any) -> tuple[bool, list[float] | None]:
    """``(ok, point)``: ``None`` -> ``(True, None)``; 2 finite numbers within +-1e7 -> ``(True, [x, y])`` floats;
    anything else (NaN, inf, booleans, strings, huge integers) -> not ok. Never raises."""
    if value is None:
        return True, None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value):
        return True, [float(value[0]), float(value[1])]
    return False, None


def _range_text(rule: tuple[float, float, bool]) -> str:
    lo, hi, integer = rule
    return f"{'an integer' if integer else 'a finite number'} in [{lo:g}, {hi:g}]"


def _checked(obj: dict, path: tuple, rule: tuple, shown: str, problems: list[str]) -> dict:
    """``obj`` with the values at ``path`` checked (:func:`checked_values`); a changed object is a copy."""
    head, rest = path[0], path[1:]
    keys = list(obj) if head == "*" else [head] if head in obj else []
    out = obj
    for key in keys:
        value, name = obj[key], f"{shown}.{key}" if shown else key
        if rest:
            if isinstance(value, dict):
                new = _checked(value, rest, rule, name, problems)
                if new is not value:
                    out = dict(out) if out is obj else out
                    out[key] = new
            continue
        if value is None:
            continue
        number = validate.bounded_number(value, rule[0], rule[1], integer=rule[2])
        if number is not None and type(number) is type(value):
            continue
        out = dict(out) if out is obj else out
        if number is None:
            del out[key]
            shown_name = name if len(name) <= 80 else name[:80] + "..."
            problems.append(f"{shown_name} must be {_range_text(rule)}, got {short_repr(value)} (dropped)")
        else:
            out[key] = number  # an integral agreement (1) as the float it means (1.0)
    return out


def checked_values(record: dict) -> tuple[dict, list[str]]:
    """``record`` with every number of :data:`VALUE_FIELDS` checked by the one value rule
    (:func:`groundwork.validate.bounded_number`): a value outside its range is removed (one message each, naming its key
    path, the range and the value), a fraction stated as an integer becomes a float, ``null`` stays. Objects it
    changes are copies; ``record`` itself is never modified. Never raises.

    Returns:
        ``(record, problems)``.
    """
    problems: list[str] = []
    out = record
    for path, rule in VALUE_FIELDS.items():
        out = _checked(out, path, rule, "", problems)
    return out, problems


def read_answer_fields(rec: dict) -> tuple[str | None, list[float] | None]:
    """``(problem, point)`` of a predictions record's answer: the reader's rules for ``point`` (present; null or two
    finite numbers within +-1e7: :func:`parse_point`) and ``refusal`` (true, false or null; a refusal has no point).
    ``problem`` is the malformed-record message (the sample is then scored ``wrong_format``), else None and
    ``point`` the normalised point. The one reading of an answer's fields: the predictions reader and
    ``gui_grounding.eval.backends.eval_reading`` (what ``gui-grounding prompt --parse`` shows) both call it."""
    if "point" not in rec:
        return "no 'point' key (use null for no answer)", None
    ok, point = parse_point(rec["point"])
    if not ok:
        return f"point must be null or [x, y] finite numbers (|v| <= 1e7), got {short_repr(rec['point'])}", None
    refusal = rec.get("refusal", False)
    if refusal is not True and refusal is not False and refusal is not None:
        return f"refusal must be true, false or null, got {short_repr(refusal)}", None
    if refusal is True and point is not None:
        return f"a refusal has no point (got refusal true and point {point})", None
    return None, point


def harness_shape_problem(doc: Any) -> str | None:
    """Why ``doc`` is not a ScreenSpot-Pro harness log as the harness writes it, or None when it is.

    The full published shape: an object whose keys are exactly ``details`` and ``metrics``; ``metrics`` an object;
    ``details`` a list of objects, each holding every key of :data:`HARNESS_DETAIL_KEYS` and ``lang`` (or
    ``language``). Nothing less is taken for a harness log by ``format="auto"``.
    """
    if not isinstance(doc, dict):
        return f"not a JSON object but {type(doc).__name__}"
    if set(doc) != HARNESS_TOP_KEYS:
        return f"its top-level keys {short_repr(sorted(doc), 200)} are not exactly ['details', 'metrics']"
    if not isinstance(doc["metrics"], dict):
        return f"'metrics' is {type(doc['metrics']).__name__}, not an object"
    if not isinstance(doc["details"], list):
        return f"'details' is {type(doc['details']).__name__}, not a list"
    for i, d in enumerate(doc["details"]):
        if not isinstance(d, dict):
            return f"details[{i}] is {type(d).__name__}, not an object"
        missing = [k for k in HARNESS_DETAIL_KEYS if k not in d] + ([] if "lang" in d or "language" in d else ["lang"])
        if missing:
            return f"details[{i}] lacks the harness key(s) {missing}"
    return None


def _recover_id(text: str) -> str | None:
    """The ``sample_id`` written in the text of a record that does not parse, if one can be read."""
    m = _SAMPLE_ID_IN_TEXT.search(text, 0, _RECOVER_CHARS)
    if m is None:
        return None
    if m.group(2) is not None:
        return str(int(m.group(2)))
    try:
        value = strict_loads(f'"{m.group(1)}"')
    except (ValueError, RecursionError):
        return None
    return validate.explicit_id(value)


def _with_type(message: str, text: str | None) -> str:
    """The reader's "not a JSON object" with the type of the value it found (``not a JSON object: int``)."""
    if message != "not a JSON object" or not text or len(text) > _RECOVER_CHARS:
        return message
    try:
        value = lax_loads(text)
    except (ValueError, RecursionError):
        return message
    return f"{message}: {type(value).__name__}"


def _describe_records(path: str, items: list) -> str:
    """What a file that holds no prediction holds, for the one-line refusal."""
    n = len(items)
    first_ref, _, first = items[0]
    if isinstance(first, RecordError) and first_ref == path:  # the reader's verdict on the whole file
        return first.message
    what = (
        f"{first_ref}: {first.message}"
        if isinstance(first, RecordError)
        else f"{first_ref}: an object without sample_id, keys {short_repr(sorted(first), 200)}"
    )
    return f"none of its {n} record(s) is a JSON object with a sample_id (first: {what})"


def _refusal(path: str, fmt: str, items: list) -> EvalInputError:
    """The one-line error for a file with records of which not one is a prediction."""
    shown = show_path(path)
    first_ref, _, only = items[0]
    if isinstance(only, RecordError) and first_ref == path:  # the reader's verdict on the whole file (gzip, UTF-16)
        return EvalInputError(f"{shown}: {only.message}")
    if len(items) == 1 and isinstance(only, dict):
        problem = harness_shape_problem(only)
        hint = (
            f"; not read as a harness log because {problem} (pass --predictions-format harness-log to read it as one)"
            if "details" in only
            else ""
        )
        return EvalInputError(
            f"{shown}: neither a predictions JSONL (one {{sample_id, point, ...}} object per line), "
            "a JSON list of such objects, nor a ScreenSpot-Pro harness log (the harness's "
            f"{{details, metrics}} object); its keys: {short_repr(sorted(only), 200)}{hint}"
        )
    if fmt == JSON_LIST:
        return EvalInputError(
            f"{shown}: a JSON list that cannot be read as predictions: "
            f"{_describe_records(path, items)}; write JSONL (one {{sample_id, point}} object per "
            "line)"
        )
    return EvalInputError(f"{shown}: no prediction in the file: {_describe_records(path, items)}")


def load_predictions(
    path: str, samples: list[Sample], *, strict: bool = False, on_duplicate: str = "error", format: str = "auto"
) -> tuple[dict[str, dict], PredictionReport]:
    """Predictions of ``path`` keyed by sample_id, with points in original pixels (module docstring: formats, rules).

    Args:
        path: our predictions (JSONL, a JSON list, or both) or an official ScreenSpot-Pro harness log.
        samples: the benchmark's samples (known sample_ids; harness details are mapped onto them).
        strict: raise on the first malformed record or unknown sample_id instead of counting it.
        on_duplicate: several records for one sample: ``"error"`` (refuse), ``"first"`` or ``"last"``.
        format: ``"auto"`` (a harness log only by its full shape), ``"jsonl"`` / ``"json-list"`` (our
            predictions), ``"harness-log"``.

    Returns:
        ``(predictions, report)``; each prediction is the record (less :data:`INTERNAL_KEYS`) with ``point``
        normalised to ``[x, y]`` floats or ``None``, plus ``ref``, ``malformed`` (the message, for a malformed record
        scored ``wrong_format``) and, for harness logs, ``harness_correctness``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        EvalInputError: ``path`` is a folder; duplicate predictions with ``on_duplicate="error"`` (not for harness
            logs); a file with records of which not one is a prediction (compressed, UTF-16, a metrics file, ...);
            ``format="harness-log"`` on a file that is not one object with a ``details`` list (one line, naming the
            file). Also, in strict mode, the first malformed record or unknown id (naming it).
        ValueError: an unknown ``on_duplicate`` or ``format``.
    """
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    if format not in PREDICTION_FORMATS:
        raise ValueError(f"predictions format must be one of {', '.join(PREDICTION_FORMATS)}, got {format!r}")
    if os.path.isdir(path):
        raise EvalInputError(f"predictions {show_path(path)} is a folder; name a predictions file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"predictions file not found: {show_path(path)}")
    try:
        items = list(iter_records(path))
    except DataFileError as err:  # not JSON text (gzip, UTF-16, a FIFO): the framing rule's one error for the file
        raise EvalInputError(f"{show_path(path)}: {err.message}") from None
    only = items[0][2] if len(items) == 1 else None
    if format == "harness-log":
        if not (isinstance(only, dict) and isinstance(only.get("details"), list)):
            found = (
                f"{len(items)} documents/records"
                if len(items) != 1
                else only.message
                if isinstance(only, RecordError)
                else f"an object with keys {short_repr(sorted(only), 200)}"
            )
            raise EvalInputError(
                f"{show_path(path)}: --predictions-format harness-log needs one JSON object with a "
                f"'details' list (the ScreenSpot-Pro harness's --log_path file); found {found}"
            )
        return _load_harness_log(path, only, samples, strict, on_duplicate)
    if format == "auto" and isinstance(only, dict) and harness_shape_problem(only) is None:
        return _load_harness_log(path, only, samples, strict, on_duplicate)
    fmt = JSON_LIST if items and items[0][0].startswith(f"{path}:[") else JSONL
    return _load_records(path, fmt, items, samples, strict, on_duplicate)


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

    def bad_value(self, ref: str, message: str) -> None:
        """Count a number dropped from a prediction (:func:`checked_values`)."""
        if self.strict:
            raise EvalInputError(f"{ref}: bad value in prediction: {message}")
        self.report.bad_values.append((ref, message))

    def unknown(self, ref: str, what: str) -> None:
        if self.strict:
            raise EvalInputError(f"{ref}: prediction for unknown sample {what} (wrong predictions file for this data?)")
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
            raise EvalInputError(
                f"{self.report.path}: {len(dups)} duplicate prediction(s): {shown}{more}. Which one "
                "counts would depend on line order; remove them, or pass --on-duplicate first|last "
                "(run_eval(on_duplicate=...))"
            )
        self.report.num_predictions = len(self.predictions)
        self.report.malformed_samples = [sid for sid, p in self.predictions.items() if "malformed" in p]
        self.report.outside_frame = [
            sid for sid, p in self.predictions.items() if p.get("outside_frame") is True and "malformed" not in p
        ]
        problems = {
            k: v
            for k, v in self.report.counts().items()
            if k in ("malformed", "unknown_ids", "bad_values", "duplicates", "not_mapped") and v
        }
        if problems:
            logger.warning("%s: %s\n%s", self.report.path, problems, self.report.table())
        return self.predictions, self.report


def _load_records(
    path: str, fmt: str, items: list, samples: list[Sample], strict: bool, on_duplicate: str
) -> tuple[dict[str, dict], PredictionReport]:
    texts = {ref: item.text for ref, _, item in items if isinstance(item, RecordError) and item.text}
    recovered = {ref: _recover_id(text) for ref, text in texts.items()}
    usable = sum(
        1
        for ref, _, item in items
        if (isinstance(item, dict) and "sample_id" in item)
        or (isinstance(item, RecordError) and recovered.get(ref) is not None)
    )
    if items and not usable:
        raise _refusal(path, fmt, items)
    c = _Collector(path, fmt, samples, strict, on_duplicate)
    for ref, _, rec in items:
        c.report.num_records += 1
        if isinstance(rec, RecordError):
            sid = recovered.get(ref)
            message = _with_type(rec.message, texts.get(ref))
            c.malformed(ref, message if sid is None else f"sample {sid}: {message}", sid)
            continue
        if not isinstance(rec, dict):  # iter_records yields objects only; kept for other readers' items
            c.malformed(ref, f"not a JSON object: {type(rec).__name__}")
            continue
        sid = validate.explicit_id(rec.get("sample_id"))
        if sid is None:
            c.malformed(ref, f"no usable sample_id (got {short_repr(rec.get('sample_id'))})")
            continue
        problem, point = read_answer_fields(rec)
        if problem is not None:
            c.malformed(ref, f"sample {sid}: {problem}", sid)
            continue
        checked, problems = checked_values({k: v for k, v in rec.items() if k not in INTERNAL_KEYS})
        flag = checked.get("outside_frame")
        if flag is not None and not isinstance(flag, bool):  # only true/false/null; anything else is dropped
            checked.pop("outside_frame")
            problems.append(f"outside_frame must be true, false or null, got {short_repr(flag)}")
        for problem in problems if sid in c.known else ():  # an unknown sample's numbers are never read
            c.bad_value(ref, f"sample {sid}: {problem}")
        c.add(ref, sid, checked, point)
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
            c.report.not_mapped.append(
                (
                    ref,
                    f"gt_type={setting[0]} instruction_style={setting[1]} lang={setting[2]} "
                    "(only positive / instruction / en map to benchmark samples)",
                )
            )
            continue
        # the sample first (so a malformed pred still takes its place in the key order), then the point
        sid = validate.explicit_id(d.get("id"))
        if sid is None:
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
        record = {
            "raw_response": d.get("raw_response"),
            "harness_correctness": d.get("correctness"),
            "prompt": d.get("prompt_to_evaluate"),
        }
        c.add(ref, sid, record, point)
    return c.finish(exempt_duplicates=True)


def results_from_predictions(
    samples: list[Sample], predictions: dict[str, dict], report: PredictionReport | None = None
) -> dict[str, dict]:
    """Judge every sample: ``{sample_id: {"correctness", "point", "missing"}}`` (``point`` in original pixels).

    A sample without a prediction is ``wrong_format`` with ``missing: True`` -- also on refusal items, where only an
    explicit refusal (``"refusal": true``) counts as abstaining; a sample whose record was malformed is
    ``wrong_format`` with ``malformed`` (the message), on refusal items too. Every other prediction is scored by
    :func:`gui_grounding.eval.judge.judge` with its point and ``refusal`` flag. With ``report``, fills
    ``report.missing`` and, for harness logs, ``report.harness_disagreements`` (samples where the log's
    ``correctness`` differs from ours).
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
            results[s.sample_id] = {
                "correctness": WRONG_FORMAT,
                "point": None,
                "missing": False,
                "malformed": pred["malformed"],
            }
            continue
        correctness = judge(s, pred["point"], refusal=pred.get("refusal") is True)
        results[s.sample_id] = {"correctness": correctness, "point": pred["point"], "missing": False}
        harness = pred.get("harness_correctness")
        if report is not None and harness is not None and harness != correctness:
            report.harness_disagreements.append((s.sample_id, str(harness), correctness))
    if report is not None and report.missing:
        logger.warning(
            "%d samples have no prediction (counted wrong_format), e.g. %s", len(report.missing), report.missing[:3]
        )
    return results
