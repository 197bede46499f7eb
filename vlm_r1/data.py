"""Training data as datasets: the record keys a task passes through to the reward functions (columns), rows to a
``datasets.Dataset`` (mixed-type columns as JSON text), the concatenation of a mixture's parts, and VLM-R1's
``data_config`` YAML mixtures (``--data_config``: ``load_data_config`` / ``sampling_indices``), applied per source by
:func:`vlm_r1.grpo.build_datasets`. Records are read by the framing rule of :mod:`groundwork.records`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from groundwork.argtypes import SEED
from groundwork.argtypes import value as checked_value
from groundwork.records import load_yaml_file, strict_loads
from groundwork.validate import MAX_COUNT, bounded_number

# pass-through columns: record keys a task does not read reach the reward functions as dataset columns

# Keyword names TRL's GRPOTrainer passes to every reward function itself (trl/trainer/grpo_trainer.py,
# ``_calculate_rewards``: ``prompts``, ``completions``, ``completion_ids`` + ``trainer_state``, ``log_extra``,
# ``log_metric``, ``environments``) or never passes (``prompt``, ``completion``): a column of that name would be
# overwritten or make the reward call fail with "got multiple values for keyword argument".
TRL_REWARD_KWARGS = frozenset(
    {
        "prompt",
        "prompts",
        "completion",
        "completions",
        "completion_ids",
        "trainer_state",
        "log_extra",
        "log_metric",
        "environments",
    }
)
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
        logger.warning(
            "%s: record key %r dropped from %d record(s): the name is reserved (a column the task computes, "
            "an image column, or a keyword TRL passes to rewards itself)",
            what,
            key,
            n,
        )


def json_text_columns(dataset) -> list[str]:
    """Names of ``dataset``'s columns stored as JSON text by :func:`rows_to_dataset` (json.loads each non-None value)."""
    try:
        return list(strict_loads(dataset.info.description or "{}").get(_JSON_TEXT_KEY, []))
    except (ValueError, AttributeError, RecursionError):
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
        logger.warning(
            "%s: %d distinct pass-through record keys; keeping the first %d, dropping %d (first dropped: %s)",
            what,
            len(order),
            MAX_EXTRA_COLUMNS,
            len(order) - MAX_EXTRA_COLUMNS,
            order[MAX_EXTRA_COLUMNS : MAX_EXTRA_COLUMNS + 5],
        )
        order = order[:MAX_EXTRA_COLUMNS]
    as_json = []
    for key in order:
        values = [extra.get(key) for extra in extras]
        try:
            Dataset.from_dict({key: values})
        except Exception as err:  # Arrow raises several types (ArrowInvalid, ArrowTypeError, OverflowError, ...)
            logger.warning(
                "%s: record key %r holds values Arrow cannot keep in one column (%s; %s: %s); the column is "
                "stored as JSON text in every row (json.loads each value)",
                what,
                key,
                _type_names(values),
                type(err).__name__,
                str(err)[:120],
            )
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
        mixed = name in as_json and any(
            name in t.column_names and name not in j and not pa.types.is_null(t.schema.field(name).type)
            for t, j in zip(tables, texts, strict=True)
        )
        if not (conflict or mixed):
            continue
        if logger is not None:
            logger.warning(
                "%s: column %r has types %s across sources; stored as JSON text in every row (json.loads each value)",
                what,
                name,
                sorted({str(f.type) for f in fields}),
            )
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


@dataclass(frozen=True)
class DifficultyBin:
    """One ``difficulty_bins`` entry: records whose difficulty lies in ``[lo, hi)`` (``[lo, hi]`` for the last bin
    of the list) are sampled with ``sampling_strategy`` (:func:`sampling_indices`: ``all``, ``first:N``,
    ``end:N``, ``random:N``, ``random:P%``)."""

    lo: float
    hi: float
    sampling_strategy: str = "all"


@dataclass
class DataSource:
    """One ``datasets:`` entry of a data_config YAML.

    ``json_path`` and ``image_folder`` are resolved relative to the YAML file's folder when relative;
    ``sampling_strategy`` is one of ``all``, ``first:N``, ``end:N``, ``random:N``, N a count or ``P%``
    (:func:`sampling_indices`).
    """

    json_path: str
    image_folder: str | None = None
    sampling_strategy: str = "all"
    name: str | None = None
    difficulty_column: str | None = None
    difficulty_range: tuple[float, float] | None = None
    difficulty_bins: list[DifficultyBin] | None = None

    @property
    def uses_difficulty(self) -> bool:
        return self.difficulty_column is not None


