"""The adapter interface: one model family's prompt, answer frame, parser and resize rule, in one object.

An adapter is the single format of a family. The same object serves:

* training rows (``gui_grounding.training.task.GUIGroundingTask.build_dataset``): :meth:`Adapter.frame_for` (the frame the
  model sees), :meth:`Adapter.messages` (the prompt), :meth:`Adapter.boxes_to_answer` (targets in the answer frame,
  written to the row with the frame's name), :meth:`Adapter.image_size_sent` (the resize rule);
* rewards (``gui_grounding.training.rewards``): :meth:`Adapter.parse_answer` reads a completion's point **in the answer frame**;
* the SFT target: :meth:`Adapter.sft_target`;
* evaluation (every backend and the training-time callback): :meth:`Adapter.build_request` and :meth:`Adapter.parse`
  (a point in **original** pixels).

Answer frames (``answer_frame``): ``"resized"`` (pixels of the smart_resized image the model sees: Qwen2.5-VL, GTA1,
UI-TARS-1.5), ``"norm1000"`` (``[0, 1000]`` relative to the image: Qwen2-VL/OS-Atlas, Qwen3-VL, InternVL), or
``"original"`` (pixels of the original screenshot). Conversions live in :class:`groundwork.geometry.Frame`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundwork.pixel_budget import PixelBudget, resize_for_model
from gui_grounding.models import zoom_tool
from gui_grounding.models.frames import Frame

ANSWER_FRAMES = ("resized", "norm1000", "original")
#: how a family's explicit "no target" answer (:attr:`Adapter.no_target`, e.g. UI-Venus ``[-1,-1]``) is read
#: (``Profile.refusal`` picks one per checkpoint; :meth:`Adapter.configured`):
#:
#: * ``"refusal"``: the explicit refusal (``"refusal": true`` on the predictions line, null point): correct on an
#:   OSWorld-G refusal item, wrong elsewhere; UI-Venus-1.5's parser returns it as "infeasible"
#:   (inclusionAI/UI-Venus ``models/grounding/ui_venus1_5_gd.py:164-165`` at c3a1442);
#: * ``"origin"``: what a parser that falls back to ``[0,0,0,0]`` makes of it: the family's parse when it reads a
#:   point there (``[-1,-1,-1,-1]`` is a box, centre (-1, -1)), else the point (0, 0) -- UI-Venus-1.0's script
#:   ``eval()``s ``[-1,-1]``, ``box[3]`` raises ``IndexError`` and the answer becomes ``[0,0,0,0]``
#:   (``models/grounding/ui_venus_ground_7b.py:88-98`` at fc7670d);
#: * ``"point"``: the point it writes (:attr:`Adapter.no_target_point`, in the answer frame), scored like any point.
REFUSAL_READINGS = ("refusal", "origin", "point")
#: ours: the refusal clause added to the prompt in refusal training (``--refusal_training true``) or by a profile
#: (``Profile.refusal_prompt``) for a family that publishes none; ``{answer}`` is the family's refusal answer
#: (:meth:`Adapter.refusal_answer`). Appended to the user's text after a newline (:meth:`Adapter.with_refusal_clause`).
OUR_REFUSAL_CLAUSE = "If no element on the screen matches the instruction, answer {answer}"


@dataclass
class Request:
    """One model call. ``messages`` hold ``{"type": "image"}`` where each image goes; ``image`` is what is sent (the
    first image), ``extra_images`` the further ones in message order (a zoom-tool turn: the crops), :attr:`images`
    all of them."""

    messages: list[dict]
    image: Any  # PIL.Image.Image, resized by the run's pixel budget (groundwork.pixel_budget.resize_for_model)
    context: dict = field(default_factory=dict)  # e.g. original and resized sizes, used by parse()
    prompt_text: str = ""  # the full prompt as text, stored per sample in the predictions file
    # text the assistant turn starts with, forced before generation (the ScreenSpot-Pro harness's Qwen2.5-VL
    # "<tool_call>..." guide); the answer parsed and stored is this prefix + the generated text
    assistant_prefix: str = ""
    # the images after ``image``, in the order of the messages' image parts (``--tts zoom-tool``: the crops)
    extra_images: list = field(default_factory=list)

    @property
    def images(self) -> list:
        """Every image sent, in the order of the messages' ``{"type": "image"}`` parts."""
        return [self.image, *self.extra_images]


