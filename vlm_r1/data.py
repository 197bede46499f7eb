"""Reading data files (JSON / JSONL, record by record, with ``file:line`` references) and data mixtures.

``iter_records`` is used by every task (``vlm_r1.tasks``, ``gui_grounding.schema``) so bad lines are reported the same
way everywhere. ``load_data_config`` / ``sampling_indices`` implement VLM-R1's ``data_config`` YAML mixtures
(``--data_config``), applied per source by ``vlm_r1.grpo_jsonl``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass


class RecordError(ValueError):
    """An unparseable record; ``ref`` names it as ``file:line`` (JSONL, 1-based) or ``file:[index]`` (JSON)."""

    def __init__(self, ref: str, message: str):
        self.ref, self.message = ref, message
        super().__init__(f"{ref}: {message}")


def iter_records(path: str) -> Iterator[tuple[str, int, dict | RecordError]]:
    """Yield ``(ref, index, record_or_error)`` for each record of a ``.json`` or ``.jsonl`` file.

    ``index`` is the 0-based position among non-blank records. A line that is not JSON, or not a JSON object, yields a
    :class:`RecordError` in place of the record, so the caller can count it and go on (or raise it in strict mode).
    A ``.json`` file that does not parse at all yields one error.
    """
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as err:
                yield path, 0, RecordError(path, f"invalid JSON: {err}")
                return
        for i, item in enumerate(data if isinstance(data, list) else [data]):
            ref = f"{path}:[{i}]"
            yield ref, i, item if isinstance(item, dict) else RecordError(ref, "not a JSON object")
        return
    with open(path, encoding="utf-8") as f:
        index = 0
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            ref = f"{path}:{lineno}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as err:
                yield ref, index, RecordError(ref, f"invalid JSON: {err}")
            else:
                yield ref, index, item if isinstance(item, dict) else RecordError(ref, "not a JSON object")
            index += 1


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