def load_data_config(path: str) -> tuple[list[DataSource], int | None]:
    """Read a VLM-R1-style data_config YAML: ``{"datasets": [{json_path, image_folder?, sampling_strategy?}], seed?}``.

    Returns:
        ``(sources, seed)``; ``seed`` is the file's top-level ``seed`` or None.

    Raises:
        ValueError: not a mapping with a non-empty ``datasets`` list, an entry without ``json_path``, an unknown key,
            or an invalid sampling strategy (each message names the entry); a file that is not a regular file, over
            :data:`SIDE_FILE_BYTES`, not YAML or holding a key twice (:func:`load_yaml_file`).
        FileNotFoundError: the YAML file, or a ``json_path``, does not exist.
    """
    if not os.path.lexists(path):
        raise FileNotFoundError(f"data_config {path} not found")
    cfg = load_yaml_file(path, "data_config")
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
        unknown = set(entry) - set(ENTRY_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} (allowed: {', '.join(ENTRY_KEYS)})")
        json_path = os.path.normpath(os.path.join(base, str(entry["json_path"])))
        if not os.path.isfile(json_path):
            raise FileNotFoundError(f"{where}: json_path {json_path} not found")
        folder = entry.get("image_folder")
        strategy = str(entry.get("sampling_strategy", "all"))
        sampling_indices(1, strategy, 0, where=where)  # validate the syntax early
        sources.append(
            DataSource(
                json_path,
                os.path.normpath(os.path.join(base, str(folder))) if folder else None,
                strategy,
                entry.get("name"),
                *_difficulty_keys(entry, where),
            )
        )
    seed = cfg.get("seed")  # the flags' rule (groundwork.argtypes): an integer, not 'abc', 1.5, true or a list
    return sources, checked_value(SEED, seed, f"{path}: seed") if seed is not None else None


def sampling_indices(n: int, strategy: str, seed: int, *, where: str = "") -> list[int]:
    """Indices of the ``n`` records that ``strategy`` keeps, in record order (random ones are sorted).

    Upstream VLM-R1's data-config rule (om-ai-lab/VLM-R1 ``src/open-r1-multimodal/src/open_r1/grpo_rec.py:128-143`` at
    90052f4): ``all``; ``first:N`` (the first N); ``end:N`` (the last N; ``end:0`` keeps **all** records, as upstream's
    ``records[-0:]`` does); ``random:N`` (N chosen with ``random.Random(seed)``: upstream shuffles unseeded, so only
    the count can match); a count may be a percentage for every kind, ``first:P%`` / ``end:P%`` / ``random:P%``, an
    integer ``P`` giving ``ceil(P * n / 100)`` records (upstream's ``math.ceil(int(P) * n / 100)``). A count above ``n``
    keeps all ``n`` (the caller reports it), as upstream's slicing does.

    Refused where upstream would crash or do something no config means: an unknown kind, a negative or non-integer
    count or percentage (upstream: ``int()`` raises, or a negative slice drops records from the other end).

    Raises:
        ValueError: an unknown strategy or a malformed count (naming ``where``).
    """
    import random

    kind, _, arg = strategy.partition(":")
    if kind == "all" and not arg:
        return list(range(n))
    if kind not in ("first", "end", "random") or not arg:
        raise ValueError(
            f"{where}: unknown sampling_strategy {strategy!r} (all, first:N, end:N, random:N, with N a "
            "count or an integer percentage P%)"
        )
    digits = arg[:-1] if arg.endswith("%") else arg
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{where}: malformed sampling_strategy {strategy!r} (a count or an integer percentage P%)")
    k = -(-int(digits) * n // 100) if arg.endswith("%") else int(digits)  # ceil, in integers
    if kind == "end" and k == 0:
        return list(range(n))  # upstream: records[-0:] is every record
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


# --------------------------------------------------------------------------------------------------------------------
# difficulty-aware mixtures (our extension of the data_config entry; columns written by `gui-grounding difficulty`)

#: the keys a ``datasets:`` entry may hold: upstream VLM-R1's (``json_path``, ``image_folder``,
#: ``sampling_strategy``), the name, and ours for difficulty (:func:`difficulty_indices`)
ENTRY_KEYS = (
    "json_path",
    "image_folder",
    "sampling_strategy",
    "name",
    "difficulty_column",
    "difficulty_range",
    "difficulty_bins",
)
#: the difficulty column read when ``difficulty_range`` / ``difficulty_bins`` are given without ``difficulty_column``
DEFAULT_DIFFICULTY_COLUMN = "pass_at_k"
#: seed offset between bins: bin ``b`` of a source seeded ``s`` samples with seed ``s + BIN_SEED_STRIDE * (b + 1)``
BIN_SEED_STRIDE = 1_000_003
#: why a record of a difficulty-keyed source is left out before any bin or range (counted, warned)
DIFFICULTY_REJECTS = {
    "no_difficulty": "the record has no difficulty value (key absent or null)",
    "bad_difficulty": "the difficulty value is not a finite number within +-1e15 (a string, a bool, a list, NaN)",
}


def _number_pair(value, where: str, what: str) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"{where}: {what} must be a list [lo, hi] of two numbers, got {value!r}")
    lo, hi = (bounded_number(v, -MAX_COUNT, MAX_COUNT) for v in value)
    if lo is None or hi is None or lo > hi:
        raise ValueError(f"{where}: {what} must be [lo, hi], two finite numbers with lo <= hi, got {value!r}")
    return lo, hi


