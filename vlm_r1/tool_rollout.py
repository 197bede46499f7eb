"""Multi-turn rollouts with an image tool: the policy may call a tool, whose answer (text and images) is appended as a
turn the model did not write, and then go on (issue 30: the learned zoom-in of the ``gui_grounding`` task).

A task offers a :class:`RolloutEnvironment` (``Task.rollout_environment``); the trainer (:class:`ToolRolloutMixin`)
then runs, after TRL's first turn, up to ``environment.max_calls`` more turns:

1. the environment reads the last turn (:meth:`RolloutEnvironment.step` with the dataset row and the turns so far) and
   answers ``None`` (the turn is the final answer), a :class:`ToolStop` (a call it refuses, by reason code: the
   rollout ends, its last turn stays the final text) or a :class:`ToolTurn` (chat messages with image placeholders,
   the images already resized by the run's pixel budget, and a JSON-able ``info`` record);
2. the tool turn is rendered by the processor's chat template (the difference between a conversation with and without
   it, cut after the end-of-turn token the completion already holds: the way TRL's ``_get_tool_suffix_ids`` renders
   a tool message) and tokenised with its images, so each image's placeholder expands to the tokens the vision tower
   fills;
3. the next turn is generated from prompt + completion so far + tool turn with TRL's own
   ``_generate_single_turn`` (one sequence per rollout, the screenshot and every crop as its images), so the
   vision-token ban (``bad_words_ids`` in the generation config) covers every turn: no image token is ever generated.

The completion the loss sees is turn 1 + tool turn + turn 2 + ...; ``tool_mask`` is 0 on the tool turns, so they are
context only (TRL multiplies it into the loss mask, ``_generate_and_score_completions``). Each rollout's turns go to the
reward functions as the column ``rollout_turns`` (``[{"text", "info"}, ...]``, info ``None`` on a plain turn), and its
completion (what ``completion_text`` reads) is the message list ``[assistant, user (tool), assistant, ...]``, so a
reward reading the last message reads the final answer.

Why not TRL's own tool loop (``GRPOTrainer(tools=...)``, ``_tool_call_loop``): it renders the tool schema with the chat
template (the Qwen2.5-VL template has no tools section; our adapters write the family's block into the prompt), parses
calls with the tokenizer's ``response_schema`` (absent from the Qwen-VL processors and our tiny checkpoints), and
counts the tool's image tokens in ``--max_completion_length``. Here each generated turn is bounded by
``--max_completion_length`` (the generation config), the tool turns are not counted, and the rest (the forward pass
over tool images, ``mm_token_type_ids`` of the completion's image tokens, the masked loss) is TRL's unchanged: after
the loop ``self.tools`` names the environment's tool while the batch is scored, which is what selects TRL's tool-image
forward path.

Metrics (per logging step, the mean over the generation batch): ``tools/calls_per_rollout``, ``tools/share_called``
(rollouts with at least one call), ``tools/rejected/<reason>`` (share of rollouts ended by a refused call), and
``tools/turns_per_rollout``.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

import torch

from vlm_r1.answers import completion_text

logger = logging.getLogger(__name__)


@dataclass
class ToolTurn:
    """The tool's answer: chat ``messages`` whose ``{"type": "image"}`` parts take ``images`` in order (PIL images,
    already resized by the run's pixel budget), and ``info`` (JSON-able) for the rewards, the logs and the debug
    log."""

    messages: list[dict]
    images: list
    info: dict = field(default_factory=dict)


@dataclass
class ToolStop:
    """A call the environment refuses (``reason``: a short code, counted in ``tools/rejected/<reason>``): the rollout
    ends with the calling turn as its final text."""

    reason: str
    info: dict = field(default_factory=dict)


class RolloutEnvironment(Protocol):
    """What a task hands the trainer to run tool turns (see the module docstring)."""

    #: the most tool turns one rollout may get (the environment answers a further call with a ToolStop)
    max_calls: int
    #: the name TRL's tool-image forward path is given (``self.tools`` while the batch is scored)
    tool_name: str

    def step(self, row: dict, turns: list[dict]) -> ToolTurn | ToolStop | None: ...


def _tool_stub(name: str):
    def tool(**kwargs):  # never called: TRL only tests ``self.tools`` for its tool-image forward path
        raise RuntimeError(f"the {name} tool runs in the rollout environment, not through TRL")

    tool.__name__ = name
    return tool


class ToolRolloutMixin:
    """Runs the tool turns of :class:`RolloutEnvironment` ``self.rollout_environment`` (``None``: single-turn, TRL's
    path untouched). Mixed into :class:`vlm_r1.trainer.VLMGRPOTrainer` before ``trl.GRPOTrainer``."""

    rollout_environment: RolloutEnvironment | None = None
    _tool_rows: list | None = None

    def _generate_and_score_completions(self, inputs):
        if self.rollout_environment is None:
            return super()._generate_and_score_completions(inputs)
        self._tool_rows = inputs
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._tool_rows = None
            self.tools = []  # only while the batch with tool images is scored

    def _generate(self, prompts: list):
        env = self.rollout_environment
        if env is None or self._tool_rows is None:
            return super()._generate(prompts)
        if self.tools:
            raise RuntimeError("a rollout environment and TRL tools (tools=...) cannot be combined")
        (prompt_ids, completion_ids, _mask, completions, logprobs, extra, images, _tool_images) = super()._generate(
            prompts
        )
        rows, eos = self._tool_rows, set(self.eos_token_ids)
        state = _Rollouts(completion_ids, completions, logprobs, images)
        active = [i for i, ids in enumerate(state.ids) if ids and ids[-1] in eos]  # a truncated turn is final
        for _ in range(env.max_calls + 1):
            queued = []
            for i in active:
                result = env.step(rows[i], state.turns[i])
                if isinstance(result, ToolStop):
                    state.stop(i, result)
                elif isinstance(result, ToolTurn):
                    queued.append(i)
                    state.add_tool(i, self._tool_turn_ids(result), result, env.tool_name)
            if not queued:
                break
            new_ids = [prompt_ids[i] + state.ids[i] for i in queued]
            seq_images = [state.images_of(i) for i in queued]
            post_ids, post_logprobs = self._generate_single_turn(
                new_ids, seq_images, self._tool_fields(new_ids, seq_images), 1, True
            )
            texts = self.processing_class.batch_decode(post_ids, skip_special_tokens=True)
            for k, i in enumerate(queued):
                state.add_turn(i, list(post_ids[k]), post_logprobs[k] if post_logprobs is not None else None, texts[k])
            active = [i for k, i in enumerate(queued) if post_ids[k] and post_ids[k][-1] in eos]
        for i, row in enumerate(rows):
            row["rollout_turns"] = state.turns[i]
        self._log_tool_metrics(state.calls, state.rejected, state.turns)
        if any(state.tool_images):
            self.tools = [_tool_stub(env.tool_name)]  # selects TRL's tool-image forward path for this batch
        merged = (
            [state.images_of(i) for i in range(len(rows))] if images is not None or any(state.tool_images) else None
        )
        return prompt_ids, state.ids, state.mask, state.messages, state.logprobs, extra, merged, state.tool_images

    # ---- rendering ---------------------------------------------------------------------------------------------------
    def _tool_turn_ids(self, result: ToolTurn) -> list[int]:
        """Token ids of a tool turn and the next assistant header, images expanded (see the module docstring)."""
        proc = self.processing_class
        dummy = [
            {"role": "user", "content": [{"type": "text", "text": "x"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "y"}]},
        ]
        base = proc.apply_chat_template(dummy, tokenize=False, **self.chat_template_kwargs)
        full = proc.apply_chat_template(
            dummy + result.messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs
        )
        eos_text = self._tokenizer.eos_token
        cut = base.rfind(eos_text) + len(eos_text) if eos_text and eos_text in base else len(base)
        if not full.startswith(base[:cut]):
            raise ValueError("the chat template renders earlier turns differently once a tool turn follows")
        suffix = full[cut:]
        if result.images:
            ids = proc(text=[suffix], images=list(result.images), return_tensors=None)["input_ids"][0]
        else:
            ids = self._tokenizer(suffix, add_special_tokens=False)["input_ids"]
        return [int(t) for t in ids]

    def _tool_fields(self, ids: list[list[int]], images: list[list]) -> dict:
        """Generation inputs besides the token ids: every image of each sequence through the image processor (at the
        run's budget; images arrive resized, so its resize is the identity), and ``mm_token_type_ids`` (1 on image
        tokens) per sequence, left-padded by ``_generate_single_turn`` like the ids."""
        flat = [im for ims in images for im in ims]
        fields = {}
        if flat:
            fields = dict(self.processing_class.image_processor(images=flat, return_tensors="pt"))
        image_id = getattr(self, "_image_pad_token_id", None)
        if image_id is not None:
            fields["mm_token_type_ids"] = [[1 if t == image_id else 0 for t in seq] for seq in ids]
        return fields

    def _log_tool_metrics(self, calls: list[int], rejected: Counter, turns: list) -> None:
        mode = "train" if self.model.training else "eval"
        device = self.accelerator.device
        local = torch.tensor(
            [sum(calls), sum(c > 0 for c in calls), sum(len(t) for t in turns), len(calls)], device=device
        )
        total = self.accelerator.gather(local.unsqueeze(0)).sum(0).tolist()
        rollouts = max(1.0, total[3])
        metrics = self._metrics[mode]
        metrics["tools/calls_per_rollout"].append(total[0] / rollouts)
        metrics["tools/share_called"].append(total[1] / rollouts)
        metrics["tools/turns_per_rollout"].append(total[2] / rollouts)
        for reason in getattr(self.rollout_environment, "reasons", ()):
            count = self.accelerator.gather(torch.tensor([rejected.get(reason, 0)], device=device)).sum().item()
            metrics[f"tools/rejected/{reason}"].append(count / rollouts)


class _Rollouts:
    """The growing rollouts of one generation batch: completion ids, tool mask, sampling log-probs, turns, messages,
    tool images, calls and refused calls per rollout."""

    def __init__(self, completion_ids, completions, logprobs, images):
        self.ids = [list(ids) for ids in completion_ids]
        self.mask = [[1] * len(ids) for ids in self.ids]
        self.logprobs = [list(lp) for lp in logprobs] if logprobs is not None else None
        self.turns = [[{"text": completion_text(c), "info": None}] for c in completions]
        self.messages = [list(c) if isinstance(c, list) else [{"role": "assistant", "content": c}] for c in completions]
        self.images = images
        self.tool_images = [[] for _ in self.ids]
        self.calls = [0] * len(self.ids)
        self.rejected = Counter()

    def images_of(self, i: int) -> list:
        """Every image of rollout ``i`` in token order: the prompt's, then each tool turn's."""
        return ((self.images[i] if self.images else None) or []) + self.tool_images[i]

    def stop(self, i: int, result: ToolStop) -> None:
        self.turns[i][-1]["info"] = {"stop": result.reason, **result.info}
        self.rejected[result.reason] += 1

    def add_tool(self, i: int, suffix: list[int], result: ToolTurn, tool_name: str) -> None:
        """Append a tool turn (context only: tool mask 0, log-prob 0)."""
        self.calls[i] += 1
        self.tool_images[i].extend(result.images)
        self.ids[i] += suffix
        self.mask[i] += [0] * len(suffix)
        if self.logprobs is not None:
            self.logprobs[i] += [0.0] * len(suffix)
        self.turns[i][-1]["info"] = {"tool": tool_name, **result.info}
        self.messages[i].extend(_plain(m) for m in result.messages)

    def add_turn(self, i: int, ids: list[int], logprobs, text: str) -> None:
        """Append a generated turn (tool mask 1)."""
        self.ids[i] += ids
        self.mask[i] += [1] * len(ids)
        if self.logprobs is not None:
            self.logprobs[i] += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.turns[i].append({"text": text, "info": None})
        self.messages[i].append({"role": "assistant", "content": text})


def _plain(message: dict) -> dict:
    """A tool turn as the rewards and the rollout log see it: text parts joined, ``<image>`` where an image is."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join("<image>" if p.get("type") == "image" else p.get("text", "") for p in content)
    return {"role": message.get("role", "user"), "content": content}
