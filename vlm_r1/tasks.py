"""Task plugins: how data records become GRPO prompts and reward columns.

A task turns the ``--data_file_paths`` records into a ``datasets.Dataset`` whose rows hold ``prompt`` (chat
messages with string contents; TRL inserts the image placeholders before the user text), ``image`` (a PIL image,
attached lazily) and any columns its rewards read. Tasks are chosen by ``--task_type``:

* built in: ``default`` (upstream VLM-R1 grpo_jsonl semantics: ``image`` + ``conversations`` records, the module's
  question template, ``solution`` and ``accu_reward_method`` columns for the ``accuracy`` reward). Upstream's
  ``ic``, ``odLength``, ``gui`` and ``gui_defect`` task types use this task with their question template;
  ``rec`` (:class:`RECTask`: upstream's REC records, GT box validated at load, ``accuracy``/``format`` resolve to the
  REC IoU and REC format rewards);
* plugins: the entry-point group ``vlm_r1.tasks`` (``gui_grounding`` registers ``gui_grounding``).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from importlib.metadata import entry_points
from typing import Any

from vlm_r1.data import RecordError, iter_records

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vlm_r1.tasks"
UPSTREAM_TASK_TYPES = ("ic", "odLength", "gui", "gui_defect")  # upstream types served by DefaultTask


class Task:
    """Base class of a task plugin."""

    name = "base"
    default_reward_funcs: tuple[str, ...] = ()
    uses_reward_method = False  # reads --reward_method
    uses_prompt_mode = False  # reads --prompt_mode
    # --reward_funcs name -> registry name used instead for this task (e.g. rec: accuracy -> rec_iou)
    reward_aliases: dict[str, str] = {}

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        """Return a ``datasets.Dataset`` with a ``prompt`` column and lazily loaded ``image``/``images``.

        Reads ``script_args.data_file_list`` / ``script_args.image_folder_list``.
        """
        raise NotImplementedError

    def sft_completion(self, row: dict) -> str:
        """The target answer of one dataset row for ``python -m vlm_r1.sft`` (in the frame the prompt asks for).

        Raises:
            NotImplementedError: the task defines no SFT target.
        """
        raise NotImplementedError(f"task {self.name!r} defines no SFT target (sft_completion); SFT is available for "
                                  "gui_grounding and default")  # fmt: skip

    def eval_callbacks(self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any,
                       eval_dataset: Any) -> list:  # fmt: skip
        """Trainer callbacks that compute the task's own held-out metric (default: none)."""
        return []


def load_images_transform(resize_column: str | None = None):
    """A ``Dataset.with_transform`` function adding PIL images from the ``image_path`` column.

    ``image_path`` holds a path or a list of paths. One path gives an ``image`` column; a list gives ``images``.
    With ``resize_column`` (a ``[width, height]`` per row), each image is resized to that size once, here, so the
    processor's own resize is the identity. Images are converted to RGB.
    """
    from PIL import Image

    def load(path: str, size) -> Image.Image:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if size is not None and tuple(im.size) != tuple(size):
                im = im.resize((int(size[0]), int(size[1])), Image.Resampling.BICUBIC)
            return im

    def transform(batch: dict) -> dict:
        sizes = batch[resize_column] if resize_column else [None] * len(batch["image_path"])
        paths = batch["image_path"]
        if paths and isinstance(paths[0], list):
            batch["images"] = [[load(p, s) for p in ps] for ps, s in zip(paths, sizes, strict=True)]
        else:
            batch["image"] = [load(p, s) for p, s in zip(paths, sizes, strict=True)]
        return batch

    return transform


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
    """The human turn with every ``<image>`` tag removed and whitespace collapsed (images go before the text)."""
    return " ".join(str(human).replace("<image>", " ").split())


