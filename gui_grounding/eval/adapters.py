"""Model adapters: the prompt a model family expects and the coordinate frame it answers in.

An adapter turns a sample + its original screenshot into a :class:`Request` (chat messages with one image
placeholder, the image to send, and the context needed to read the answer back), and parses the model's answer into
a point in **original-image pixels** (or ``None`` when there is no valid answer). Adapters are independent of the
backend (hf, openai, vllm) that runs the model.

Registered adapters (``get_adapter(name)``; frames per ``gta1_and_peers.md`` section 4):

==================  ==========================================  ======================================================
name                frame of the answer                         prompt
==================  ==========================================  ======================================================
``gta1``            absolute pixels of the smart_resized image  GTA1 system prompt stating the resized H/W
``gta1-thinking``   same                                        our thinking variant (``<think>..<answer>(x,y)``)
``ui-tars-1.5``     absolute pixels of the smart_resized image  UI-TARS grounding prompt (user turn only)
                    (UI-TARS pixel bounds 100*28*28..16384*28*28)
``qwen2-vl``        0-1000 relative (also OS-Atlas, UGround)    OS-Atlas "(with point)" question
``qwen3-vl``        0-1000 relative                             Qwen3-VL cookbook pointing request, JSON ``point_2d``
==================  ==========================================  ======================================================

``default_adapter_for(model_type)`` picks the adapter of a checkpoint's ``config.model_type``.

Pixel budgets: every adapter names its family's published inference budget in ``default_budget`` (a
:class:`PixelBudget`: smart_resize factor, min and max pixels of the resized image, and where the numbers come from):

==================  ======  =========  ============  =======================================================
adapter             factor  min        max           source
==================  ======  =========  ============  =======================================================
``gta1``            28      3,136      8,847,360     GTA1 README inference snippet (``max_pixels=4096*2160``)
``gta1-thinking``   28      3,136      8,847,360     same as ``gta1`` (our prompt variant of that recipe)
``gta1-box``        28      3,136      8,847,360     same as ``gta1`` (our prompt variant of that recipe)
``ui-tars-1.5``     28      78,400     12,845,056    UI-TARS ``README_coordinates.md`` (100*28*28 .. 16384*28*28)
``qwen2-vl``        28      3,136      12,845,056    no published grounding budget: the Qwen2-VL processor default
``qwen3-vl``        32      65,536     16,777,216    no published grounding budget: the Qwen3-VL processor default
==================  ======  =========  ============  =======================================================

How ``resize`` reaches an adapter: a backend with a processor (hf, vllm) passes the processor's
``(factor, min_pixels, max_pixels)``, and the adapter resizes the image to exactly that smart_resize frame, so the
processor's own smart_resize is the identity and the frame the prompt states is the frame the model sees. API
backends pass ``None`` (no processor here): adapters then use their ``default_resize`` (= ``default_budget`` for the
adapters that pre-resize; ``None`` for the 0-1000 families, whose server resizes). Adapters whose family fixes its own
pixel bounds for every checkpoint (GTA1: 3,136 .. 8,847,360; UI-TARS-1.5) say so in ``fixed_pixel_bounds``; hf/vllm
backends apply those bounds to their processor unless the user overrides ``--min_pixels``/``--max_pixels``, and
otherwise keep the checkpoint's own processor budget. Evaluate a checkpoint trained at another budget with that
budget (``--max-pixels``).
``gui-grounding prompt`` (``gui_grounding.prompt_cli``) shows a request under ``default_budget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gui_grounding.frames import Frame
from gui_grounding.prompts import (
    build_messages,
    parse_answer_point,
    parse_json_point,
    parse_point_or_box,
    parse_point_tag,
)

# Qwen2/2.5-VL: patch 14 x spatial merge 2 (``gta1_and_peers.md`` 1.2 and 4).
QWEN_FACTOR = 28
# Qwen3-VL: patch 16 x spatial merge 2 (transformers Qwen3VLVisionConfig patch_size 16, spatial_merge_size 2).
QWEN3_FACTOR = 32
# The Qwen2-VL / Qwen2.5-VL processor default (checkpoints' preprocessor_config.json min_pixels 3136, max_pixels
# 12845056; QwenLM/Qwen3-VL#1052 quotes size {'shortest_edge': 3136, 'longest_edge': 12845056}); also GTA1's training
# script default (gta1_and_peers.md 1.2).
QWEN_PROCESSOR_MIN_PIXELS, QWEN_PROCESSOR_MAX_PIXELS = 3136, 12_845_056
# GTA1 inference: AutoProcessor.from_pretrained(model_path, min_pixels=3136, max_pixels=4096 * 2160) (Yan98/GTA1
# README.md:149-153, commit 81f0c4c; the README training run uses --max_pixels $((4096 * 2160)) too, README.md:95).
GTA1_MIN_PIXELS, GTA1_MAX_PIXELS = 3136, 4096 * 2160  # 8,847,360
# UI-TARS-1.5: MIN_PIXELS = 100*28*28, MAX_PIXELS = 16384*28*28 (UI-TARS README_coordinates.md; gta1_and_peers.md 4).
UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS = 100 * 28 * 28, 16384 * 28 * 28
# The Qwen3-VL processor default: preprocessor_config.json size {"shortest_edge": 65536, "longest_edge": 16777216}
# (Qwen3-VL-8B-Instruct's file as quoted in QwenLM/Qwen3-VL#1836; huggingface/transformers#41955 names 16,777,216 as
# the Qwen3-VL default max_pixels). Not re-read from the hub here.
QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS = 65_536, 16_777_216


@dataclass(frozen=True)
class PixelBudget:
    """A family's smart_resize budget at inference: ``factor`` (patch x merge), the resized image's pixel bounds, and
    ``source``, where the numbers come from (cited, or "processor default" when the family publishes none)."""

    factor: int
    min_pixels: int
    max_pixels: int
    source: str

    @property
    def resize(self) -> tuple[int, int, int]:
        """``(factor, min_pixels, max_pixels)``, the ``resize`` argument of :meth:`Adapter.build_request`."""
        return self.factor, self.min_pixels, self.max_pixels


GTA1_BUDGET = PixelBudget(QWEN_FACTOR, GTA1_MIN_PIXELS, GTA1_MAX_PIXELS,
                          "GTA1 README inference snippet: min_pixels=3136, max_pixels=4096*2160 "
                          "(Yan98/GTA1 README.md:149-153)")  # fmt: skip
UI_TARS_BUDGET = PixelBudget(QWEN_FACTOR, UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS,
                             "UI-TARS README_coordinates.md: MIN_PIXELS=100*28*28, MAX_PIXELS=16384*28*28")  # fmt: skip
QWEN2_VL_BUDGET = PixelBudget(QWEN_FACTOR, QWEN_PROCESSOR_MIN_PIXELS, QWEN_PROCESSOR_MAX_PIXELS,
                              "no published grounding budget: the Qwen2-VL processor default "
                              "(preprocessor_config.json min_pixels 3136, max_pixels 12845056)")  # fmt: skip
QWEN3_VL_BUDGET = PixelBudget(QWEN3_FACTOR, QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS,
                              "no published grounding budget: the Qwen3-VL processor default (preprocessor_config.json "
                              "size shortest_edge 65536, longest_edge 16777216; QwenLM/Qwen3-VL#1836)")  # fmt: skip

# UI-TARS grounding prompt. Source: the grounding template of bytedance/UI-TARS README_v1.md (L319-320, linked in
# bytedance/UI-TARS#157, where the maintainers answer "the prompt for ui-tars-1.5 follows the same way as the previous
# version. And ui-tars-1.5 indeed uses absolute coordinate."). The README itself was not re-read here: the exact text
# below is the one public UI-TARS grounding harnesses send (image first, then this text, no system prompt).
# Whatever the prompt, UI-TARS-1.5 answers in a fixed syntax such as
# ``click(start_box='<|box_start|>(x,y)<|box_end|>')`` (bytedance/UI-TARS#183), and only with points (#125).
UI_TARS_GROUNDING_PROMPT = (
    "Output only the coordinate of one point in your response. What element matches the following task: {instruction}"
)

# OS-Atlas point-grounding question (OS-Atlas's "(with bbox)" / "(with point)" prompts, gta1_and_peers.md section 4,
# Qwen2-VL row).
OS_ATLAS_POINT_PROMPT = (
    'In this UI screenshot, what is the position of the element corresponding to the command "{instruction}" '
    "(with point)?"
)

# Qwen3-VL pointing request. Source: QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb, which states the point
# format `{"point_2d": [x, y], "label": "object name/description"}` and prompts e.g. "Locate the free space on the white
# table on the right in this image. Output the point coordinates in JSON format."; its plot helper maps x/1000*W.
QWEN3_VL_POINT_PROMPT = (
    'Locate the UI element that matches the instruction "{instruction}" in this screenshot. '
    'Output the point coordinates in JSON format like {{"point_2d": [x, y], "label": "element"}}.'
)


@dataclass
class Request:
    """One model call. ``messages`` hold ``{"type": "image"}`` where the image goes; ``image`` is what is sent."""

    messages: list[dict]
    image: Any  # PIL.Image.Image, already resized when the adapter's frame requires it
    context: dict = field(default_factory=dict)  # e.g. original and resized sizes, used by parse()
    prompt_text: str = ""  # the full prompt as text, stored per sample in the predictions file


class Adapter:
    """Base class; subclasses document their prompt and coordinate frame in the class docstring.

    Class attributes:
        name: registry name, written to every predictions line.
        default_budget: the family's published inference budget (:class:`PixelBudget`, cited in its ``source``).
        default_resize: ``(factor, min_pixels, max_pixels)`` used when a backend passes ``resize=None`` (API
            backends): ``default_budget.resize`` for adapters that resize the image themselves; ``None`` when the
            adapter's frame does not depend on smart_resize (0-1000 families: the server resizes).
        fixed_pixel_bounds: ``(min_pixels, max_pixels)`` the model family's own inference code fixes; hf/vllm
            backends set their processor to these unless the user overrides them. ``None``: use the processor's.
    """

    name = "base"
    default_budget: PixelBudget | None = None  # every registered adapter sets one
    default_resize: tuple[int, int, int] | None = None
    fixed_pixel_bounds: tuple[int, int] | None = None

    def build_request(self, sample, image, *, resize: tuple[int, int, int] | None = None) -> Request:
        """Request for ``sample`` with its original ``image``; ``resize`` = ``(factor, min_pixels, max_pixels)`` of
        the processor when the adapter's frame depends on smart_resize."""
        raise NotImplementedError

    def parse(self, text: str, request: Request) -> tuple[float, float] | None:
        """The answer's point in original-image pixels, or ``None``."""
        raise NotImplementedError

    # ---- helpers shared by the adapters below -----------------------------------------------------------------------
    def _resized(self, image, resize: tuple[int, int, int] | None) -> tuple[Any, Frame]:
        """``image`` resized once to its smart_resize frame (bicubic, like GTA1), and that frame."""
        from PIL import Image

        factor, min_px, max_px = resize if resize is not None else self.default_resize
        width, height = image.size
        frame = Frame.for_image(width, height, factor=factor, min_pixels=min_px, max_pixels=max_px)
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        if (frame.resized_width, frame.resized_height) != (width, height):
            rgb = rgb.resize((frame.resized_width, frame.resized_height), Image.Resampling.BICUBIC)
        return rgb, frame

    @staticmethod
    def _user_turn(text: str) -> list[dict]:
        """A single user turn: the image, then ``text`` (image-before-text, as the Qwen-VL families are prompted)."""
        return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def messages_to_text(messages: list[dict]) -> str:
    """Readable one-string form of chat ``messages`` (``role: text``, ``<image>`` where the image goes).

    This is the ``prompt`` stored per predictions line: the same for every backend (it is not the chat-template
    rendering, which depends on the tokenizer).
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


class GTA1Adapter(Adapter):
    """GTA1 / Qwen2.5-VL convention: absolute pixels in the smart_resize frame, GTA1 system prompt.

    Source: GTA1 ``src/grpo_grounding.py`` and its README inference recipe (``gta1_and_peers.md`` 1.2).

    * Image: resized **once** with smart_resize (``resize`` = the processor's ``(factor, min_pixels, max_pixels)``;
      ``None`` -> ``default_budget``, GTA1's published inference budget: factor 28, 3,136 .. 4096*2160 = 8,847,360
      pixels, README.md:149-153) to ``W' x H'``; that resized image is sent.
    * Prompt: system = GTA1's prompt stating "height {H'} and width {W'}" (``gui_grounding.prompts``, byte for byte);
      user = image, then the instruction. ``mode="thinking"`` uses our thinking variant (answer inside ``<answer>``).
    * Parse: the **first** ``(x,y)`` pair, decimals allowed (GTA1 inference rule, ``parse_point(strict=False)``),
      in resized pixels, mapped back per axis: ``x * W / W'``, ``y * H / H'`` (``Frame.point_to_original``).

    Example: a 1280x720 screenshot with resize ``(28, 3136, 200704)`` is sent at 588x336; answer ``"(294,168)"`` ->
    ``(640.0, 360.0)``.
    """

    name = "gta1"
    mode = "non_thinking"
    default_budget = GTA1_BUDGET
    default_resize = GTA1_BUDGET.resize
    # GTA1's inference code fixes the processor budget (AutoProcessor(min_pixels=3136, max_pixels=4096*2160),
    # README.md:149-153): hf/vllm backends use it unless --min-pixels/--max-pixels override it.
    fixed_pixel_bounds = (GTA1_BUDGET.resize[1], GTA1_BUDGET.resize[2])

    def build_request(self, sample, image, *, resize=None) -> Request:
        resized, frame = self._resized(image, resize)
        messages = build_messages(sample.instruction, frame.resized_height, frame.resized_width, self.mode,
                                  image_block=True)  # fmt: skip
        return Request(messages, resized, {"frame": frame}, messages_to_text(messages))

    def parse(self, text, request):
        point = parse_answer_point(text, self.mode, strict=False)
        return request.context["frame"].point_to_original(point) if point is not None else None


class GTA1ThinkingAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our thinking prompt (``--prompt_mode thinking`` checkpoints).

    Budget: GTA1's (``GTA1_BUDGET``), as the variant only changes the prompt.

    Prompt: ``gui_grounding.prompts.THINKING_SYSTEM_PROMPT`` (resized H/W stated); parse: the first ``(x,y)`` inside
    the single ``<answer>...</answer>`` block (none or several blocks -> ``None``), resized pixels -> original.
    """

    name = "gta1-thinking"
    mode = "thinking"


class GTA1BoxAdapter(GTA1Adapter):
    """GTA1 frame and image handling with our box prompt (``--prompt_mode box`` checkpoints, e.g. trained with the
    ``iou`` / ``gaussian_coverage`` rewards). Budget: GTA1's (``GTA1_BUDGET``).

    Prompt: ``gui_grounding.prompts.BOX_SYSTEM_PROMPT`` (resized H/W stated, answer ``[x1,y1,x2,y2]``); parse: the
    centre of the first box (``parse_answer_point(strict=False)``, the ScreenSpot-Pro convention for box answers),
    resized pixels -> original.
    """

    name = "gta1-box"
    mode = "box"


class UITars15Adapter(Adapter):
    """UI-TARS-1.5: absolute pixels in the smart_resize frame with UI-TARS's own pixel bounds, grounding prompt.

    * Image: smart_resized once (factor 28) with UI-TARS's bounds MIN 100*28*28 = 78,400 and MAX 16384*28*28 =
      12,845,056 pixels (UI-TARS ``README_coordinates.md``; ``gta1_and_peers.md`` 4). hf/vllm backends apply these
      bounds to the processor unless ``--min_pixels``/``--max_pixels`` override them, and pass the result as
      ``resize``; ``resize=None`` (API backends) uses them directly.
    * Prompt: no system prompt (the chat template's default applies); user = image, then
      ``"Output only the coordinate of one point in your response. What element matches the following task:
      {instruction}"``. Source: the grounding template of bytedance/UI-TARS README_v1.md, which the maintainers
      say 1.5 keeps (bytedance/UI-TARS#157); see ``UI_TARS_GROUNDING_PROMPT``.
    * Parse: answers look like ``(x,y)``, ``<|box_start|>(x,y)<|box_end|>`` or ``click(start_box='(x,y)')`` (the
      fixed 1.5 action syntax, bytedance/UI-TARS#183): the first ``(x,y)`` (the centre if it opens a
      ``(x1,y1),(x2,y2)`` box), else ``<point>x y</point>``; resized pixels -> original (``Frame.point_to_original``).
    """

    name = "ui-tars-1.5"
    default_budget = UI_TARS_BUDGET
    default_resize = UI_TARS_BUDGET.resize
    fixed_pixel_bounds = (UI_TARS_MIN_PIXELS, UI_TARS_MAX_PIXELS)

    def build_request(self, sample, image, *, resize=None) -> Request:
        resized, frame = self._resized(image, resize)
        messages = self._user_turn(UI_TARS_GROUNDING_PROMPT.format(instruction=sample.instruction))
        return Request(messages, resized, {"frame": frame}, messages_to_text(messages))

    def parse(self, text, request):
        point = parse_point_or_box(text) or parse_point_tag(text)
        return request.context["frame"].point_to_original(point) if point is not None else None


class _Norm1000Adapter(Adapter):
    """Shared part of the 0-1000 families: the original image is sent (the server/processor resizes it; relative
    coordinates do not depend on that resize) and answers map back with ``x/1000*W``, ``y/1000*H``."""

    template = "{instruction}"

    def build_request(self, sample, image, *, resize=None) -> Request:
        width, height = image.size
        messages = self._user_turn(self.template.format(instruction=sample.instruction))
        # Frame with resized == original: only its norm1000 conversion is used (frames.py owns that maths).
        frame = Frame(width, height, width, height)
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        return Request(messages, rgb, {"frame": frame}, messages_to_text(messages))

    def _read(self, text: str) -> tuple[float, float] | None:
        raise NotImplementedError

    def parse(self, text, request):
        point = self._read(text)
        return request.context["frame"].point_from_norm1000(point) if point is not None else None


class Qwen2VLAdapter(_Norm1000Adapter):
    """Qwen2-VL convention (also OS-Atlas-7B, UGround-V1, UI-TARS-1.0): 0-1000 relative coordinates.

    * Image: the original screenshot (no pre-resize; ``resize`` is ignored). The processor / server resizes it;
      ``default_budget`` is the Qwen2-VL processor default, 3,136 .. 12,845,056 pixels (no published grounding budget).
    * Prompt: no system prompt; user = image, then OS-Atlas's point question ``In this UI screenshot, what is the
      position of the element corresponding to the command "{instruction}" (with point)?`` (OS-Atlas's point
      prompt, ``gta1_and_peers.md`` 4).
    * Parse: a box ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>`` (tokens kept or stripped by decoding) -> its centre,
      else the first ``(x,y)``; then ``x/1000*W``, ``y/1000*H`` in original pixels (``Frame.point_from_norm1000``).

    Example on 1280x720: ``"(500,500)"`` -> ``(640.0, 360.0)``.
    """

    name = "qwen2-vl"
    template = OS_ATLAS_POINT_PROMPT
    default_budget = QWEN2_VL_BUDGET

    def _read(self, text):
        return parse_point_or_box(text)


class Qwen3VLAdapter(_Norm1000Adapter):
    """Qwen3-VL convention (also Gelato, Holo2): 0-1000 relative coordinates, JSON points.

    * Image: the original screenshot (Qwen3-VL's processor smart_resizes internally and relative values map straight
      onto the original: QwenLM/Qwen3-VL#1640, ``gta1_and_peers.md`` 4); ``resize`` is ignored. ``default_budget`` is
      the Qwen3-VL processor default, factor 32, 65,536 .. 16,777,216 pixels (no published grounding budget).
    * Prompt: no system prompt; user = image, then ``Locate the UI element that matches the instruction
      "{instruction}" in this screenshot. Output the point coordinates in JSON format like {"point_2d": [x, y],
      "label": "element"}.`` Source: QwenLM/Qwen3-VL ``cookbooks/spatial_understanding.ipynb`` (point format
      ``{"point_2d": [x, y], "label": ...}``, request "Output the point coordinates in JSON format.").
    * Parse: the first ``"point_2d": [x, y]`` (in a list and/or a ```` ```json ```` fence too), else the centre of the
      first ``"bbox_2d": [x1, y1, x2, y2]``, else a ``(x,y)`` / box as for ``qwen2-vl``; then ``x/1000*W``,
      ``y/1000*H`` (``Frame.point_from_norm1000``).
    """

    name = "qwen3-vl"
    template = QWEN3_VL_POINT_PROMPT
    default_budget = QWEN3_VL_BUDGET

    def _read(self, text):
        return parse_json_point(text) or parse_point_or_box(text)


ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls for cls in (GTA1Adapter, GTA1ThinkingAdapter, GTA1BoxAdapter, UITars15Adapter, Qwen2VLAdapter, Qwen3VLAdapter)
}