def messages_to_text(messages: list[dict]) -> str:
    """Readable one-string form of chat ``messages`` (``role: text``, ``<image>`` where the image goes).

    This is the ``prompt`` stored per predictions line: the same for every backend (it is not the chat-template
    rendering, which depends on the tokenizer). String contents (training rows) show no ``<image>``: TRL inserts the
    image before the first user text.
    """
    lines = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            body = content
        else:
            body = "".join("<image>" if part.get("type") == "image" else part.get("text", "") for part in content)
        lines.append(f"{m['role']}: {body}")
    return "\n".join(lines)


def _fmt(value: float) -> str:
    """An integer coordinate as the models write it (``round``, no decimals)."""
    return str(int(round(value)))


class Adapter:
    """Base class; subclasses document their prompt and coordinate frame in the class docstring.

    Class attributes:
        name: registry name, written to every predictions line and every training row (column ``adapter``).
        answer_frame: ``"resized"``, ``"norm1000"`` or ``"original"`` (see the module docstring).
        model_types: ``config.model_type`` values this adapter is the default for (``default_adapter_for``).
        prompt_mode: the ``--prompt_mode`` this adapter implements (GTA1 family: non_thinking / thinking / box;
            other families: non_thinking).
        default_budget: the family's published inference budget (:class:`groundwork.pixel_budget.PixelBudget`, each
            value citing its source): what evaluation uses when no flag, profile or checkpoint record sets one
            (``gui_grounding.eval.budget.resolve_eval_budget``).
    """

    name = "base"
    answer_frame = "resized"
    model_types: tuple[str, ...] = ()
    prompt_mode = "non_thinking"
    default_budget: PixelBudget | None = None  # every registered adapter sets one
    #: forced start of the assistant turn (``Request.assistant_prefix``); "" for most families
    assistant_prefix = ""
    #: the family writes Qwen's Hermes tool calls, so the learned zoom tool (``gui_grounding.models.zoom_tool``) can
    #: be offered to it (``--zoom_tool true``, ``--tts zoom-tool``)
    supports_zoom_tool = False
    #: the family's explicit "no target" answer, matched against the whole answer stripped of outer whitespace;
    #: ``None``: the family has none
    no_target: re.Pattern | None = None
    #: the point (answer frame) a no-target answer writes, for the ``"point"`` reading
    no_target_point: tuple[float, float] = (-1.0, -1.0)
    #: how this instance reads a no-target answer (:data:`REFUSAL_READINGS`; a profile picks another with
    #: :meth:`configured`)
    refusal_reading = "refusal"
    #: training to refuse (docs/TRAINING.md "Training to refuse"): the family's published refusal answer, the text a
    #: model writes when no element matches (``None``: ours, :meth:`refusal_answer`), and its published refusal clause
    #: (``None``: ours, :data:`OUR_REFUSAL_CLAUSE`; ``""``: the published prompt already asks for it), with their
    #: source (:attr:`refusal_source`)
    published_refusal_answer: str | None = None
    published_refusal_clause: str | None = None
    refusal_source = (
        "ours: the family publishes no refusal answer; it writes the point (-1,-1) of its answer frame in its own "
        "answer syntax, which OSWorld-G's official rule reads as a refusal (both coordinates negative: "
        "gui_grounding.eval.judge)"
    )
    #: the clause enters the prompt (:meth:`prompt_messages`): set by :meth:`configured` (refusal training, a profile)
    refusal_prompt = False
    #: a profile's or a run's refusal answer in place of the family's (:meth:`configured`); ``None``: the family's
    refusal_answer_override: str | None = None
    #: how :data:`OUR_REFUSAL_CLAUSE` writes the answer where the SFT target holds the instruction (``None``: the
    #: assistant prefix and :meth:`refusal_answer` of an empty instruction)
    refusal_clause_answer: str | None = None

    # ---- the frame ---------------------------------------------------------------------------------------------------
    def frame_for(self, width: int, height: int, budget: PixelBudget | None = None) -> Frame:
        """The frame of an original ``width x height`` screenshot under ``budget`` (the run's; ``None``:
        ``default_budget``): original size and the size of the image the model is sent (``budget.size_sent``: the
        smart_resize frame, or the original size for a family without one). Every family is sent that image, so the
        processor's own resize is the identity; the answer frame (:attr:`answer_frame`) says how answers map back.

        Raises:
            ValueError: an aspect ratio smart_resize refuses (over 200).
        """
        return (budget or self.default_budget).frame(width, height)

    @staticmethod
    def image_size_sent(frame: Frame) -> tuple[int, int]:
        """``(W', H')`` of the image the model is sent (the training rows' ``resized_size`` column)."""
        return frame.resized_width, frame.resized_height

    def answer_size(self, frame: Frame) -> tuple[float, float]:
        """Extent ``(W, H)`` of the answer frame: resized pixels, ``(1000, 1000)`` or original pixels."""
        if self.answer_frame == "resized":
            return float(frame.resized_width), float(frame.resized_height)
        if self.answer_frame == "norm1000":
            return 1000.0, 1000.0
        return float(frame.width), float(frame.height)

    def boxes_to_answer(self, boxes: Sequence[Sequence[float]], frame: Frame) -> list[list[float]]:
        """Original-pixel boxes ``(x_min, y_min, x_max, y_max)`` -> the answer frame (floats, not rounded)."""
        out = []
        for box in boxes:
            if self.answer_frame == "resized":
                out.append(list(frame.box_to_resized(box)))
            elif self.answer_frame == "norm1000":
                x0, y0 = frame.point_to_norm1000((box[0], box[1]))
                x1, y1 = frame.point_to_norm1000((box[2], box[3]))
                out.append([x0, y0, x1, y1])
            else:
                out.append([float(v) for v in box])
        return out

    def point_to_original(self, point: Sequence[float], frame: Frame) -> tuple[float, float]:
        """An answer-frame point -> original pixels."""
        if self.answer_frame == "resized":
            return frame.point_to_original(point)
        if self.answer_frame == "norm1000":
            return frame.point_from_norm1000(point)
        return float(point[0]), float(point[1])

    # ---- prompt, parser, SFT target ---------------------------------------------------------------------------------
    def messages(self, instruction: str, frame: Frame, *, image_block: bool = True) -> list[dict]:
        """Chat messages for one sample. ``image_block=True``: the user content is ``[{"type": "image"}, text]`` (our
        inference); ``False`` (training rows): plain strings, TRL inserts the image before the first user text. Both
        render to the same chat-template text."""
        raise NotImplementedError

    def zoom_messages(
        self, instruction: str, frame: Frame, *, image_block: bool = True, max_calls: int = 1
    ) -> list[dict]:
        """:meth:`messages` with the zoom tool offered in the system turn (``zoom_tool.with_tool``: the family's
        tool-call format, the Hermes block of Qwen's chat templates), for ``max_calls`` calls.

        Raises:
            ValueError: the family has no tool-call format here (:attr:`supports_zoom_tool` is False).
        """
        if not self.supports_zoom_tool:
            raise ValueError(f"adapter {self.name} has no tool-call format for the zoom tool (supports_zoom_tool)")
        return zoom_tool.with_tool(self.messages(instruction, frame, image_block=image_block), max_calls)

    def parse_answer(self, text: str, *, strict: bool = True) -> tuple[float, float] | None:
        """The point a completion answers, **in the answer frame**, or ``None`` (what the rewards score).
        ``strict``: training rules (``True``) or the family's inference rules (``False``, used by :meth:`parse`)."""
        raise NotImplementedError

    def sft_target(self, box: Sequence[float], instruction: str) -> str:
        """The SFT completion for a target ``box`` given in the answer frame: the family's answer syntax for the box
        centre (rounded to integers)."""
        raise NotImplementedError

    # ---- evaluation ------------------------------------------------------------------------------------------------
    def build_request(
        self, sample, image, *, budget: PixelBudget | None = None, messages: Callable[[Frame], list[dict]] | None = None
    ) -> Request:
        """Request for ``sample`` with its original ``image`` (PIL, displayed frame): the image resized once by
        ``budget`` (the run's; ``None``: ``default_budget``) with :func:`groundwork.pixel_budget.resize_for_model`, and
        the adapter's messages for that frame (``messages``: a function of the frame that builds other messages,
        e.g. :meth:`zoom_messages` for ``--tts zoom-tool``'s first turn; default :meth:`messages` of the
        instruction).

        Raises:
            ValueError: an aspect ratio smart_resize refuses (over 200).
        """
        budget = budget or self.default_budget
        width, height = image.size
        frame = budget.frame(width, height)
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        rgb = resize_for_model(rgb, budget)
        if messages is None:
            messages = self.prompt_messages(sample.instruction, frame, image_block=True)
        else:
            messages = messages(frame)
        prompt_text = messages_to_text(messages) + (
            f"\nassistant: {self.assistant_prefix}" if self.assistant_prefix else ""
        )
        return Request(messages, rgb, {"frame": frame}, prompt_text, self.assistant_prefix)

    def configured(
        self, *, refusal: str = "", refusal_prompt: bool = False, refusal_answer: str | None = None
    ) -> Adapter:
        """This adapter reading the family's no-target answer as ``refusal`` (:data:`REFUSAL_READINGS`; ``""``: the
        adapter's default), with the refusal clause in its prompt (``refusal_prompt``: :meth:`prompt_messages`) and
        ``refusal_answer`` in place of the family's (:meth:`refusal_answer`): a copy, so the registry's adapters stay
        as they are; ``self`` when nothing changes. How a profile's choices (``Profile.refusal``,
        ``Profile.refusal_prompt``, ``Profile.refusal_answer``) and refusal training (``--refusal_training``,
        ``--refusal_answer``) reach the adapter of a run.

        Raises:
            ValueError: an unknown reading, a reading for a family without a no-target answer, or a refusal answer
                that the family's training reading does not read as no target (:meth:`is_trained_refusal`).
        """
        if refusal == "" and not refusal_prompt and refusal_answer is None:
            return self
        if refusal and refusal not in REFUSAL_READINGS:
            raise ValueError(f"refusal reading must be one of {', '.join(REFUSAL_READINGS)} (or ''), got {refusal!r}")
        if refusal and not self.reads_no_target:
            raise ValueError(
                f"the {self.name} adapter's family has no explicit 'no target' answer to read as {refusal}"
            )
        if refusal_answer is not None and not self.is_trained_refusal(refusal_answer):
            raise ValueError(
                f"refusal answer {refusal_answer!r} is not read as 'no target' by the {self.name} adapter (its "
                "answer must be the family's no-target answer, or, for a family without one, the point (-1,-1) of "
                "its answer frame in its answer syntax)"
            )
        out = copy.copy(self)
        out.refusal_reading = refusal or self.refusal_reading
        out.refusal_prompt = refusal_prompt or self.refusal_prompt
        if refusal_answer is not None:
            out.refusal_answer_override = refusal_answer
        return out

    # ---- training to refuse ----------------------------------------------------------------------------------------
    def refusal_answer(self, instruction: str = "") -> str:
        """The answer a model is trained to write when no element matches ``instruction`` (the SFT target of a
        no-target sample): a configured override (:meth:`configured`), else the family's published one
        (:attr:`published_refusal_answer`), else ours: :meth:`sft_target` of the box ``(-1, -1, -1, -1)``, i.e. the
        point (-1,-1) of the answer frame in the family's answer syntax (``(-1,-1)`` for GTA1,
        ``[-1,-1,-1,-1]`` for a box family; its source: :attr:`refusal_source`)."""
        if self.refusal_answer_override is not None:
            return self.refusal_answer_override
        if self.published_refusal_answer is not None:
            return self.published_refusal_answer
        return self.sft_target((-1.0, -1.0, -1.0, -1.0), instruction)

    def refusal_clause(self) -> str:
        """The refusal clause of the prompt (:attr:`published_refusal_clause`, else :data:`OUR_REFUSAL_CLAUSE` with
        the refusal answer for an empty instruction); ``""`` when the family's prompt already asks for it."""
        if self.published_refusal_clause is not None and self.refusal_answer_override is None:
            return self.published_refusal_clause
        if self.refusal_answer_override is None and self.refusal_clause_answer is not None:
            return OUR_REFUSAL_CLAUSE.format(answer=self.refusal_clause_answer)
        return OUR_REFUSAL_CLAUSE.format(answer=self.assistant_prefix + self.refusal_answer(""))

    @property
    def supports_refusal_training(self) -> bool:
        """Whether the family's training reading reads its own refusal answer as no target (:meth:`is_trained_refusal`
        of :meth:`refusal_answer`): False where the parser reads no negative point and the family publishes no
        refusal answer (refusal training is then refused at start-up)."""
        return self.is_trained_refusal(self.refusal_answer("x"))

    def is_trained_refusal(self, text: str) -> bool:
        """Whether ``text`` (a whole completion) abstains, as refusal training reads it (the refusal-aware reward,
        ``gui_grounding.training.rewards.score_click_refusal``): the family's explicit no-target answer
        (:meth:`is_no_target`); for a family without one, an answer whose strict parse (:meth:`parse_answer`) is
        the point (-1, -1) of the answer frame (:attr:`no_target_point`: ours, a point both of whose coordinates are
        negative, which OSWorld-G's official rule reads as a refusal). Never raises."""
        if not isinstance(text, str):
            return False
        if self.reads_no_target:
            return self.is_no_target(text)
        return self.parse_answer(text, strict=True) == tuple(self.no_target_point)

    def with_refusal_clause(self, messages: list[dict]) -> list[dict]:
        """``messages`` with :meth:`refusal_clause` appended, after a newline, to the text of the last user turn
        (string content, or its last text part); unchanged when the clause is ``""``. A family that puts it
        elsewhere overrides this (GUI-Owl-1.5: the system turn)."""
        clause = self.refusal_clause()
        if not clause:
            return messages
        out = copy.deepcopy(messages)
        turn = next(m for m in reversed(out) if m["role"] == "user")
        if isinstance(turn["content"], str):
            turn["content"] += "\n" + clause
        else:
            part = next(p for p in reversed(turn["content"]) if p.get("type") == "text")
            part["text"] += "\n" + clause
        return out

    def prompt_messages(self, instruction: str, frame: Frame, *, image_block: bool = True) -> list[dict]:
        """The prompt of one sample: :meth:`messages`, with the refusal clause when this adapter asks for it
        (:attr:`refusal_prompt`; :meth:`with_refusal_clause`). Off (the default), the published prompt byte for
        byte."""
        messages = self.messages(instruction, frame, image_block=image_block)
        return self.with_refusal_clause(messages) if self.refusal_prompt else messages

    @property
    def reads_no_target(self) -> bool:
        """Whether the family has an explicit "no target" answer: a :attr:`no_target` pattern, or its own
        :meth:`is_no_target` (a family whose official parser decides it, e.g. UI-Venus-1.5's ``"infeasible"``)."""
        return self.no_target is not None or type(self).is_no_target is not Adapter.is_no_target

    def is_no_target(self, text: str) -> bool:
        """True when ``text`` (the full answer) is the family's explicit "no target" answer (:attr:`no_target`; a
        family whose official parser decides it overrides this method instead)."""
        return (
            self.no_target is not None and isinstance(text, str) and self.no_target.fullmatch(text.strip()) is not None
        )

    def is_refusal(self, text: str) -> bool:
        """True when ``text`` (the full answer, assistant prefix included) is the family's explicit "no target"
        answer (e.g. UI-Venus ``[-1,-1]``) and this adapter reads it as a refusal (:attr:`refusal_reading`). The
        predictions line then carries ``"refusal": true`` with a null point, which OSWorld-G scores by its refusal
        rule. False for a family without such an answer."""
        return self.refusal_reading == "refusal" and self.is_no_target(text)

    def answer_point(self, text: str) -> tuple[float, float] | None:
        """The point eval reads from the full answer ``text``, **in the answer frame** (inference rules,
        ``parse_answer(strict=False)``), with the no-target answer read as :attr:`refusal_reading` says
        (:data:`REFUSAL_READINGS`: ``"point"`` -> :attr:`no_target_point`; ``"origin"`` -> the family's parse, else
        (0, 0), which is (0, 0) in every frame; ``"refusal"`` -> the family's parse, which :meth:`is_refusal` makes
        moot in eval)."""
        if self.refusal_reading != "refusal" and self.is_no_target(text):
            if self.refusal_reading == "point":
                return self.no_target_point
            point = self.parse_answer(text, strict=False)
            return point if point is not None else (0.0, 0.0)
        return self.parse_answer(text, strict=False)

    def parse(self, text: str, request: Request) -> tuple[float, float] | None:
        """The answer's point in original-image pixels, or ``None`` (inference parse rules: :meth:`answer_point`,
        mapped by the answer frame)."""
        point = self.answer_point(text)
        return self.point_to_original(point, request.context["frame"]) if point is not None else None

    def answer_box(self, text: str) -> tuple[float, float, float, float] | None:
        """The box ``(x1, y1, x2, y2)`` the full answer ``text`` writes, **in the answer frame** (inference rules),
        when the point :meth:`answer_point` reads is that box's centre; ``None`` for a point answer, no answer, or a
        family that answers points (this default). Test-time consensus votes with it (GUI-RC's four-number answer,
        ``gui_grounding.models.consensus``)."""
        return None

    def parse_box(self, text: str, request: Request) -> tuple[float, float, float, float] | None:
        """:meth:`answer_box` in original-image pixels (both corners mapped by the answer frame), or ``None``; a
        no-target answer (:meth:`is_no_target`) is no box, however it is read."""
        box = None if self.is_no_target(text) else self.answer_box(text)
        if box is None:
            return None
        frame = request.context["frame"]
        return (*self.point_to_original(box[:2], frame), *self.point_to_original(box[2:], frame))

    # ---- helpers ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _system_turn(texts: Sequence[str], image_block: bool = True) -> list[dict]:
        """A system turn of one or more text parts (content blocks; plain string when ``image_block`` is False)."""
        if not image_block:
            return [{"role": "system", "content": "".join(texts)}]
        return [{"role": "system", "content": [{"type": "text", "text": t} for t in texts]}]

    @staticmethod
    def _user_turn(text: str, image_block: bool = True) -> list[dict]:
        """A single user turn: the image, then ``text`` (image-before-text, as the Qwen-VL families are prompted)."""
        if not image_block:
            return [{"role": "user", "content": text}]
        return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]

    @staticmethod
    def _centre(box: Sequence[float]) -> tuple[float, float]:
        return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
