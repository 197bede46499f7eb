"""Upstream VLM-R1's tasks: ``default`` (``grpo_jsonl.py``'s records: ``image`` + ``conversations``, the module's
question template, ``solution`` and ``accu_reward_method`` columns for the ``accuracy`` reward; upstream's ``ic``,
``odLength``, ``gui`` and ``gui_defect`` task types use it with their question template) and ``rec``
(:class:`RECTask`: upstream's REC records, conversations form or ``grpo_rec.py`` annotation form, GT box validated at
load, ``accuracy``/``format`` resolve to the REC IoU and REC format rewards).

They are plugins of the core like any other: registered under the entry-point group ``vlm_r1.tasks`` (setup.py), so
the core (``vlm_r1.tasks.TASKS``) never imports them. ``default`` is the task a run gets without ``--task_type``.

In both tasks every record key the task does not read is a pass-through column, so a reward function receives it per
rollout as upstream (column rules: :func:`vlm_r1.data.rows_to_dataset`), and a bad record is skipped with a reason
code (``--strict_data``: raised as ``file:line: reason: message``).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from groundwork import validate
from groundwork.geometry import Frame
from groundwork.records import RecordError, iter_records, lax_loads
from vlm_r1.data import rows_to_dataset, split_extras, warn_dropped
from vlm_r1.tasks import Task, load_images_transform

logger = logging.getLogger("vlm_r1.tasks")

UPSTREAM_TASK_TYPES = ("ic", "odLength", "gui", "gui_defect")  # upstream types served by DefaultTask


def upstream_turns(rec: dict | RecordError) -> tuple[Any, Any]:
    """``(human value, gpt value)`` of an upstream ``conversations`` record (only turns 0 and 1 are read, as upstream).

    Raises:
        RecordError: ``rec`` is one (an unparseable line).
        KeyError / IndexError / TypeError: no ``conversations`` list with two ``{"value": ...}`` turns.
    """
    if isinstance(rec, RecordError):
        raise rec
    return rec["conversations"][0]["value"], rec["conversations"][1]["value"]


def clean_question(human: Any) -> str:
    """The question text of an upstream human turn: every ``<image>`` tag removed and nothing else (no strip, no
    whitespace change), exactly upstream ``item['conversations'][0]['value'].replace('<image>', '')``
    (``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:979`` at 90052f4); the images go before the text in the prompt.

    Raises:
        TypeError: ``human`` is not a string (upstream's ``.replace`` would fail on it too).
    """
    if not isinstance(human, str):
        raise TypeError(f"the question (conversations[0].value) must be a string, got {type(human).__name__}")
    return human.replace("<image>", "")


def upstream_solution(value: Any) -> str:
    """Upstream's ``solution`` column from a gpt value: a string loses its ``<answer>``/``</answer>`` tags and is
    ``.strip()``-ed, any other value is ``str()``-ed (a bbox list ``[1, 2, 3, 4]`` stays ``[1, 2, 3, 4]``); then it is
    wrapped as ``<answer> {value} </answer>`` (``grpo_jsonl.py:982-987`` and ``:1002``)."""
    if isinstance(value, str):
        value = value.replace("<answer>", "").replace("</answer>", "").strip()
    else:
        value = str(value)
    return f"<answer> {value} </answer>"


class SkipRecord(Exception):
    """A record a task skips: ``reason`` is its reason code (counted), ``message`` says what is wrong."""

    def __init__(self, reason: str, message: str):
        self.reason, self.message = reason, message
        super().__init__(f"{reason}: {message}")


def question_and_answer(rec: dict) -> tuple[str, Any]:
    """``(question text, gpt value)`` of a ``conversations`` record, upstream's rules (:func:`upstream_turns`,
    :func:`clean_question`).

    Raises:
        SkipRecord: ``unparseable_record`` (no two ``{"value": ...}`` turns) or ``bad_question`` (not a string).
    """
    try:
        human, gpt = upstream_turns(rec)
    except (KeyError, IndexError, TypeError) as err:
        raise SkipRecord(
            "unparseable_record",
            f'conversations must be a list of at least two {{"from", "value"}} turns ({type(err).__name__}: {err})',
        ) from None
    try:
        return clean_question(human), gpt
    except TypeError as err:
        raise SkipRecord("bad_question", str(err)) from None


def missing_keys_message(missing: list[str], needs: str) -> str:
    """``missing key 'solution'`` / ``missing keys 'problem', 'solution'``, then what a record needs."""
    names = ", ".join(repr(k) for k in missing)
    return f"missing key{'s' if len(missing) > 1 else ''} {names} ({needs})"


def _check_text(**fields: Any) -> None:
    """Raise ``SkipRecord("bad_text")`` when a string field cannot be stored as UTF-8 (a lone surrogate escape such
    as ``"\\ud800"`` is legal JSON but not text)."""
    for name, value in fields.items():
        for text in value if isinstance(value, list) else [value]:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise SkipRecord(
                    "bad_text", f"{name} is not valid Unicode text ({err.reason} at position {err.start})"
                ) from None


def _record_id(rec: dict, ref: str) -> str:
    """A row's ``id``: the record's explicit id (``groundwork.validate.explicit_id``: null, booleans, empty strings and
    non-scalars are none), else its ``file:line`` reference (upstream wrote ``str(id)``, so a null id became "None"
    and two records shared it)."""
    sid = validate.explicit_id(rec.get("id"))
    return sid if sid is not None else ref


def check_image(path: str, checker: validate.ImageChecker) -> tuple[int, int]:
    """``(width, height)`` of the image at ``path`` in its displayed frame, checked once per image by ``checker``
    (``groundwork.validate.ImageChecker``: decoded by default, so no training run meets a broken image mid-run).

    Raises:
        SkipRecord: ``missing_image`` (message ``missing image PATH``, plus the other Unicode spelling of the name when
            that one exists: ``groundwork.validate.spelling_note``), ``not_a_file``, ``image_too_large`` or
            ``unreadable_image`` (``unreadable image PATH: ...``).
    """
    try:
        return checker.check(path)
    except validate.Invalid as err:
        if err.reason == "missing_image":
            raise SkipRecord("missing_image", f"missing image {path}{validate.spelling_note(path)}") from None
        if err.reason == "unreadable_image":
            raise SkipRecord("unreadable_image", f"unreadable image {path}: {err.message}") from None
        raise SkipRecord(err.reason, err.message) from None


def image_paths(folder: str, names: list[str], absolute: Counter, contain: bool = True) -> list[str]:
    """Paths of a record's images under ``folder`` (``groundwork.validate.resolve_path``; ``contain``: ``folder`` came
    from ``--image_folders``, so ``..`` may not climb out of it); absolute names are accepted as upstream does and
    counted in ``absolute["absolute image paths"]``.

    Raises:
        SkipRecord: ``path_outside_root`` (a relative path whose ``..`` climbs out of ``folder``) or ``not_a_file``.
    """
    out = []
    for name in names:
        try:
            out.append(validate.resolve_path(folder, name, contain=contain))
        except validate.Invalid as err:
            raise SkipRecord(err.reason, err.message) from None
        if validate.is_absolute(name):
            absolute["absolute image paths"] += 1
    return out


def _skip(err: SkipRecord, ref: str, skipped: Counter, strict: bool, first: dict) -> None:
    """Count a skipped record, or raise ``ValueError("file:line: reason: message")`` under ``--strict_data``."""
    if strict:
        raise ValueError(f"{ref}: {err.reason}: {err.message}") from err
    skipped[err.reason] += 1
    first.setdefault(err.reason, f"{ref}: {err.message}")


def _log_skipped(what: str, skipped: Counter, first: dict, kept: int, absolute: Counter | None = None) -> None:
    if absolute:
        logger.info("%s: %d absolute image path(s) accepted (as upstream)", what, absolute["absolute image paths"])
    if skipped:
        logger.warning("%s: skipped records: %s (kept %d)", what, dict(skipped), kept)
        for reason, example in first.items():
            logger.warning("%s: first %s: %s", what, reason, example)


class DefaultTask(Task):
    """Upstream VLM-R1 ``grpo_jsonl`` records: ``{"image": str | [str], "conversations": [human, gpt], ...}``.

    As upstream (``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:945-1000``): the human turn with every
    ``<image>`` removed (nothing else changed) is ``problem`` and goes into the module's question template; the gpt
    turn becomes ``solution`` = ``<answer> value </answer>`` (:func:`upstream_solution`: strings lose their answer
    tags and are stripped, other values are ``str()``-ed); ``image`` becomes ``image_path`` (always a list, each
    joined to the file's image folder); the per-file ``--reward_method`` fills ``accu_reward_method`` unless the
    record has its own (the record wins, as upstream; null counts as absent).

    Every other record key is a pass-through column that reaches the reward functions (``id`` is kept as a string,
    the record's ``file:line`` when absent). Columns follow :func:`vlm_r1.data.rows_to_dataset`: the union of all
    records' keys (upstream kept only the first line's), None where a record lacks a key, a column of mixed kinds
    stored as JSON text with a warning. Record keys named like a column the task computes (``prompt``,
    ``image_path``, ``problem``, ``solution``) or like a TRL reward keyword are dropped with a warning.

    Skipped records (counted by reason code, or ``--strict_data`` raises ``file:line: reason: message``):
    ``unparseable_record`` (not JSON / not an object / conversations without two ``{"value"}`` turns),
    ``missing_key`` (no ``conversations``), ``bad_question`` (human turn not a string), ``bad_image`` (``image`` not
    a path or a list of paths), ``missing_image``, ``bad_accu_reward_method`` (not a string), ``bad_text`` (a string
    that is not valid Unicode), and the image checks of ``groundwork.validate`` run on every image before training starts
    (decoded once each, so no run meets a broken image mid-run): ``path_outside_root`` (a relative path whose ``..``
    climbs out of the image folder; absolute paths are accepted, as upstream, and counted in the log),
    ``not_a_file`` (not a regular, non-empty file), ``image_too_large`` (over 64 Mpx, nothing decoded),
    ``unreadable_image`` (truncated or corrupt).
    """

    name = "default"
    default_reward_funcs = ("accuracy", "format")
    uses_reward_method = True
    CONSUMED = frozenset({"image", "conversations", "id", "accu_reward_method"})
    COLUMNS = frozenset({"prompt", "image_path", "problem", "solution", "accu_reward_method", "id"})

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        files = script_args.data_file_list
        folders = script_args.image_folder_list or [os.path.dirname(os.path.abspath(f)) for f in files]
        methods = script_args.reward_method_list or ["default"] * len(files)
        template = vlm_module.get_question_template(script_args.task_type)
        rows, extras, skipped, first, dropped, absolute = [], [], Counter(), {}, Counter(), Counter()
        checker = validate.ImageChecker("decode", limits=validate.module_limits(vlm_module))
        budget = self.budget(processing_class, vlm_module)
        for path, folder, method in zip(files, folders, methods, strict=True):
            for ref, _, rec in iter_records(path):
                try:
                    row = self._row(
                        rec,
                        ref,
                        folder,
                        method,
                        template,
                        checker,
                        absolute,
                        script_args.image_folder_list is not None,
                        budget,
                    )
                except SkipRecord as err:
                    _skip(err, ref, skipped, script_args.strict_data, first)
                    continue
                rows.append(row)
                extras.append(split_extras(rec, self.CONSUMED, self.COLUMNS, dropped))
        _log_skipped(self.name, skipped, first, len(rows), absolute)
        warn_dropped(dropped, self.name, logger)
        if not rows:
            raise ValueError(f"no usable records in {files} (skipped: {dict(skipped)})")
        return rows_to_dataset(rows, extras, what=self.name, logger=logger).with_transform(
            load_images_transform(budget)
        )

    @staticmethod
    def _row(
        rec: dict | RecordError,
        ref: str,
        folder: str,
        method: str,
        template: str,
        checker: validate.ImageChecker,
        absolute: Counter,
        contain: bool = True,
        budget: Any = None,
    ) -> dict:
        if isinstance(rec, RecordError):
            raise SkipRecord(rec.reason, rec.message)
        if "conversations" not in rec:
            raise SkipRecord(
                "missing_key",
                missing_keys_message(
                    ["conversations"], "a grpo_jsonl record needs 'conversations': [human turn, gpt turn]"
                ),
            )
        question, gpt = question_and_answer(rec)
        images = rec.get("image")
        images = [images] if isinstance(images, str) else ([] if images is None else images)
        if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
            raise SkipRecord("bad_image", f"image must be a path or a list of paths, got {str(rec.get('image'))[:80]}")
        _check_text(image=images)
        paths = image_paths(folder, images, absolute, contain)
        own = rec.get("accu_reward_method")
        if own is not None and not isinstance(own, str):
            raise SkipRecord("bad_accu_reward_method", f"accu_reward_method must be a string, got {own!r:.80}")
        row = {
            "prompt": [{"role": "user", "content": template.format(Question=question)}],
            "image_path": paths,
            "problem": question,
            "solution": upstream_solution(gpt),
            "accu_reward_method": own if own is not None else method,
            "id": _record_id(rec, ref),
        }
        _check_text(
            image=paths,
            question=question,
            solution=row["solution"],
            id=row["id"],
            accu_reward_method=row["accu_reward_method"],
        )
        for p in paths:
            width, height = check_image(p, checker)
            if budget is not None:
                try:  # the image must be sendable under the run's budget (a too-thin one is resized twice or refused)
                    budget.size_sent(width, height)
                except ValueError as err:
                    raise SkipRecord("image_unsupported", str(err)) from None
        return row

    def sft_completion(self, row: dict) -> str:
        """SFT target: the record's gpt answer as the ``solution`` column holds it (``<answer> ... </answer>``)."""
        return row["solution"]


def parse_rec_gt(value: Any) -> list[float]:
    """The ground-truth box of an upstream REC record's gpt turn, ``[x1, y1, x2, y2]`` in original-image pixels.

    Accepts a JSON list of 4 numbers, or a string holding one (optionally wrapped in ``<answer> </answer>``, as
    upstream's ``solution`` column is). Upstream parsed this inside the reward with ``json.loads`` outside any try, so
    one bad label crashed training; here it is checked once, at load time.

    Raises:
        ValueError: not JSON, not 4 finite numbers within +-1e7 (``groundwork.validate.is_coord``: booleans are not
            numbers), or ``x2 <= x1`` / ``y2 <= y1``.
    """
    if isinstance(value, str):
        text = value.replace("<answer>", " ").replace("</answer>", " ").strip()
        try:
            value = lax_loads(text)  # a key twice is an error here too
        except RecursionError:
            raise ValueError(f"gt box {text[:60]!r} is not JSON: nested too deeply") from None
        except ValueError as err:  # JSONDecodeError, or an integer with too many digits
            raise ValueError(f"gt box {text[:60]!r} is not JSON: {err}") from err
    if (
        not isinstance(value, list)
        or len(value) != 4
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"gt box must be a list of 4 numbers [x1, y1, x2, y2], got {validate.short_repr(value, 60)}")
    if not all(validate.is_coord(v) for v in value):
        raise ValueError(
            f"gt box {validate.short_repr(value, 60)} has a non-finite value or one beyond +-{validate.MAX_COORD:g}"
        )
    box = [float(v) for v in value]
    if box[2] <= box[0] or box[3] <= box[1]:
        raise ValueError(f"gt box {box} has no area (needs x2 > x1 and y2 > y1)")
    return box


REC_KEYS = ("image", "problem", "solution")  # upstream grpo_rec.py annotation records (rec_jsons_processed/*.json)


class RECTask(Task):
    """Upstream VLM-R1 REC (referring expression comprehension) on our core: ``--task_type rec``.

    Two record forms, in ``.jsonl`` or ``.json`` (a JSON list) files alike (:func:`groundwork.records.iter_records`):

    * ``grpo_jsonl`` conversations (``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py:945-1000``)::

        {"id": 1, "image": "coco/x.jpg", "conversations": [
            {"from": "human", "value": "<image>Please provide the bounding box coordinate of the region this sentence
             describes: the man on the left."},
            {"from": "gpt", "value": [12.5, 30.0, 210.3, 400.9]}]}

      ``problem`` is the human turn with ``<image>`` removed and nothing else changed (upstream ``grpo_jsonl.py:979``);
    * ``grpo_rec.py`` annotation records (upstream's published ``rec_jsons_processed/*.json``, read by
      ``LazySupervisedDataset``, ``src/open-r1-multimodal/src/open_r1/grpo_rec.py:92-195``)::

        {"image": "train2014/COCO_train2014_000000098304.jpg", "problem": "the man on the left",
         "solution": [12.5, 30.0, 210.3, 400.9], "normal_caption": "...", ...}

      ``problem`` is used unchanged (``grpo_rec.py:169``: ``QUESTION_TEMPLATE.format(Question=example["problem"])``).
      A record with ``conversations`` is read as the first form.

    ``image`` is one path (a string or a one-element list) relative to the file's ``--image_folders`` entry (the
    ``--image_root`` of ``grpo_rec.py`` fills it); the box (gpt value / ``solution``) is in ORIGINAL image pixels, a list
    or a string holding one, optionally in ``<answer>`` tags (:func:`parse_rec_gt`).

    Rows: ``prompt`` (the module's ``rec`` question template, as upstream), ``image_path`` (the original image, resized
    once by the run's budget, :func:`load_images_transform`; the same size the processor itself would pick), ``problem``, ``solution`` (``<answer> [x1, y1, x2, y2] </answer>``),
    ``gt_bbox`` (original pixels, floats), ``image_size`` ``[W, H]`` (original pixels), ``resized_size`` ``[W', H']``
    (the frame the model answers in: ``vlm_module.answer_frame_size`` under the run's pixel budget, i.e. the
    smart_resize frame for Qwen2/2.5-VL, ``[1000, 1000]`` for 0-1000 families) and ``id`` (the record's ``id`` as a string, else its ``file:line`` / ``file:[index]``). Every other
    record key (``normal_caption``, ...) is a pass-through column, with the column rules of
    :func:`vlm_r1.data.rows_to_dataset`; keys named like the task's columns are dropped with a warning.

    Rewards: the defaults ``accuracy format`` resolve to ``rec_iou`` / ``rec_format`` (``reward_aliases``), which is
    what upstream's ``--is_reward_customized_from_vlm_module true --task_type rec`` selected; that flag gives the same
    functions here (``Qwen2VLModule.select_reward_func``).

    Bad records are skipped and counted by reason code, or raise ``ValueError("file:line: reason: message")`` under
    ``--strict_data``: ``unparseable_record`` (not JSON / not an object / conversations without two turns),
    ``missing_key`` (neither ``conversations`` nor all of ``image``, ``problem``, ``solution``; the message names the
    missing keys, e.g. ``missing key 'solution'``), ``bad_question`` (question not a string), ``needs_one_image``,
    ``missing_image``, ``unreadable_image``, ``path_outside_root``, ``not_a_file``, ``image_too_large`` (the image
    checks of :class:`DefaultTask`: every image decoded once before training; sizes in the displayed frame, EXIF
    orientation applied), ``bad_image_size`` (aspect ratio > 200, which smart_resize rejects),
    ``bad_gt_box``, ``bad_text`` (a string that is not valid Unicode). Upstream ``grpo_rec.py`` silently replaced a
    record with a missing image by a random other one (``grpo_rec.py:180-184``); here it is counted.
    """

    name = "rec"
    default_reward_funcs = ("accuracy", "format")
    reward_aliases = {"accuracy": "rec_iou", "format": "rec_format"}
    COLUMNS = frozenset({"prompt", "image_path", "problem", "solution", "gt_bbox", "image_size", "resized_size", "id"})
    NEEDS = "a REC record needs 'conversations' (grpo_jsonl form) or all of 'image', 'problem', 'solution'"

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        files = script_args.data_file_list
        folders = script_args.image_folder_list or [os.path.dirname(os.path.abspath(f)) for f in files]
        # original (W, H) in the displayed frame; each image decoded once (REC files reuse images many times)
        reader = _RECRows(
            template=vlm_module.get_question_template("rec"),
            checker=validate.ImageChecker("decode", limits=validate.module_limits(vlm_module)),
            budget=self.budget(processing_class, vlm_module),
            vlm_module=vlm_module,
            contain=script_args.image_folder_list is not None,
            needs=self.NEEDS,
        )
        rows, extras, skipped, first, dropped = [], [], Counter(), {}, Counter()
        for path, folder in zip(files, folders, strict=True):
            for ref, _, rec in iter_records(path):
                try:
                    row, consumed = reader.row(rec, ref, folder)
                except SkipRecord as err:
                    _skip(err, ref, skipped, script_args.strict_data, first)
                    continue
                rows.append(row)
                extras.append(split_extras(rec, consumed, self.COLUMNS, dropped))
        _log_skipped(self.name, skipped, first, len(rows), reader.absolute)
        warn_dropped(dropped, self.name, logger)
        if not rows:
            raise ValueError(f"no usable REC records in {files} (skipped: {dict(skipped)})")
        return rows_to_dataset(rows, extras, what=self.name, logger=logger).with_transform(
            load_images_transform(reader.budget)
        )


@dataclass
class _RECRows:
    """The per-record step of :meth:`RECTask.build_dataset`: one REC record -> its row and the record keys it consumed,
    or :class:`SkipRecord` with the reason codes of :class:`RECTask` (checked in that order: the record's form, its
    one image, its text, the image's path and pixels, the answer frame, the GT box).

    ``template``: the module's ``rec`` question template; ``checker``: the image checks (each image decoded once);
    ``budget``: the run's pixel budget; ``contain``: image paths must stay inside their folder (``--image_folders``
    given); ``needs``: the ``missing_key`` message's hint; ``absolute``: absolute image paths seen (counted, logged).
    """

    template: str
    checker: validate.ImageChecker
    budget: Any
    vlm_module: Any
    contain: bool
    needs: str
    absolute: Counter = field(default_factory=Counter)

    def record_form(self, rec: dict | RecordError) -> tuple[Any, Any, frozenset]:
        """``(question, gt answer, consumed keys)`` of a record in either form: ``conversations`` (grpo_jsonl) or
        ``image``/``problem``/``solution`` (``grpo_rec.py``'s annotations)."""
        if isinstance(rec, RecordError):
            raise SkipRecord(rec.reason, rec.message)
        if "conversations" in rec:
            question, gpt = question_and_answer(rec)
            return question, gpt, frozenset({"image", "conversations", "id"})
        missing = [k for k in REC_KEYS if k not in rec]
        if missing:
            raise SkipRecord("missing_key", missing_keys_message(missing, self.needs))
        question, gpt = rec["problem"], rec["solution"]
        if not isinstance(question, str):
            raise SkipRecord("bad_question", f"'problem' must be a string, got {type(question).__name__}")
        return question, gpt, frozenset({"image", "problem", "solution", "id"})

    def frame(self, image_path: str) -> Frame:
        """The image's original size (displayed frame) and the frame the family answers in: smart_resize (Qwen), or a
        0-1000 grid (InternVL), under the run's budget.

        Raises:
            SkipRecord: ``bad_image_size``: smart_resize rejects an aspect ratio > 200, or the image is too thin for
                the budget (not sendable under it).
        """
        width, height = check_image(image_path, self.checker)
        try:
            self.budget.size_sent(width, height)
            return Frame(width, height, *self.vlm_module.answer_frame_size(self.budget, width, height))
        except ValueError as err:
            raise SkipRecord("bad_image_size", str(err)) from None

    def row(self, rec: dict | RecordError, ref: str, folder: str) -> tuple[dict, frozenset]:
        """The row of ``rec`` (read at ``ref``, images relative to ``folder``) and the keys it consumed."""
        question, gpt, consumed = self.record_form(rec)
        images = rec.get("image")
        images = [images] if isinstance(images, str) else images
        if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], str):
            got = str(rec.get("image"))[:80]
            raise SkipRecord("needs_one_image", f"REC needs exactly one image, got image={got}")
        record_id = _record_id(rec, ref)
        _check_text(image=images[0], question=question, id=record_id)
        (image_path,) = image_paths(folder, images, self.absolute, self.contain)
        frame = self.frame(image_path)
        try:
            box = parse_rec_gt(gpt)
        except ValueError as err:
            raise SkipRecord("bad_gt_box", str(err)) from None
        row = {
            "prompt": [{"role": "user", "content": self.template.format(Question=question)}],
            "image_path": image_path,
            "problem": question,
            "solution": f"<answer> {json.dumps(box, allow_nan=False)} </answer>",
            "gt_bbox": box,
            "image_size": [frame.width, frame.height],
            "resized_size": [frame.resized_width, frame.resized_height],
            "id": record_id,
        }
        return row, consumed