def _difficulty_keys(entry: dict, where: str) -> tuple:
    """``(difficulty_column, difficulty_range, difficulty_bins)`` of a ``datasets:`` entry (all None without them).

    Raises:
        ValueError: a column that is not a non-empty string, a range that is not ``[lo, hi]`` with ``lo <= hi``,
            bins that are not a non-empty list of ``{range: [lo, hi], sampling_strategy?}`` in increasing,
            non-overlapping order, or a bin's strategy :func:`sampling_indices` refuses (naming the entry).
    """
    if not any(k in entry for k in ("difficulty_column", "difficulty_range", "difficulty_bins")):
        return None, None, None
    column = entry.get("difficulty_column", DEFAULT_DIFFICULTY_COLUMN)
    if not isinstance(column, str) or not column.strip():
        raise ValueError(f"{where}: difficulty_column must be a column name, got {column!r}")
    span = _number_pair(entry["difficulty_range"], where, "difficulty_range") if "difficulty_range" in entry else None
    bins = None
    if "difficulty_bins" in entry:
        raw = entry["difficulty_bins"]
        if not isinstance(raw, list) or not raw:
            raise ValueError(f"{where}: difficulty_bins must be a non-empty list of {{range: [lo, hi], ...}}")
        bins = []
        for b, item in enumerate(raw):
            at = f"{where}: difficulty_bins[{b}]"
            if not isinstance(item, dict) or "range" not in item or set(item) - {"range", "sampling_strategy"}:
                raise ValueError(f"{at}: expected {{range: [lo, hi], sampling_strategy: S}}, got {item!r}")
            lo, hi = _number_pair(item["range"], at, "range")
            strategy = str(item.get("sampling_strategy", "all"))
            sampling_indices(1, strategy, 0, where=at)  # validate the syntax early
            if bins and lo < bins[-1].hi:
                raise ValueError(f"{at}: bins must be in increasing order and must not overlap ({lo} < {bins[-1].hi})")
            bins.append(DifficultyBin(lo, hi, strategy))
    return column, span, bins


def column_values(dataset, name: str) -> list:
    """Every row's value of column ``name`` (a JSON-text column, :func:`json_text_columns`, is decoded; a value that
    does not decode is None), without running the dataset's transform (no image is loaded).

    Raises:
        KeyError: the dataset has no such column (the message lists the columns it has).
    """
    if name not in dataset.column_names:
        raise KeyError(f"column {name!r} not in the dataset (columns: {', '.join(sorted(dataset.column_names))})")
    values = dataset.with_format("arrow")[:].column(name).to_pylist()
    if name not in json_text_columns(dataset):
        return values
    out = []
    for v in values:
        try:
            out.append(None if v is None else strict_loads(v))
        except (ValueError, RecursionError):
            out.append(None)
    return out


