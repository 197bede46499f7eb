"""Task plugins: how data records become GRPO prompts and reward columns.

A task turns the ``--data_file_paths`` records into a ``datasets.Dataset`` whose rows hold ``prompt`` (chat
messages with string contents; TRL inserts the image placeholders before the user text), ``image`` (a PIL image,
attached lazily) and any columns its rewards read. Tasks are chosen by ``--task_type``:

* built in: ``default`` (upstream VLM-R1 grpo_jsonl semantics: ``image`` + ``conversations`` records, the module's
  question template, ``solution`` and ``accu_reward_method`` columns for the ``accuracy`` reward). Upstream's
  ``rec``, ``ic``, ``odLength``, ``gui`` and ``gui_defect`` task types use this task with their question template;
* plugins: the entry-point group ``vlm_r1.tasks`` (``gui_grounding`` registers ``gui_grounding``).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from importlib.metadata import entry_points
from typing import Any

from vlm_r1.data import RecordError, iter_records

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vlm_r1.tasks"
UPSTREAM_TASK_TYPES = ("rec", "ic", "odLength", "gui", "gui_defect")


class Task:
    """Base class of a task plugin."""

    name = "base"
    default_reward_funcs: tuple[str, ...] = ()
    uses_reward_method = False  # reads --reward_method
    uses_prompt_mode = False  # reads --prompt_mode

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        """Return a ``datasets.Dataset`` with a ``prompt`` column and lazily loaded ``image``/``images``.

        Reads ``script_args.data_file_list`` / ``script_args.image_folder_list``.
        """
        raise NotImplementedError

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
                    if isinstance(rec, RecordError):
                        raise rec
                    human, gpt = rec["conversations"][0]["value"], rec["conversations"][1]["value"]
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
                question = " ".join(str(human).replace("<image>", " ").split())
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


BUILTIN_TASKS = {"default": DefaultTask, **{t: DefaultTask for t in UPSTREAM_TASK_TYPES}}


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