class DefaultTask(Task):
    """Upstream VLM-R1 ``grpo_jsonl`` records: ``{"image": str | [str], "conversations": [human, gpt], ...}``.

    The human turn (``<image>`` tags removed) is wrapped in the module's question template; the gpt turn becomes
    ``solution`` = ``<answer> value </answer>`` (non-string values are ``json.dumps``-ed, e.g. a bbox list). The
    per-file ``--reward_method`` (or a per-line ``accu_reward_method``) fills ``accu_reward_method``. Unlike
    upstream, every row keeps every column (no first-row schema), and bad lines are skipped and counted.
    """

    name = "default"
    default_reward_funcs = ("accuracy", "format")
    uses_reward_method = True

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        from datasets import Dataset

        files = script_args.data_file_list
        folders = script_args.image_folder_list or [os.path.dirname(os.path.abspath(f)) for f in files]
        methods = script_args.reward_method_list or ["default"] * len(files)
        template = vlm_module.get_question_template(script_args.task_type)
        rows, skipped = [], Counter()
        for path, folder, method in zip(files, folders, methods, strict=True):
            for ref, _, rec in iter_records(path):
                try:
                    human, gpt = upstream_turns(rec)
                except (RecordError, KeyError, IndexError, TypeError) as err:
                    if script_args.strict_data:
                        raise ValueError(f"{ref}: unparseable record: {err}") from err
                    skipped["unparseable_record"] += 1
                    continue
                images = rec.get("image")
                images = [images] if isinstance(images, str) else (images or [])
                paths = [os.path.join(folder, p) for p in images]
                missing = [p for p in paths if not os.path.isfile(p)]
                if missing:
                    if script_args.strict_data:
                        raise FileNotFoundError(f"{ref}: missing image {missing[0]}")
                    skipped["missing_image"] += 1
                    continue
                question = clean_question(human)
                answer = gpt if isinstance(gpt, str) else json.dumps(gpt)
                answer = answer.replace("<answer>", "").replace("</answer>", "").strip()
                rows.append({
                    "prompt": [{"role": "user", "content": template.format(Question=question)}],
                    "image_path": paths,
                    "problem": question,
                    "solution": f"<answer> {answer} </answer>",
                    "accu_reward_method": rec.get("accu_reward_method", method),
                    "id": str(rec.get("id", ref)),
                })  # fmt: skip
        if skipped:
            logger.warning("skipped records: %s", dict(skipped))
        if not rows:
            raise ValueError(f"no usable records in {files} (skipped: {dict(skipped)})")
        return Dataset.from_list(rows).with_transform(load_images_transform())

    def sft_completion(self, row: dict) -> str:
        """SFT target: the record's gpt answer as the ``solution`` column holds it (``<answer> ... </answer>``)."""
        return row["solution"]


def parse_rec_gt(value: Any) -> list[float]:
    """The ground-truth box of an upstream REC record's gpt turn, ``[x1, y1, x2, y2]`` in original-image pixels.

    Accepts a JSON list of 4 numbers, or a string holding one (optionally wrapped in ``<answer> </answer>``, as
    upstream's ``solution`` column is). Upstream parsed this inside the reward with ``json.loads`` outside any try, so
    one bad label crashed training; here it is checked once, at load time.

    Raises:
        ValueError: not JSON, not 4 finite numbers (booleans are not numbers), or ``x2 <= x1`` / ``y2 <= y1``.
    """
    if isinstance(value, str):
        text = value.replace("<answer>", " ").replace("</answer>", " ").strip()
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"gt box {text[:60]!r} is not JSON: {err}") from err
    if (not isinstance(value, list) or len(value) != 4
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):  # fmt: skip
        raise ValueError(f"gt box must be a list of 4 numbers [x1, y1, x2, y2], got {str(value)[:60]}")
    box = [float(v) for v in value]
    if not all(math.isfinite(v) for v in box):
        raise ValueError(f"gt box {box} has a non-finite value")
    if box[2] <= box[0] or box[3] <= box[1]:
        raise ValueError(f"gt box {box} has no area (needs x2 > x1 and y2 > y1)")
    return box