def _difficulty_value(value) -> tuple[float | None, str | None]:
    if value is None:
        return None, "no_difficulty"
    number = bounded_number(value, -MAX_COUNT, MAX_COUNT)
    return (number, None) if number is not None else (None, "bad_difficulty")


def difficulty_indices(values: list, source: DataSource, seed: int, *, where: str = "") -> tuple[list[int], dict]:
    """Indices (in record order) of the records a difficulty-keyed source keeps, before its ``sampling_strategy``.

    Rule (ours; the keys extend upstream VLM-R1's ``datasets:`` entry, whose only selection is ``sampling_strategy``,
    ``grpo_rec.py:128-143`` at 90052f4):

    1. a record whose value (``values[i]``, the ``difficulty_column``) is absent/null (``no_difficulty``) or not a
       finite number (``bad_difficulty``) is left out and counted;
    2. ``difficulty_range: [lo, hi]`` keeps ``lo <= value <= hi`` (the rest counted as ``outside_range``);
    3. ``difficulty_bins``: each bin takes the records with ``lo <= value < hi`` (the last bin of the list also
       ``value == hi``) and keeps those its ``sampling_strategy`` selects (:func:`sampling_indices` over the bin's
       records in record order; random ones seeded ``seed + BIN_SEED_STRIDE * (bin + 1)``); records in no bin are
       counted as ``outside_bins``. A bin asking for more than it holds keeps all it holds (reported).

    Returns:
        ``(indices, report)``: ``report`` = ``{"column", "left_out": {reason: count}, "bins": [{"range", "strategy",
        "available", "selected"}]}``.
    """
    left_out: dict[str, int] = {}
    numbers: list[tuple[int, float]] = []
    for i, raw in enumerate(values):
        number, reason = _difficulty_value(raw)
        if reason is None and source.difficulty_range is not None:
            lo, hi = source.difficulty_range
            reason = None if lo <= number <= hi else "outside_range"
        if reason is not None:
            left_out[reason] = left_out.get(reason, 0) + 1
            continue
        numbers.append((i, number))
    report = {"column": source.difficulty_column, "left_out": left_out, "bins": []}
    if not source.difficulty_bins:
        return [i for i, _ in numbers], report
    kept: list[int] = []
    placed = 0
    last = len(source.difficulty_bins) - 1
    for b, dbin in enumerate(source.difficulty_bins):
        members = [i for i, v in numbers if dbin.lo <= v < dbin.hi or (b == last and v == dbin.hi)]
        placed += len(members)
        pick = sampling_indices(
            len(members), dbin.sampling_strategy, seed + BIN_SEED_STRIDE * (b + 1), where=f"{where} bin {b}"
        )
        kept.extend(members[j] for j in pick)
        report["bins"].append(
            {
                "range": [dbin.lo, dbin.hi],
                "strategy": dbin.sampling_strategy,
                "available": len(members),
                "selected": len(pick),
            }
        )
    if len(numbers) - placed:
        left_out["outside_bins"] = len(numbers) - placed
    return sorted(kept), report


def source_indices(dataset, source: DataSource, seed: int, *, where: str, logger) -> tuple[list[int], dict | None]:
    """The dataset rows a ``datasets:`` entry keeps: :func:`difficulty_indices` (difficulty-keyed entries, reading
    the column with :func:`column_values`), then the entry's ``sampling_strategy`` over what is left
    (:func:`sampling_indices`, seeded ``seed``). Logs what the difficulty keys left out, per reason and per bin.

    Returns:
        ``(indices, difficulty report or None)``.

    Raises:
        ValueError: the difficulty column is not in the dataset (the record key must reach the dataset as a column),
            or a malformed strategy.
    """
    if not source.uses_difficulty:
        return sampling_indices(len(dataset), source.sampling_strategy, seed, where=where), None
    try:
        values = column_values(dataset, source.difficulty_column)
    except KeyError as err:
        raise ValueError(f"{where}: difficulty_column: {err.args[0]}") from None
    pool, report = difficulty_indices(values, source, seed, where=where)
    if report["left_out"]:
        logger.warning(
            "%s: %s left out %s",
            where,
            source.difficulty_column,
            ", ".join(f"{n} {reason}" for reason, n in sorted(report["left_out"].items())),
        )
    for b in report["bins"]:
        logger.info(
            "%s: %s in [%g, %g] %s: %d / %d",
            where,
            report["column"],
            *b["range"],
            b["strategy"],
            b["selected"],
            b["available"],
        )
    pick = sampling_indices(len(pool), source.sampling_strategy, seed, where=where)
    return [pool[j] for j in pick], report


