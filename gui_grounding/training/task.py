"""The ``gui_grounding`` task plugin for ``python -m vlm_r1.grpo_jsonl --task_type gui_grounding``.

Reads canonical / GTA1 / VLM-R1 records (``gui_grounding.data.schema``) and turns each into a training row through the
model family's **adapter** (``gui_grounding.models.adapters``: chosen by ``config.model_type``, the GTA1 variant by
``--prompt_mode``, or ``--adapter NAME``): the adapter's frame (the smart_resize frame for resized-pixel families,
the original image for the 0-1000 families), its prompt, the image it is sent, and the target boxes in its answer
frame. Bad records are skipped and counted, or stop the run with ``--strict_data``.

Row columns: ``prompt``, ``image_path``, ``resized_size`` ``[W', H']`` (the size of the image the model is sent:
``PixelBudget.size_sent``; the image transform resizes to it with the same budget),
``image_size`` ``[W, H]``, ``target_boxes_resized`` (boxes in pixels of that sent image, float edges),
``target_boxes`` (original pixels), ``instruction``, ``sample_id``, ``prompt_mode``; the adapter's format:
``adapter`` (name), ``answer_frame`` (``resized`` / ``norm1000`` / ``original``), ``target_boxes_answer`` (targets in
the answer frame: what the rewards score), ``answer_size`` (the answer frame's extent: ``[W', H']``, ``[1000, 1000]``
or ``[W, H]``); ``image`` (the PIL image) is attached lazily when a row is read. For ``--box_rounding``
(:class:`GUIGroundingOptions`):

* ``target_boxes_source``: the boxes as the record published them (``Sample.published_boxes``): 0-1000 values for
  GTA1 records, original pixels for canonical / VLM-R1 records;
* ``source_box_unit``: ``"norm1000"`` or ``"pixel"``;
* ``source_box_scale``: ``[sx, sy]``, the extent of that unit (``[1000, 1000]``, or ``[W, H]`` for pixels);
* ``box_rounding``: ``"float"`` (the ``click`` reward scores ``target_boxes_answer``) or ``"gta1"`` (it scores
  ``int(edge * (resized_side / source_side))`` edges of ``target_boxes_source``, GTA1's rule,
  ``gui_grounding.models.frames.gta1_box_to_resized``; resized-pixel adapters only). Every other reward reads
  ``target_boxes_answer`` either way.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from groundwork.argtypes import integer, number
from groundwork.argtypes import value as argvalue
from groundwork.validate import module_limits
from gui_grounding.data.schema import Sample, load_samples
from gui_grounding.models import zoom_tool
from gui_grounding.models.adapters import PROMPT_MODE_ADAPTERS, get_adapter, training_adapter
from gui_grounding.models.adapters.base import Adapter
from gui_grounding.models.frames import Frame
from gui_grounding.models.prompts import PROMPT_MODES, check_mode
from gui_grounding.models.rows import row_adapter
from gui_grounding.training.rewards import BOX_ROUNDINGS, REWARDS, check_box_rounding
from gui_grounding.training.zoom import MAX_ZOOM_CALLS, ZoomEnvironment, zoom_sft_rows
from vlm_r1.data import rows_to_dataset, split_extras, warn_dropped
from vlm_r1.tasks import Task, load_images_transform

logger = logging.getLogger(__name__)


def sample_to_row(
    sample: Sample,
    frame: Frame,
    adapter: Adapter | str = "non_thinking",
    box_rounding: str = "float",
    zoom_calls: int = 0,
    refusal_penalty: float | None = None,
) -> dict:
    """One training/eval row for ``sample`` seen through ``frame`` by ``adapter`` (see module docstring for the
    columns). ``adapter``: an :class:`gui_grounding.models.adapters.Adapter`, or (older callers) a GTA1 ``--prompt_mode``
    name, meaning the gta1 adapter of that mode. ``zoom_calls`` > 0: the prompt offers the zoom tool for that many
    calls (``Adapter.zoom_messages``; ``--zoom_tool true``). ``refusal_penalty`` not None: refusal training
    (``--refusal_training true``): the prompt is ``Adapter.prompt_messages`` (the refusal clause when the adapter
    asks for it: ``Adapter.configured(refusal_prompt=True)``), and the row gets the columns ``no_target``
    (``Sample.refusal``), ``refusal_answer`` (the adapter's refusal answer on a no-target row, the SFT target; ``""``
    elsewhere) and ``refusal_penalty`` (what the ``click_refusal`` reward takes for abstaining on a row with a
    target). None (the default): no such column, and the published prompt byte for byte.

    Raises:
        ValueError: unknown ``box_rounding`` or prompt mode; ``box_rounding="gta1"`` with an adapter whose answer
            frame is not resized pixels (GTA1's rounding maps published boxes into the resized frame).
    """

    if isinstance(adapter, str):
        adapter = get_adapter(PROMPT_MODE_ADAPTERS[check_mode(adapter)])
    rounding = check_box_rounding(box_rounding)
    if rounding == "gta1" and adapter.answer_frame != "resized":
        raise ValueError(
            f"--box_rounding gta1 needs a resized-pixel answer frame; adapter {adapter.name} answers in "
            f"{adapter.answer_frame}"
        )
    sx, sy = sample.source_box_scale()
    sent = adapter.image_size_sent(frame)
    sent_frame = Frame(frame.width, frame.height, sent[0], sent[1])
    if zoom_calls:
        prompt = adapter.zoom_messages(sample.instruction, frame, image_block=False, max_calls=zoom_calls)
    elif refusal_penalty is not None:
        prompt = adapter.prompt_messages(sample.instruction, frame, image_block=False)
    else:
        prompt = adapter.messages(sample.instruction, frame, image_block=False)
    refusal = {}
    if refusal_penalty is not None:
        refusal = {
            "no_target": bool(sample.refusal),
            "refusal_answer": adapter.refusal_answer(sample.instruction) if sample.refusal else "",
            "refusal_penalty": float(refusal_penalty),
        }
    return {
        "prompt": prompt,
        "image_path": sample.image_path,
        "resized_size": [int(sent[0]), int(sent[1])],
        "image_size": [frame.width, frame.height],
        "target_boxes_resized": [list(sent_frame.box_to_resized(b)) for b in sample.boxes],
        "target_boxes": [list(b) for b in sample.boxes],
        "instruction": sample.instruction,
        "sample_id": sample.sample_id,
        "prompt_mode": adapter.prompt_mode,
        "adapter": adapter.name,
        "answer_frame": adapter.answer_frame,
        "target_boxes_answer": adapter.boxes_to_answer(sample.boxes, frame),
        "answer_size": list(adapter.answer_size(frame)),
        "target_boxes_source": [[float(v) for v in b] for b in sample.published_boxes()],
        "source_box_unit": sample.source_box_unit,
        "source_box_scale": [float(sx), float(sy)],
        "box_rounding": rounding,
        **refusal,
    }


@dataclass
class GUIGroundingOptions:
    """The ``gui_grounding`` task's own flags (``Task.options_class``): ``python -m vlm_r1.grpo_jsonl`` and
    ``python -m vlm_r1.sft`` accept them, and ``--help`` lists them, once ``--task_type gui_grounding`` is known
    (``vlm_r1.command_line.parse_task``); ``--config`` YAML keys fill them too."""

    prompt_mode: str = field(
        default="non_thinking",
        metadata={
            "help": "gui_grounding prompt and target format (the gta1 adapter family): 'non_thinking' (GTA1: "
            "answer '(x,y)'), 'thinking' ('<think>...</think><answer>(x,y)</answer>'; SFT targets use a fixed "
            "template thought) or 'box' (answer '[x1,y1,x2,y2]', for the iou / gaussian_coverage rewards; "
            "point rewards score the box centre).",
            "choices": list(PROMPT_MODES),
        },
    )
    adapter: str | None = field(
        default=None,
        metadata={
            "help": "gui_grounding: the model family's format (prompt, answer frame, parser, SFT target, resize "
            "rule) by adapter name (gui_grounding/adapters, e.g. gta1, ui-tars-1.5, qwen2-vl, qwen3-vl, "
            "internvl). Default: the checkpoint's config.model_type decides (qwen2_5_vl -> gta1 with its "
            "--prompt_mode variant, qwen2_vl -> qwen2-vl, qwen3_vl -> qwen3-vl, internvl -> internvl)."
        },
    )
    box_rounding: str = field(
        default="float",
        metadata={
            "help": "gui_grounding: how a target box is mapped into the frame the model answers in. 'float' "
            "(default): exact float edges. 'gta1': GTA1's click_reward rule, each edge of the box in its source "
            "unit (0-1000 for GTA1 records) truncated with int(edge * resized_side / source_side) "
            "(GTA1 src/grpo_grounding.py:160-164); its left/top edges admit one pixel more than float edges. "
            "Resized-pixel adapters only.",
            "choices": list(BOX_ROUNDINGS),
        },
    )

    zoom_tool: bool = field(
        default=False,
        metadata={
            "help": "gui_grounding: offer the learned zoom tool (issue 30). The prompt gets the family's tool "
            "description (Qwen's Hermes <tools> block; adapters gta1*, qwen3-vl); in its first turn the model "
            "answers, or calls zoom with a region bbox_2d in its answer frame, sees the crop of the full-resolution "
            "screenshot at the run's pixel budget, and answers in the crop's frame; the point maps back to "
            "original pixels (gui_grounding/training/zoom.py). The tool turn is masked from the loss. Stage rewards: "
            "click (final point), zoom_tool, zoom_gain, zoom_cost (docs/REWARDS.md). Off: the prompt and the "
            "rollouts are exactly the one-shot ones. Turns on --ban_vision_tokens (a generated vision token beside "
            "the crop's image tokens breaks the forward pass). Not with --shared_prompt or --use_vllm (refused at "
            "start-up), nor with --dynamic_sampling."
        },
    )
    max_zoom_calls: int = field(
        default=1,
        metadata={
            "help": "gui_grounding, with --zoom_tool: the most zoom calls per rollout (an integer 1..8; a further "
            "call ends the rollout, scored as no answer, counted as tools/rejected/over_limit)."
        },
    )
    zoom_cost: float = field(
        default=0.0,
        metadata={
            "help": "gui_grounding, with --zoom_tool: the price of one zoom call, paid through the zoom_cost reward "
            "(-zoom_cost per call; a finite number 0..1e6), so the policy zooms only where the click reward pays."
        },
    )
    zoom_sft_fraction: float = field(
        default=0.25,
        metadata={
            "help": "gui_grounding, SFT with --zoom_tool: each sample becomes two rows, the call of a window of this "
            "fraction of each side around the target (its centre moved by up to a quarter window, seeded by the "
            "sample id) and the answer in that crop (a number in (0, 1])."
        },
    )

    zoom_sft_grid: int = field(
        default=0,
        metadata={
            "help": "gui_grounding, SFT with --zoom_tool: 0 (default) for the jittered window of --zoom_sft_fraction; "
            "N > 0 (up to 64) calls the cell of an N x N grid over the screenshot that holds the target instead "
            "(the zoom toy's screens are such a grid)."
        },
    )

    refusal_training: bool = field(
        default=False,
        metadata={
            "help": "gui_grounding: train to refuse (docs/TRAINING.md 'Training to refuse'). Records marked "
            '"no_target": true become rows whose SFT target is the family\'s refusal answer (UI-Venus-1.5: [-1,-1]; '
            "GUI-Owl-1.5: its terminate/failure call; elsewhere ours, the point (-1,-1) in the family's answer "
            "syntax); the prompt gets the refusal clause (none for UI-Venus-1.5, whose published prompt has it); "
            "score with the click_refusal reward. Off (default): no-target records are skipped and counted, and the "
            "published prompts are unchanged. Not with --zoom_tool."
        },
    )
    refusal_answer: str | None = field(
        default=None,
        metadata={
            "help": "gui_grounding, with --refusal_training: the refusal answer in place of the family's (it must be "
            "one the family reads as 'no target': checked at start-up)."
        },
    )
    refusal_penalty: float = field(
        default=0.0,
        metadata={
            "help": "gui_grounding, with --refusal_training: the click_refusal reward of abstaining on a sample that "
            "has a target is -refusal_penalty (a number 0..1e6; default 0: abstaining there scores 0, like a miss)."
        },
    )

    def __post_init__(self):
        check_mode(self.prompt_mode)
        self.refusal_penalty = argvalue(number(min=0, max=1e6), self.refusal_penalty, "--refusal_penalty")
        if self.refusal_training and self.zoom_tool:
            raise ValueError("--refusal_training with --zoom_tool has not been built (the tool prompt has no clause)")
        if not self.refusal_training and (self.refusal_answer is not None or self.refusal_penalty != 0.0):
            logger.warning("--refusal_answer / --refusal_penalty given without --refusal_training true: no effect")
        check_box_rounding(self.box_rounding)
        self.max_zoom_calls = argvalue(integer(min=1, max=MAX_ZOOM_CALLS), self.max_zoom_calls, "--max_zoom_calls")
        self.zoom_cost = argvalue(number(min=0, max=1e6), self.zoom_cost, "--zoom_cost")
        self.zoom_sft_grid = argvalue(integer(min=0, max=64), self.zoom_sft_grid, "--zoom_sft_grid")
        self.zoom_sft_fraction = argvalue(
            number(min=0, max=1, min_open=True), self.zoom_sft_fraction, "--zoom_sft_fraction"
        )
        unused = [
            f"--{name}"
            for name, default in (
                ("max_zoom_calls", 1),
                ("zoom_cost", 0.0),
                ("zoom_sft_fraction", 0.25),
                ("zoom_sft_grid", 0),
            )
            if getattr(self, name) != default
        ]
        if unused and not self.zoom_tool:
            logger.warning("%s given without --zoom_tool true: no effect", ", ".join(unused))


CLICK_REWARD_KEY = "rewards/click_reward/mean"  # TRL's metric key of the click reward


class GUIGroundingTask(Task):
    """GUI grounding: screenshot + instruction -> a point in the model family's answer frame; ``click`` reward.

    Declares to the core (``vlm_r1.tasks.Task``): its flags (:class:`GUIGroundingOptions`), its rewards
    (``gui_grounding.training.rewards.REWARDS``: click, click_format, distance, iou, gaussian_point, gaussian_coverage,
    click_distance_bonus), the ``click_accuracy`` alias of the click reward's mean, and the ``click`` hit rate on the
    one-line console log.
    """

    name = "gui_grounding"
    default_reward_funcs = ("click",)
    options_class = GUIGroundingOptions
    rewards = REWARDS
    metric_aliases = {"click_accuracy": CLICK_REWARD_KEY}
    console_metrics = (("click", CLICK_REWARD_KEY, "{:.1%}"),)
    # DEBUG_MODE rollout log: the row's id, instruction and targets in the frame the rewards score in
    debug_columns = {
        "id": ("sample_id",),
        "problem": ("instruction",),
        "solution": ("target_boxes_answer", "target_boxes_resized"),
    }

    def adapter_for(self, vlm_module: Any) -> Adapter:
        """The run's adapter: ``--adapter``, else the model type's default (gta1 family: by ``--prompt_mode``); with
        ``--refusal_training`` configured with the refusal clause and ``--refusal_answer`` (``Adapter.configured``).

        Raises:
            ValueError: refusal training for a family whose parser reads no refusal answer
                (``Adapter.supports_refusal_training``), or a ``--refusal_answer`` it does not read as no target.
        """
        o = self.options
        adapter = training_adapter(getattr(vlm_module, "model_type", None), o.prompt_mode, o.adapter)
        if not o.refusal_training:
            return adapter
        if not adapter.supports_refusal_training:
            raise ValueError(
                f"--refusal_training: the {adapter.name} adapter's parser reads no refusal answer (its family "
                "publishes none, and it reads no negative point); use --refusal_answer with one it reads, or another "
                "adapter"
            )
        return adapter.configured(refusal_prompt=True, refusal_answer=o.refusal_answer)

    def run_info(self, script_args: Any, vlm_module: Any) -> dict:
        """The options (``prompt_mode``, ``adapter`` as given, ``box_rounding``), then the run's resolved ``adapter``
        and ``answer_frame``, for ``vlm_r1_run.json``."""
        adapter = self.adapter_for(vlm_module)
        return {
            **super().run_info(script_args, vlm_module),
            "adapter": adapter.name,
            "answer_frame": adapter.answer_frame,
        }

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        adapter = self.adapter_for(vlm_module)
        box_rounding = check_box_rounding(self.options.box_rounding)
        zoom_calls = self.options.max_zoom_calls if self.options.zoom_tool else 0
        if zoom_calls and not adapter.supports_zoom_tool:
            raise ValueError(f"--zoom_tool: adapter {adapter.name} has no tool-call format (supports_zoom_tool)")
        samples, report = load_samples(
            script_args.data_file_list,
            script_args.image_folder_list,
            strict=script_args.strict_data,
            limits=module_limits(vlm_module),
        )
        logger.info("gui_grounding data:\n%s", report.table())
        if not samples:
            raise ValueError(f"no usable samples in {script_args.data_file_list}:\n{report.table()}")
        budget = self.budget(processing_class, vlm_module)
        logger.info(
            "adapter %s: answers in %s; images sent under the run's pixel budget (factor %s, %s..%s pixels)",
            adapter.name,
            adapter.answer_frame,
            budget.factor,
            budget.min_pixels,
            budget.max_pixels,
        )
        refusal_penalty = self.options.refusal_penalty if self.options.refusal_training else None
        if refusal_penalty is None and any(s.refusal for s in samples):
            skipped = [s.sample_id for s in samples if s.refusal]
            logger.warning(
                "gui_grounding: %d no-target sample(s) skipped (train them with --refusal_training true), e.g. %s",
                len(skipped),
                skipped[0],
            )
            samples = [s for s in samples if not s.refusal]
            if not samples:
                raise ValueError(f"every sample of {script_args.data_file_list} has no target; use --refusal_training")
        rows, extras, unsendable, dropped = [], [], [], Counter()
        for s in samples:
            try:
                frame = adapter.frame_for(s.width, s.height, budget)
            except ValueError as err:  # too thin for the budget: the processor would resize it again, or refuse it
                if script_args.strict_data:
                    raise ValueError(f"{s.sample_id}: image_unsupported: {err}") from None
                unsendable.append((s.sample_id, str(err)))
                continue
            row = sample_to_row(s, frame, adapter, box_rounding, zoom_calls, refusal_penalty)
            rows.append(row)
            # the record's other keys pass through as columns, as the core tasks keep them (vlm_r1.data.split_extras:
            # e.g. gui-grounding difficulty's pass_at_k for a data-config difficulty filter, --sample_weight_column)
            extras.append(split_extras(s.extra, (), row, dropped))
        if unsendable:
            logger.warning(
                "gui_grounding: %d sample(s) skipped as image_unsupported (cannot be sent under the pixel "
                "budget), e.g. %s: %s",
                len(unsendable),
                *unsendable[0],
            )
        if not rows:
            raise ValueError(f"no sample of {script_args.data_file_list} can be sent under the pixel budget")
        warn_dropped(dropped, "gui_grounding record", logger)
        dataset = rows_to_dataset(rows, extras, what="gui_grounding records", logger=logger)
        return dataset.with_transform(load_images_transform(budget))

    def rollout_environment(self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any):
        """The zoom tool's environment with ``--zoom_tool true`` (:class:`gui_grounding.training.zoom.ZoomEnvironment`
        at the run's pixel budget), else ``None``.

        Raises:
            ValueError: ``--zoom_tool`` with ``--shared_prompt`` (each rollout's crop differs, so the packed
                one-prompt-per-group forward of vlm_r1.shared_prompt_trainer, which holds images only in the shared
                prefix, cannot carry them) or with ``--use_vllm`` (the tool turns call TRL's generation per turn; the
                vLLM path has not been run with them) or with ``--dynamic_sampling`` (its refill merges generation
                outputs; never run with crop images in the completions).

        Sets ``training_args.ban_vision_tokens`` (with a warning when it was off): a completion that holds the crop's
        image tokens and a generated ``<|video_pad|>`` gives the forward pass a modality without pixels (found by the
        zoom study's random-reward control, whose degenerate policy sampled one)."""
        if not self.options.zoom_tool:
            return None
        if getattr(training_args, "shared_prompt", False):
            raise ValueError(
                "--zoom_tool cannot be combined with --shared_prompt: the crops differ per rollout and the packed "
                "shared-prompt forward holds images only in the shared prefix; drop one of the two"
            )
        if getattr(training_args, "use_vllm", False):
            raise ValueError("--zoom_tool runs its tool turns with transformers generation; drop --use_vllm")
        if getattr(training_args, "dynamic_sampling", False):
            raise ValueError(
                "--zoom_tool with --dynamic_sampling has not been run (the refill merges generation outputs whose "
                "completions hold crop images); drop one of the two"
            )
        if not getattr(training_args, "ban_vision_tokens", True):
            # a completion holds the crop's image tokens; a generated vision token (a <|video_pad|>, say) then gives the
            # forward pass a modality with no pixels (get_rope_index fails): the ban is part of the tool
            logger.warning(
                "--zoom_tool turns on --ban_vision_tokens: no vision token may be generated in a tool rollout"
            )
            training_args.ban_vision_tokens = True
        o = self.options
        return ZoomEnvironment(self.budget(processing_class, vlm_module), o.max_zoom_calls, o.zoom_cost)

    def sft_rows(self, dataset: Any):
        """SFT rows: the rows themselves, or with ``--zoom_tool true`` two rows per sample (the zoom call, then the
        answer in the crop: :func:`gui_grounding.training.zoom.zoom_sft_rows`)."""
        if not self.options.zoom_tool:
            return dataset
        return zoom_sft_rows(dataset, self.pixel_budget, self.options.zoom_sft_fraction, self.options.zoom_sft_grid)

    def sft_completion(self, row: dict) -> str:
        """SFT target for a row (``python -m vlm_r1.sft``): the row's adapter's answer for its first target box
        (``Adapter.sft_target`` on ``target_boxes_answer``; rows without it: ``target_boxes_resized``). gta1:
        ``(x,y)`` with the rounded box centre in resized pixels; gta1-thinking: ``<think>...</think><answer>(x,y)
        </answer>`` with a fixed template thought naming the instruction (it teaches the format only); gta1-box: the
        rounded box ``[x1,y1,x2,y2]``; qwen3-vl: ``{"point_2d": [x, y], "label": "element"}`` on the 0-1000 grid."""
        if row.get("zoom_call"):  # the first row of a zoom sample (--zoom_tool true)
            return zoom_tool.call_text(row["zoom_call"])
        if row.get("no_target") is True:  # --refusal_training: the family's refusal answer (sample_to_row)
            return row["refusal_answer"]
        boxes = row.get("target_boxes_answer") or row["target_boxes_resized"]
        return row_adapter(row).sft_target(boxes[0], row["instruction"])

    def eval_callbacks(
        self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any, eval_dataset: Any
    ) -> list:
        """Greedy click accuracy on the held-out rows every ``--eval_steps`` (``gui_grounding.training.train_eval``): the rows
        as trained (their prompt, image and adapter), no prompt rebuilt."""
        if eval_dataset is None or training_args.eval_strategy != "steps":
            return []
        if self.options.zoom_tool:  # the greedy callback answers in one turn; the tool's second turn is eval's
            logger.warning(
                "--zoom_tool: no held-out click accuracy during training (the callback answers in one turn); "
                "score saved checkpoints with gui-grounding eval --tts zoom-tool"
            )
            return []
        from gui_grounding.training.train_eval import ClickAccuracyCallback

        rows = eval_dataset.with_format(None).select(range(min(len(eval_dataset), script_args.eval_max_samples)))
        rows = rows.to_list()
        steps = training_args.eval_steps or training_args.logging_steps
        logger.info(
            "click accuracy on %d held-out samples every %s steps (adapter %s)",
            len(rows),
            steps,
            rows[0].get("adapter") if rows else None,
        )
        return [
            ClickAccuracyCallback(
                rows,
                processing_class,
                vlm_module,
                self.budget(processing_class, vlm_module),
                max_new_tokens=getattr(training_args, "max_completion_length", None) or 32,
            )
        ]
