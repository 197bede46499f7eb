"""The ``gui_grounding`` task plugin for ``python -m vlm_r1.grpo_jsonl --task_type gui_grounding``.

Reads canonical / GTA1 / VLM-R1 records (``gui_grounding.schema``), resizes each screenshot once with the processor's
smart_resize parameters (``gui_grounding.frames``), states the resized size in the prompt (``gui_grounding.prompts``)
and writes the target boxes in the resized frame for the ``click`` reward. Bad records are skipped and counted, or
stop the run with ``--strict_data``.

Row columns: ``prompt``, ``image_path``, ``resized_size`` ``[W', H']``, ``image_size`` ``[W, H]``,
``target_boxes_resized`` (resized pixels, float edges), ``target_boxes`` (original pixels), ``instruction``,
``sample_id``, ``prompt_mode``; ``image`` (the resized PIL image) is attached lazily when a row is read. For
``--box_rounding`` (``vlm_r1.configs.GRPOScriptArguments.box_rounding``):

* ``target_boxes_source``: the boxes as the record published them (``Sample.published_boxes``): 0-1000 values for
  GTA1 records, original pixels for canonical / VLM-R1 records;
* ``source_box_unit``: ``"norm1000"`` or ``"pixel"``;
* ``source_box_scale``: ``[sx, sy]``, the extent of that unit (``[1000, 1000]``, or ``[W, H]`` for pixels);
* ``box_rounding``: ``"float"`` (the ``click`` reward scores ``target_boxes_resized``) or ``"gta1"`` (it scores
  ``int(edge * (resized_side / source_side))`` edges of ``target_boxes_source``, GTA1's rule,
  ``gui_grounding.frames.gta1_box_to_resized``). Every other reward reads ``target_boxes_resized`` either way.
"""

from __future__ import annotations

import logging
from typing import Any

from gui_grounding.frames import Frame
from gui_grounding.prompts import build_messages, check_mode
from gui_grounding.rewards import check_box_rounding
from gui_grounding.schema import Sample, load_samples
from vlm_r1.tasks import Task, load_images_transform

logger = logging.getLogger(__name__)


def sample_to_row(sample: Sample, frame: Frame, mode: str, box_rounding: str = "float") -> dict:
    """One training/eval row for ``sample`` seen through ``frame`` (see module docstring for the columns).

    Raises:
        ValueError: unknown ``box_rounding``.
    """
    sx, sy = sample.source_box_scale()
    return {
        "prompt": build_messages(sample.instruction, frame.resized_height, frame.resized_width, mode),
        "image_path": sample.image_path,
        "resized_size": [frame.resized_width, frame.resized_height],
        "image_size": [frame.width, frame.height],
        "target_boxes_resized": [list(frame.box_to_resized(b)) for b in sample.boxes],
        "target_boxes": [list(b) for b in sample.boxes],
        "instruction": sample.instruction,
        "sample_id": sample.sample_id,
        "prompt_mode": mode,
        "target_boxes_source": [[float(v) for v in b] for b in sample.published_boxes()],
        "source_box_unit": sample.source_box_unit,
        "source_box_scale": [float(sx), float(sy)],
        "box_rounding": check_box_rounding(box_rounding),
    }


class GUIGroundingTask(Task):
    """GTA1-style GUI grounding: screenshot + instruction -> ``(x,y)`` in the resized frame; ``click`` reward."""

    name = "gui_grounding"
    default_reward_funcs = ("click",)
    uses_prompt_mode = True

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        from datasets import Dataset

        mode = check_mode(getattr(script_args, "prompt_mode", "non_thinking"))
        box_rounding = check_box_rounding(getattr(script_args, "box_rounding", "float"))
        samples, report = load_samples(script_args.data_file_list, script_args.image_folder_list,
                                       strict=script_args.strict_data)  # fmt: skip
        logger.info("gui_grounding data:\n%s", report.table())
        if not samples:
            raise ValueError(f"no usable samples in {script_args.data_file_list}:\n{report.table()}")
        factor, min_pixels, max_pixels = vlm_module.get_image_resize_params(processing_class)
        rows = [
            sample_to_row(s, Frame.for_image(s.width, s.height, factor=factor, min_pixels=min_pixels,
                                             max_pixels=max_pixels), mode, box_rounding)  # fmt: skip
            for s in samples
        ]
        return Dataset.from_list(rows).with_transform(load_images_transform(resize_column="resized_size"))

    def sft_completion(self, row: dict) -> str:
        """SFT target for a row (``python -m vlm_r1.sft``): the centre of the first target box in the resized frame.

        ``non_thinking``: ``(x,y)`` with integer pixels (``round`` of the box centre, the point GTA1's prompt asks
        for). ``thinking``: ``<think>...</think><answer>(x,y)</answer>`` with a fixed template thought naming the
        instruction (it teaches the format only; we have no reasoning traces). ``box``: the rounded box
        ``[x1,y1,x2,y2]``.
        """
        x_min, y_min, x_max, y_max = row["target_boxes_resized"][0]
        if row["prompt_mode"] == "box":
            return "[" + ",".join(str(round(v)) for v in (x_min, y_min, x_max, y_max)) + "]"
        point = f"({round((x_min + x_max) / 2)},{round((y_min + y_max) / 2)})"
        if row["prompt_mode"] == "thinking":
            return f"<think>The element to click: {row['instruction']}.</think><answer>{point}</answer>"
        return point

    def eval_callbacks(self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any,
                       eval_dataset: Any) -> list:  # fmt: skip
        """Greedy click accuracy on the held-out rows every ``--eval_steps`` (``gui_grounding.train_eval``)."""
        if eval_dataset is None or training_args.eval_strategy != "steps":
            return []
        from gui_grounding.eval.adapters import PROMPT_MODE_ADAPTERS, get_adapter
        from gui_grounding.train_eval import ClickAccuracyCallback, rows_to_samples

        rows = eval_dataset.with_format(None).select(range(min(len(eval_dataset), script_args.eval_max_samples)))
        samples = rows_to_samples(rows.to_list())
        adapter = get_adapter(PROMPT_MODE_ADAPTERS[script_args.prompt_mode])
        steps = training_args.eval_steps or training_args.logging_steps
        logger.info("click accuracy on %d held-out samples every %s steps", len(samples), steps)
        return [ClickAccuracyCallback(samples, processing_class, vlm_module, adapter,
                                      max_new_tokens=getattr(training_args, "max_completion_length", None) or 32)]  # fmt: skip
