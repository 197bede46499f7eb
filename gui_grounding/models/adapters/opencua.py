"""OpenCUA family (``config.model_type == "opencua"``): Qwen2.5-VL weights with 1D RoPE and Kimi-VL's tokenizer and
chat template (xlang-ai/OpenCUA ``model/README.md:111-116`` at 1d70f20: "Do not use the default transformers and vllm
classes to load the model"). OpenCUA-7B/32B answer a ``pyautogui`` action in **absolute pixels of the smart_resized
image** (answer frame ``resized``; ``model/README.md:268-300``). The Oct-2025 GTA1-7B (Salesforce/GTA1-7B) is trained
from OpenCUA-7B.

The project's ``hf`` backend cannot load this family (``vlm_r1.modules`` has no ``opencua`` module: the checkpoint
needs its own remote code), so its profiles list ``vllm`` (``OpenCUAForConditionalGeneration``, vllm-project/vllm
PR #29068, ``vllm/model_executor/models/opencua.py`` at 4b387bc) and ``openai`` (a served model) only.
"""

from __future__ import annotations

import re

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import Adapter, _fmt
from gui_grounding.models.adapters.qwen2_5_vl import QWEN_FACTOR, QWEN_PROCESSOR_MAX_PIXELS, QWEN_PROCESSOR_MIN_PIXELS
from gui_grounding.models.profile_types import Profile, PublishedScore
from gui_grounding.models.prompts import answer_numbers

_OPENCUA = "xlang-ai/OpenCUA model/README.md (1d70f20)"

# OpenCUA's grounding request, byte for byte: the system prompt of model/README.md:171-174 (= model/inference/
# huggingface_inference.py:34-37); the user turn is the image, then the instruction (:175-185).
OPENCUA_GROUNDING_SYSTEM = (
    "You are a GUI agent. You are given a task and a screenshot of the screen. "
    "You need to perform a series of pyautogui actions to complete the task."
)
# model/README.md:290-300: OpenCUA-7B/32B coordinates are on smart_resize(factor=28, min_pixels=3136,
# max_pixels=12845056) of the screenshot; the image processor resizes with the same rule (Qwen2VLImageProcessor).
OPENCUA_BUDGET = PixelBudget.published(
    f"{_OPENCUA}:290-300: smart_resize(factor=28, min_pixels=3136, max_pixels=12845056), the frame of OpenCUA-7B/32B "
    "answers",
    factor=QWEN_FACTOR,
    min_pixels=QWEN_PROCESSOR_MIN_PIXELS,
    max_pixels=QWEN_PROCESSOR_MAX_PIXELS,
)
# OpenCUA reads an action's coordinates as ``x=([\d.]+),\s*y=([\d.]+)`` on a ``pyautogui.`` line
# (evaluation/agentnetbench/agent/opencua.py:355-360,414-416 at 1d70f20); here: the first ``pyautogui.<name>(x=X, y=Y``
# with unsigned integer or decimal numbers (the README's expected answer is ``pyautogui.click(x=1443, y=343)``, :239)
_NUM = r"(\d+(?:\.\d+)?)"
_PYAUTOGUI_XY_RE = re.compile(rf"pyautogui\.[A-Za-z_]\w*\(\s*x={_NUM},\s*y={_NUM}")