# --------------------------------------------------------------------------------------------------------------------
# per-sample loss weights (--sample_weight_column; applied by vlm_r1.trainer)

#: the generation-output key the row weights travel under (vlm_r1.trainer)
SAMPLE_WEIGHT_KEY = "sample_weight"
#: the largest weight a row may carry (ours: a hostile 1e300 must not blow the loss up; 1000x the unit weight is far
#: beyond any published weighting rule)
MAX_SAMPLE_WEIGHT = 1000.0
#: why a row is dropped by :func:`keep_weighted_rows`
WEIGHT_REJECTS = {
    "no_weight": "the row has no weight (key absent or null)",
    "bad_weight": "the weight is not a number (a string, a bool, a list, NaN)",
    "weight_out_of_range": f"the weight is negative, infinite or above {MAX_SAMPLE_WEIGHT:g}",
}


def sample_weight(value) -> tuple[float | None, str | None]:
    """``(weight, None)`` for a finite number (int or float, not a bool) in ``[0, MAX_SAMPLE_WEIGHT]``, else
    ``(None, reason)``, ``reason`` a key of :data:`WEIGHT_REJECTS`. Never raises."""
    if value is None:
        return None, "no_weight"
    if type(value) not in (int, float) or value != value:
        return None, "bad_weight"
    weight = bounded_number(value, 0.0, MAX_SAMPLE_WEIGHT)
    return (weight, None) if weight is not None else (None, "weight_out_of_range")


def keep_weighted_rows(dataset, column: str, logger):
    """``dataset`` without the rows whose ``column`` value is not a usable weight (:func:`sample_weight`), with one
    warning counting them per reason and naming the first few ``sample_id`` (or row index); ``dataset`` itself when
    every row is usable. The format/transform is kept (``Dataset.select``).

    Raises:
        ValueError: the column is not in the dataset (the record key must reach the dataset: the task must keep it
            as a pass-through column), or no row is left.
    """
    try:
        values = column_values(dataset, column)
    except KeyError as err:
        raise ValueError(f"--sample_weight_column: {err.args[0]}") from None
    keep, reasons, examples = [], {}, []
    ids = column_values(dataset, "sample_id") if "sample_id" in dataset.column_names else None
    for i, v in enumerate(values):
        _, reason = sample_weight(v)
        if reason is None:
            keep.append(i)
            continue
        reasons[reason] = reasons.get(reason, 0) + 1
        if len(examples) < 3:
            examples.append(f"{ids[i] if ids else i}: {reason}")
    if not keep:
        raise ValueError(f"--sample_weight_column {column}: no row has a usable weight ({reasons})")
    if not reasons:
        return dataset
    logger.warning(
        "--sample_weight_column %s: %d of %d rows dropped (%s), e.g. %s",
        column,
        len(values) - len(keep),
        len(values),
        ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())),
        "; ".join(examples),
    )
    return dataset.select(keep)


def row_weights(rows: list[dict], column: str, *, json_text: bool = False) -> list[float]:
    """Each row's weight (rows as TRL hands them to the trainer: dicts holding the dataset's columns). ``json_text``:
    the column is stored as JSON text (:func:`json_text_columns`: a column whose records mix kinds), each value is
    decoded first.

    Raises:
        ValueError: a row without a usable weight (:func:`keep_weighted_rows` removed those at start-up, so this
            names a row that bypassed it).
    """
    out = []
    for row in rows:
        value = row.get(column)
        if json_text and isinstance(value, str):
            try:
                value = strict_loads(value)
            except (ValueError, RecursionError):
                pass  # stays a string: bad_weight below
        weight, reason = sample_weight(value)
        if reason is not None:
            raise ValueError(f"--sample_weight_column {column}: row {row.get('sample_id', '?')}: {reason}")
        out.append(weight)
    return out