class RECTask(Task):
    """Upstream VLM-R1 REC (referring expression comprehension) on our core: ``--task_type rec``.

    Records (upstream ``grpo_jsonl`` REC JSONL, e.g. its RefCOCO files)::

        {"id": 1, "image": "coco/x.jpg", "conversations": [
            {"from": "human", "value": "<image>Please provide the bounding box coordinate of the region this sentence
             describes: the man on the left."},
            {"from": "gpt", "value": [12.5, 30.0, 210.3, 400.9]}]}

    ``image`` is one path (a string or a one-element list) relative to the file's ``--image_folders`` entry; the gpt
    value is the box in ORIGINAL image pixels, a list or a string (see :func:`parse_rec_gt`).

    Rows: ``prompt`` (the module's ``rec`` question template, as upstream), ``image_path`` (the original image, resized
    by the processor itself as upstream), ``problem``, ``solution`` (``<answer> [x1, y1, x2, y2] </answer>``),
    ``gt_bbox`` (original pixels, floats), ``image_size`` ``[W, H]`` (original pixels), ``resized_size`` ``[W', H']``
    (the processor's smart_resize of ``image_size`` with ``vlm_module.get_image_resize_params``: the frame the model
    answers in) and ``id``.

    Rewards: the defaults ``accuracy format`` resolve to ``rec_iou`` / ``rec_format`` (``reward_aliases``), which is
    what upstream's ``--is_reward_customized_from_vlm_module true --task_type rec`` selected; that flag gives the same
    functions here (``Qwen2VLModule.select_reward_func``).

    Bad records (unparseable line, no two turns, not exactly one image, missing or unreadable image, image too
    elongated for smart_resize (aspect ratio > 200), bad GT box) are skipped and counted by reason, or raise with
    ``file:line`` and the reason under ``--strict_data``.
    """

    name = "rec"
    default_reward_funcs = ("accuracy", "format")
    reward_aliases = {"accuracy": "rec_iou", "format": "rec_format"}

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        from datasets import Dataset
        from PIL import Image

        from vlm_r1.geometry import Frame

        files = script_args.data_file_list
        folders = script_args.image_folder_list or [os.path.dirname(os.path.abspath(f)) for f in files]
        template = vlm_module.get_question_template("rec")
        factor, min_px, max_px = vlm_module.get_image_resize_params(processing_class)
        sizes: dict[str, tuple[int, int] | str] = {}  # image path -> original (W, H), or why it cannot be read
        rows, skipped = [], Counter()

        def image_size(path: str) -> tuple[int, int]:
            """Original ``(W, H)`` of ``path`` from its header, cached (REC files reuse images many times)."""
            if path not in sizes:
                try:
                    with Image.open(path) as im:
                        sizes[path] = (int(im.width), int(im.height))
                except (OSError, ValueError) as err:  # PIL.UnidentifiedImageError is an OSError
                    sizes[path] = f"unreadable image {path}: {err}"
            if isinstance(sizes[path], str):
                raise OSError(sizes[path])
            return sizes[path]

        for path, folder in zip(files, folders, strict=True):
            for ref, _, rec in iter_records(path):
                reason, err = None, None
                try:
                    reason = "unparseable_record"
                    human, gpt = upstream_turns(rec)
                    reason = "needs_one_image"
                    images = rec.get("image")
                    images = [images] if isinstance(images, str) else images
                    if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], str):
                        raise ValueError(f"REC needs exactly one image, got image={str(rec.get('image'))[:80]}")
                    image_path = os.path.join(folder, images[0])
                    reason = "missing_image"
                    if not os.path.isfile(image_path):
                        raise FileNotFoundError(f"missing image {image_path}")
                    reason = "unreadable_image"
                    width, height = image_size(image_path)
                    reason = "bad_image_size"  # smart_resize rejects an aspect ratio > 200
                    frame = Frame.for_image(width, height, factor=factor, min_pixels=min_px, max_pixels=max_px)
                    reason = "bad_gt_box"
                    box = parse_rec_gt(gpt)
                except (RecordError, KeyError, IndexError, TypeError, ValueError, OSError) as e:
                    err = e
                if err is not None:
                    if script_args.strict_data:
                        raise ValueError(f"{ref}: {reason}: {err}") from err
                    skipped[reason] += 1
                    continue
                question = clean_question(human)
                rows.append({
                    "prompt": [{"role": "user", "content": template.format(Question=question)}],
                    "image_path": image_path,
                    "problem": question,
                    "solution": f"<answer> {json.dumps(box)} </answer>",
                    "gt_bbox": box,
                    "image_size": [frame.width, frame.height],
                    "resized_size": [frame.resized_width, frame.resized_height],
                    "id": str(rec.get("id", ref)),
                })  # fmt: skip
        if skipped:
            logger.warning("rec: skipped records: %s (kept %d)", dict(skipped), len(rows))
        if not rows:
            raise ValueError(f"no usable REC records in {files} (skipped: {dict(skipped)})")
        return Dataset.from_list(rows).with_transform(load_images_transform())


BUILTIN_TASKS = {"default": DefaultTask, "rec": RECTask, **{t: DefaultTask for t in UPSTREAM_TASK_TYPES}}


def get_task(task_type: str | None) -> Task:
    """The task for ``--task_type`` (None -> ``default``).

    Raises:
        ValueError: unknown task type; the message lists built-in and installed ones.
    """
    name = task_type or "default"
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name in eps:
        return eps[name].load()()
    if name in BUILTIN_TASKS:
        return BUILTIN_TASKS[name]()
    raise ValueError(f"unknown task_type {name!r}; available: {', '.join(sorted({*BUILTIN_TASKS, *eps}))}")