# --prompt_mode of a GTA1-style training run -> the adapter that evaluates it with the same prompt and parser.
PROMPT_MODE_ADAPTERS = {"non_thinking": "gta1", "thinking": "gta1-thinking", "box": "gta1-box"}

# config.model_type -> adapter name (the family's native convention).
DEFAULT_ADAPTER_FOR_MODEL_TYPE = {
    "qwen2_5_vl": "gta1",
    "qwen2_vl": "qwen2-vl",
    "qwen3_vl": "qwen3-vl",
    "qwen3_vl_moe": "qwen3-vl",
}


def get_adapter(name: str) -> Adapter:
    """A new adapter instance by registry name.

    Raises:
        ValueError: unknown name; the message lists the registered names.
    """
    if name not in ADAPTERS:
        raise ValueError(f"unknown adapter {name!r}; registered adapters: {', '.join(ADAPTERS)}")
    return ADAPTERS[name]()


def resolve_adapter(adapter: str | Adapter) -> Adapter:
    """``adapter`` itself when it is an :class:`Adapter`, else ``get_adapter(adapter)``."""
    return adapter if isinstance(adapter, Adapter) else get_adapter(adapter)


def default_adapter_for(model_type: str) -> Adapter:
    """The adapter of a checkpoint's ``config.model_type``: qwen2_5_vl -> gta1 (Qwen2.5-VL, UI-TARS-1.5, GTA1 and
    OpenCUA share the architecture; use ``ui-tars-1.5`` explicitly for UI-TARS), qwen2_vl -> qwen2-vl,
    qwen3_vl / qwen3_vl_moe -> qwen3-vl.

    Raises:
        ValueError: no default for ``model_type``; the message lists the known model types and adapter names.
    """
    if model_type not in DEFAULT_ADAPTER_FOR_MODEL_TYPE:
        known = ", ".join(f"{k} -> {v}" for k, v in DEFAULT_ADAPTER_FOR_MODEL_TYPE.items())
        raise ValueError(f"no default adapter for model_type {model_type!r} (known: {known}); pick one explicitly "
                         f"from: {', '.join(ADAPTERS)}")  # fmt: skip
    return get_adapter(DEFAULT_ADAPTER_FOR_MODEL_TYPE[model_type])
