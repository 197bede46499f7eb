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
        unknown = set(entry) - {"json_path", "image_folder", "sampling_strategy", "name"}
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {sorted(unknown)} (allowed: json_path, image_folder, sampling_strategy, name)"
            )
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
