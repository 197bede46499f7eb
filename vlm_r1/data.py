"""Reading data files (JSON / JSONL, record by record, with ``file:line`` references) and data mixtures.

``iter_records`` is used by every task (``vlm_r1.tasks``, ``gui_grounding.schema``) so bad lines are reported the same
way everywhere. ``load_data_config`` / ``sampling_indices`` implement VLM-R1's ``data_config`` YAML mixtures
(``--data_config``), applied per source by ``vlm_r1.grpo_jsonl``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


class RecordError(ValueError):
    """An unparseable record; ``ref`` names it as ``file:line`` (JSONL, 1-based) or ``file:[index]`` (JSON)."""

    def __init__(self, ref: str, message: str):
        self.ref, self.message = ref, message
        super().__init__(f"{ref}: {message}")


# bytes that are not UTF-8 come back from errors="surrogateescape" as U+DC80..U+DCFF (valid UTF-8 never decodes to them)
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (NaN and Infinity are not JSON)")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number {token[:40]} is out of range for a float")
    return value


def _loads(text: str, ref: str) -> Any:
    """The JSON value in ``text``, or the :class:`RecordError` saying why there is none (never raises on content).

    Strict JSON: ``NaN``/``Infinity`` tokens and floats beyond the float range (``1e999``) are errors, like bad
    syntax."""
    if _UNDECODABLE.search(text):
        return RecordError(ref, "not valid UTF-8")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        return RecordError(ref, "invalid JSON: nested too deeply")
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, ints of more than sys.get_int_max_str_digits() digits
        return RecordError(ref, f"invalid JSON: {str(err)[:200]}")


def _record(value: Any, ref: str) -> dict | RecordError:
    return value if isinstance(value, (dict, RecordError)) else RecordError(ref, "not a JSON object")


# one token of a JSON text for splitting a list into its elements: a complete string, a bracket or a comma, or a lone
# quote (a string not finished in the text read so far)
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]|"', re.S)
_CLOSER = {"]": "[", "}": "{"}
JSON_LIST_CHUNK_CHARS = 1 << 20


def split_json_list(chunks: Iterable[str]) -> Iterator[str]:
    """The text of each top-level element of a JSON list given as consecutive pieces of text, read incrementally.

    A lexical scan (strings, brackets, commas), so an element that does not parse (NaN, a huge integer, bad syntax,
    nesting 100k levels deep) is one piece of text and the elements after it are still found. A closing bracket that
    does not match the innermost open one closes up to the nearest matching one within the element (``{"a": [1}``
    ends at its ``}``), else it stays inside the element as a stray. Memory: the current element only.

    Raises:
        ValueError: the text does not start with ``[`` (not a JSON list).
    """
    it = iter(chunks)
    buf, pos, start, eof, stack, count = "", 0, 0, False, [], 0
    while True:
        m = _TOKEN.search(buf, pos)
        if m is None or m.group() == '"':
            if not eof:
                cut = start if stack else pos
                buf, pos, start = buf[cut:], pos - cut, start - cut
                piece = next(it, None)
                if piece is None:
                    eof = True
                else:
                    buf += piece
                continue
            if stack and (buf[start:].strip() or count):  # unterminated list: the rest is one (bad) element
                yield buf[start:]
            elif not stack and buf[pos:].strip():
                raise ValueError("not a JSON list (the text does not start with '[')")
            return
        tok = m.group()
        if not stack:
            if tok != "[" or buf[pos : m.start()].strip():
                raise ValueError("not a JSON list (the text does not start with '[')")
            stack.append("[")
            pos = start = m.end()
            continue
        pos = m.end()
        if tok[0] == '"':
            continue
        if tok in "[{":
            stack.append(tok)
        elif tok in _CLOSER:
            opener = _CLOSER[tok]
            if len(stack) > 1:  # inside an element: close up to the innermost matching opener, if any
                inner = next(
                    (i for i in range(len(stack) - 1, max(len(stack) - 1000, 0), -1) if stack[i] == opener), None
                )
                if inner is not None:
                    del stack[inner:]
                continue  # a stray closer stays part of the (broken) element
            if opener == "[":  # the list is closed
                stack.pop()
                if buf[start : m.start()].strip() or count:
                    yield buf[start : m.start()]
                return
        elif len(stack) == 1:  # a comma between top-level elements
            yield buf[start : m.start()]
            count += 1
            start = m.end()


def _read_chunks(f, size: int = JSON_LIST_CHUNK_CHARS) -> Iterator[str]:
    while True:
        piece = f.read(size)
        if not piece:
            return
        yield piece


def iter_json_list(path: str, *, start: int = 0) -> Iterator[tuple[str, int, dict | RecordError]]:
    """``(ref, index, record_or_error)`` for each element of the JSON list in ``path``, streamed and recovering:
    an element that does not parse is one :class:`RecordError` and the elements after it are read as usual
    (:func:`split_json_list`). Elements before index ``start`` are skipped (not parsed). A leading BOM is ignored.
    A file that is not a JSON list yields one error."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
        index = 0
        try:
            for piece in split_json_list(_read_chunks(f)):
                if index >= start:
                    ref = f"{path}:[{index}]"
                    yield ref, index, _record(_loads(piece, ref) if piece.strip() else
                                              RecordError(ref, "invalid JSON: empty list element"), ref)  # fmt: skip
                index += 1
        except ValueError as err:
            ref = f"{path}:[{index}]"
            yield ref, index, RecordError(ref, str(err))


def iter_records(path: str) -> Iterator[tuple[str, int, dict | RecordError]]:
    """Yield ``(ref, index, record_or_error)`` for each record of a ``.json`` or ``.jsonl`` file.

    ``index`` is the 0-based position among non-blank records. A line that is not JSON (bad syntax, ``NaN`` /
    ``Infinity``, bytes that are not UTF-8, nesting too deep for the parser, an integer of more than 4300 digits), or
    not a JSON object, yields a :class:`RecordError` in place of the record, so the caller can count it and go on (or
    raise it in strict mode); the lines around it are read as usual. A ``.json`` file holds a list of records or one
    record; in a list, an element that does not parse is one error and the elements after it are read as usual
    (:func:`iter_json_list`); a single object that does not parse yields one error. A leading UTF-8 byte-order mark
    is ignored.
    """
    if path.endswith(".json"):
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
            text = f.read()
        data = _loads(text, path)
        if isinstance(data, RecordError):
            if text.lstrip().startswith("["):  # recover element by element
                del text
                yield from iter_json_list(path)
                return
            yield path, 0, data
            return
        for i, item in enumerate(data if isinstance(data, list) else [data]):
            ref = f"{path}:[{i}]"
            yield ref, i, _record(item, ref)
        return
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
        index = 0
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            ref = f"{path}:{lineno}"
            yield ref, index, _record(_loads(line, ref), ref)
            index += 1


# --------------------------------------------------------------------------------------------------------------------
# pass-through columns: record keys a task does not read reach the reward functions as dataset columns

# Keyword names TRL's GRPOTrainer passes to every reward function itself (trl/trainer/grpo_trainer.py,
# ``_calculate_rewards``: ``prompts``, ``completions``, ``completion_ids`` + ``trainer_state``, ``log_extra``,
# ``log_metric``, ``environments``) or never passes (``prompt``, ``completion``): a column of that name would be
# overwritten or make the reward call fail with "got multiple values for keyword argument".
TRL_REWARD_KWARGS = frozenset({"prompt", "prompts", "completion", "completions", "completion_ids", "trainer_state",
                               "log_extra", "log_metric", "environments"})  # fmt: skip
# Columns the lazy image loader (vlm_r1.tasks.load_images_transform) adds to every batch.
IMAGE_COLUMNS = frozenset({"image", "images"})
# At most this many pass-through columns per dataset (first seen first); a file whose records each carry new keys
# would otherwise make rows x keys cells of None.
MAX_EXTRA_COLUMNS = 256
_JSON_TEXT_KEY = "vlm_r1_json_text_columns"  # DatasetInfo.description key listing the columns stored as JSON text


def split_extras(record: dict, consumed, reserved, dropped) -> dict:
    """The pass-through part of ``record``: every key except ``consumed`` (what the task reads: ``image``,
    ``conversations``, ...), the task's own columns ``reserved`` and the names in ``TRL_REWARD_KWARGS`` /
    ``IMAGE_COLUMNS``. A key dropped for being reserved (and not consumed) is counted in the Counter ``dropped``.

    Upstream VLM-R1 kept every record key (``grpo_jsonl.py:955-985`` deletes only ``image``/``conversations`` and
    overwrites ``image_path``/``problem``/``solution``); here the task's own columns win the same way.
    """
    out = {}
    for key, value in record.items():
        if key in consumed:
            continue
        if key in reserved or key in TRL_REWARD_KWARGS or key in IMAGE_COLUMNS:
            dropped[key] += 1
            continue
        out[key] = value
    return out


def warn_dropped(dropped, what: str, logger) -> None:
    """One warning per reserved record key that was dropped (see :func:`split_extras`)."""
    for key, n in sorted(dropped.items()):
        logger.warning("%s: record key %r dropped from %d record(s): the name is reserved (a column the task computes, "
                       "an image column, or a keyword TRL passes to rewards itself)", what, key, n)  # fmt: skip


def json_text_columns(dataset) -> list[str]:
    """Names of ``dataset``'s columns stored as JSON text by :func:`rows_to_dataset` (json.loads each non-None value)."""
    try:
        return list(json.loads(dataset.info.description or "{}").get(_JSON_TEXT_KEY, []))
    except (ValueError, AttributeError):
        return []


def _json_text(values: list) -> list:
    # ensure_ascii: lone surrogates (legal JSON escapes, not encodable as UTF-8) become \udXXX escapes again
    return [None if v is None else json.dumps(v, ensure_ascii=True, allow_nan=False) for v in values]


def _type_names(values: list) -> str:
    return ", ".join(sorted({type(v).__name__ for v in values if v is not None}))


def rows_to_dataset(rows: list[dict], extras: list[dict], *, what: str, logger):
    """A ``datasets.Dataset`` of the task's ``rows`` (every row has the same keys) plus pass-through ``extras``.

    Column rules:

    * every pass-through key found in ANY record becomes a column (upstream's ``Dataset.from_list`` took the column
      set from the first line, ``grpo_jsonl.py:993``); a record without the key gets None;
    * values keep their JSON types where Arrow can hold the column as-is, with Arrow's own merging: ints and floats
      in one column become floats, objects with different keys become one struct holding every key (None where a
      record lacks it);
    * a column Arrow cannot hold (mixed kinds such as an object in one record and a string in another, or an integer
      beyond 64 bits, or a string with a lone surrogate escape) is stored as JSON text in EVERY row (``json.dumps``
      of the value, None stays None) and a warning names the key and the types; such columns are listed by
      :func:`json_text_columns`;
    * at most ``MAX_EXTRA_COLUMNS`` pass-through columns, first seen first; the rest are dropped with a warning.
    """
    from datasets import Dataset, DatasetInfo

    columns = {key: [row[key] for row in rows] for key in (rows[0] if rows else {})}
    order = list(dict.fromkeys(key for extra in extras for key in extra))
    if len(order) > MAX_EXTRA_COLUMNS:
        logger.warning("%s: %d distinct pass-through record keys; keeping the first %d, dropping %d (first dropped: "
                       "%s)", what, len(order), MAX_EXTRA_COLUMNS, len(order) - MAX_EXTRA_COLUMNS,
                       order[MAX_EXTRA_COLUMNS : MAX_EXTRA_COLUMNS + 5])  # fmt: skip
        order = order[:MAX_EXTRA_COLUMNS]
    as_json = []
    for key in order:
        values = [extra.get(key) for extra in extras]
        try:
            Dataset.from_dict({key: values})
        except Exception as err:  # Arrow raises several types (ArrowInvalid, ArrowTypeError, OverflowError, ...)
            logger.warning("%s: record key %r holds values Arrow cannot keep in one column (%s; %s: %s); the column is "
                           "stored as JSON text in every row (json.loads each value)", what, key, _type_names(values),
                           type(err).__name__, str(err)[:120])  # fmt: skip
            values = _json_text(values)
            as_json.append(key)
        columns[key] = values
    info = DatasetInfo(description=json.dumps({_JSON_TEXT_KEY: as_json}, allow_nan=False)) if as_json else None
    return Dataset.from_dict(columns, info=info)


def concatenate_record_datasets(parts: list, *, what: str = "data mixture", logger=None):
    """Concatenate per-source datasets of one task (``--data_config`` mixtures) whose pass-through columns may differ.

    The union of the columns is kept (None where a part lacks one) and types merge as in :func:`rows_to_dataset`
    (Arrow's permissive promotion: null -> any, int -> float, structs merged). A pass-through column whose types
    cannot merge across parts (e.g. an object in one file, a string in another) is stored as JSON text in every part
    (parts that already hold it as JSON text are left as they are) with a warning. Formats/transforms of the parts
    are dropped (put the task's transform back on the result, e.g. ``vlm_r1.launch.with_transform_of``).

    Raises:
        ValueError: the tables still cannot be joined (not expected: every conflicting column became JSON text).
    """
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo

    tables = [p.with_format("arrow")[:] for p in parts]
    texts = [set(json_text_columns(p)) for p in parts]
    names = list(dict.fromkeys(name for t in tables for name in t.column_names))
    as_json = set().union(*texts)
    for name in names:
        fields = [t.schema.field(name) for t in tables if name in t.column_names]
        try:
            pa.unify_schemas([pa.schema([f]) for f in fields], promote_options="permissive")
            conflict = False
        except (pa.ArrowInvalid, pa.ArrowTypeError, NotImplementedError):
            conflict = True
        mixed = name in as_json and any(name in t.column_names and name not in j and not pa.types.is_null(
            t.schema.field(name).type) for t, j in zip(tables, texts, strict=True))  # fmt: skip
        if not (conflict or mixed):
            continue
        if logger is not None:
            logger.warning("%s: column %r has types %s across sources; stored as JSON text in every row (json.loads "
                           "each value)", what, name, sorted({str(f.type) for f in fields}))  # fmt: skip
        for i, (t, j) in enumerate(zip(tables, texts, strict=True)):
            if name in t.column_names and name not in j:
                col = t.column_names.index(name)
                tables[i] = t.set_column(col, name, pa.array(_json_text(t.column(name).to_pylist()), pa.string()))
        as_json.add(name)
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise ValueError(f"{what}: the sources' columns cannot be joined: {err}") from err
    info = DatasetInfo(description=json.dumps({_JSON_TEXT_KEY: sorted(as_json)}, allow_nan=False)) if as_json else None
    return Dataset(table, info=info)


# --------------------------------------------------------------------------------------------------------------------
# data mixtures (VLM-R1's data_config YAML)


@dataclass
class DataSource:
    """One ``datasets:`` entry of a data_config YAML.

    ``json_path`` and ``image_folder`` are resolved relative to the YAML file's folder when relative;
    ``sampling_strategy`` is one of ``all``, ``first:N``, ``end:N``, ``random:N``, ``random:P%``.
    """

    json_path: str
    image_folder: str | None = None
    sampling_strategy: str = "all"
    name: str | None = None


def load_data_config(path: str) -> tuple[list[DataSource], int | None]:
    """Read a VLM-R1-style data_config YAML: ``{"datasets": [{json_path, image_folder?, sampling_strategy?}], seed?}``.

    Returns:
        ``(sources, seed)``; ``seed`` is the file's top-level ``seed`` or None.

    Raises:
        ValueError: not a mapping with a non-empty ``datasets`` list, an entry without ``json_path``, an unknown key,
            or an invalid sampling strategy (each message names the entry).
        FileNotFoundError: the YAML file, or a ``json_path``, does not exist.
    """
    import yaml

    with open(path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    if not isinstance(cfg, dict) or not isinstance(cfg.get("datasets"), list) or not cfg["datasets"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty 'datasets:' list")
    unknown_top = set(cfg) - {"datasets", "seed"}
    if unknown_top:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown_top)} (allowed: datasets, seed)")
    base = os.path.dirname(os.path.abspath(path))
    sources = []
    for i, entry in enumerate(cfg["datasets"]):
        where = f"{path}: datasets[{i}]"
        if not isinstance(entry, dict) or "json_path" not in entry:
            raise ValueError(f"{where}: each entry needs a json_path")
        unknown = set(entry) - {"json_path", "image_folder", "sampling_strategy", "name"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} (allowed: json_path, image_folder, "
                             "sampling_strategy, name)")  # fmt: skip
        json_path = os.path.normpath(os.path.join(base, str(entry["json_path"])))
        if not os.path.isfile(json_path):
            raise FileNotFoundError(f"{where}: json_path {json_path} not found")
        folder = entry.get("image_folder")
        strategy = str(entry.get("sampling_strategy", "all"))
        sampling_indices(1, strategy, 0, where=where)  # validate the syntax early
        sources.append(DataSource(json_path, os.path.normpath(os.path.join(base, str(folder))) if folder else None, strategy,
                                  entry.get("name")))  # fmt: skip
    seed = cfg.get("seed")
    return sources, int(seed) if seed is not None else None


def sampling_indices(n: int, strategy: str, seed: int, *, where: str = "") -> list[int]:
    """Indices of the ``n`` records that ``strategy`` keeps, in record order (random ones are sorted).

    ``all``; ``first:N`` (the first N); ``end:N`` (the last N); ``random:N`` (N chosen with ``random.Random(seed)``);
    ``random:P%`` (``n * P / 100`` rounded half up, chosen the same way). A count above ``n`` keeps all ``n`` (the caller
    reports it).

    Raises:
        ValueError: an unknown strategy or a malformed count (naming ``where``).
    """
    import random

    kind, _, arg = strategy.partition(":")
    if kind == "all" and not arg:
        return list(range(n))
    if kind not in ("first", "end", "random") or not arg:
        raise ValueError(f"{where}: unknown sampling_strategy {strategy!r} (all, first:N, end:N, random:N, random:P%)")
    try:
        if arg.endswith("%"):
            if kind != "random":
                raise ValueError
            pct = float(arg[:-1])
            if not 0 <= pct <= 100:
                raise ValueError
            k = int(n * pct / 100 + 0.5)  # round half up (not Python's banker's rounding)
        else:
            k = int(arg)
            if k < 0:
                raise ValueError
    except ValueError:
        raise ValueError(f"{where}: malformed sampling_strategy {strategy!r}") from None
    k = min(k, n)
    if kind == "first":
        return list(range(k))
    if kind == "end":
        return list(range(n - k, n))
    return sorted(random.Random(seed).sample(range(n), k))


def requested_count(strategy: str) -> int | None:
    """The record count a ``first:N`` / ``end:N`` / ``random:N`` strategy asks for; None for ``all`` and ``P%``."""
    kind, _, arg = strategy.partition(":")
    if kind in ("first", "end", "random") and arg.isdigit():
        return int(arg)
    return None