class OpenCUAAdapter(Adapter):
    """OpenCUA's grounding request (xlang-ai/OpenCUA ``model/README.md:160-240`` at 1d70f20): a ``pyautogui`` click in
    absolute pixels of the smart_resized image.

    * Image: smart_resized once under the run's budget (``default_budget``: OpenCUA's, factor 28, 3,136 ..
      12,845,056 pixels, :290-300).
    * Prompt: system = :data:`OPENCUA_GROUNDING_SYSTEM`; user = image, then the instruction (:169-185).
    * Parse: the first ``pyautogui.<action>(x=X, y=Y`` (unsigned numbers, decimals allowed; OpenCUA's own reading,
      ``evaluation/agentnetbench/agent/opencua.py:360,416``), resized pixels -> original (``x * W / W'``). OpenCUA's
      grounding request has no "no target" answer.
    * SFT target: ``pyautogui.click(x=X, y=Y)`` (the README's answer form, :239).

    Example: a 1920x1080 screenshot is sent at 1932x1092; ``pyautogui.click(x=966, y=546)`` -> ``(960.0, 540.0)``.
    """

    name = "opencua"
    answer_frame = "resized"
    # the default of no model_type: the project loads no OpenCUA checkpoint itself (``--profile gta1-7b`` or
    # ``--adapter opencua`` name it)
    model_types = ()
    default_budget = OPENCUA_BUDGET

    def messages(self, instruction, frame, *, image_block=True):
        return self._system_turn([OPENCUA_GROUNDING_SYSTEM], image_block) + self._user_turn(instruction, image_block)

    def parse_answer(self, text, *, strict=True):
        m = _PYAUTOGUI_XY_RE.search(text)
        return answer_numbers(m.groups(), integer=strict) if m else None

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return f"pyautogui.click(x={_fmt(x)}, y={_fmt(y)})"


ADAPTERS = (OpenCUAAdapter,)


# ---------------------------------------------------------------------------------------------------------------------
# this family's published checkpoints (``PROFILES``, collected by gui_grounding.models.profiles)
_GTA1_CARD = "https://huggingface.co/Salesforce/GTA1-7B (model card), row 'GTA1 (Ours) 7B'"

PROFILES = (
    Profile(
        "gta1-7b",
        "Salesforce/GTA1-7B",
        "opencua",
        "opencua",
        OPENCUA_BUDGET,
        512,
        ("vllm", "openai"),
        {
            "adapter": "unverified: the GTA1-7B card's inference snippet could not be read (the stored copies hold "
            f"its results table only); OpenCUA-7B's own grounding request instead ({_OPENCUA}:160-240), the base "
            "model's (the card: 'OpenCUA-7B ... applied as our baseline models')",
            "max_new_tokens": f"unverified for GTA1-7B: OpenCUA's example ({_OPENCUA}:206-212: max_new_tokens=512, "
            "temperature=0)",
            "backends": "the hf backend cannot load OpenCUA checkpoints (1D RoPE, Kimi-VL tokenizer: remote code, "
            f"{_OPENCUA}:111-116); vLLM serves OpenCUAForConditionalGeneration (vllm-project/vllm#29068) with "
            "trust_remote_code",
            "model": "model_type opencua unverified: the card's config.json could not be read; OpenCUA's configuration "
            "declares model_type 'opencua', and a duplicate of Salesforce/GTA1-32B on the Hub (Adocados/GTA1-32B-vllm) "
            "ships configuration_opencua.py / modeling_opencua.py",
            "refusal": "OpenCUA's grounding request has no 'no target' answer; the GTA1-7B card's reading could not "
            "be read",
            "decoding": "greedy only (OpenCUA's example: temperature=0)",
        },
        {},
        (
            PublishedScore("screenspot-v2", 93.4, _GTA1_CARD),
            PublishedScore("screenspot-pro", 55.5, _GTA1_CARD),
            PublishedScore(
                "osworld-g",
                60.1,
                _GTA1_CARD,
                {"subset": "plain"},
                denominator="unstated",
                note="the card's OSWORLD-G column; Yan98/GTA1 README.md:22 (81f0c4c) gives 93.4 / 55.5 / 60.1 with "
                "the first two benchmark names swapped",
            ),
            PublishedScore(
                "osworld-g",
                68.8,
                _GTA1_CARD,
                {"subset": "refined"},
                denominator="unstated",
                note="the card's OSWORLD-G-Refined column",
            ),
        ),
        "The Oct-2025 GTA1-7B, trained from OpenCUA-7B (not GTA1-7B-2507, a Qwen2.5-VL). Verified: its four numbers "
        "(the card's table, read through a mirror of the card in the pages corpus). Unverified: its prompt, pixel "
        "budget, parser and decoding (the card's inference snippet could not be read): the adapter, budget and "
        "max_new_tokens are OpenCUA-7B's published grounding settings, labelled as such. GTA1's evaluation code for "
        "OSWorld-G is not published: its refusal rule is unstated",
    ),
)
