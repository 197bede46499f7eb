"""Qwen3-VL family (``config.model_type == "qwen3_vl"``; also Gelato, Holo2): JSON points on a ``[0, 1000]`` grid
relative to the image (answer frame ``norm1000``)."""

from __future__ import annotations

import json

from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters.base import _fmt
from gui_grounding.models.adapters.qwen2_vl import Norm1000Adapter
from gui_grounding.models.profile_types import ONE_GPU, Profile, PublishedScore
from gui_grounding.models.prompts import parse_json_point, parse_point_or_box

# Qwen3-VL: patch 16 x spatial merge 2 (transformers Qwen3VLVisionConfig patch_size 16, spatial_merge_size 2). API
# backends only; the training/hf path reads the factor from the loaded processor (vlm_r1.modules).
QWEN3_FACTOR = 32
# The Qwen3-VL processor default: preprocessor_config.json size {"shortest_edge": 65536, "longest_edge": 16777216}
# (Qwen3-VL-8B-Instruct's file as quoted in QwenLM/Qwen3-VL#1836; huggingface/transformers#41955 names 16,777,216 as
# the Qwen3-VL default max_pixels). Not re-read from the hub here.
QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS = 65_536, 16_777_216
QWEN3_VL_BUDGET = PixelBudget.published(
    "no published grounding budget: the Qwen3-VL processor default (preprocessor_config.json size shortest_edge "
    "65536, longest_edge 16777216; QwenLM/Qwen3-VL#1836; patch 16 x merge 2)",
    factor=QWEN3_FACTOR,
    min_pixels=QWEN3_VL_MIN_PIXELS,
    max_pixels=QWEN3_VL_MAX_PIXELS,
)

# Qwen3-VL pointing request. Source: QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb, which states the point
# format `{"point_2d": [x, y], "label": "object name/description"}` and prompts e.g. "Locate the free space on the white
# table on the right in this image. Output the point coordinates in JSON format."; its plot helper maps x/1000*W.
QWEN3_VL_POINT_PROMPT = (
    'Locate the UI element that matches the instruction "{instruction}" in this screenshot. '
    'Output the point coordinates in JSON format like {{"point_2d": [x, y], "label": "element"}}.'
)


class Qwen3VLAdapter(Norm1000Adapter):
    """Qwen3-VL convention (also Gelato, Holo2): 0-1000 relative coordinates, JSON points.

    * Image: smart_resized once under the run's pixel budget (``default_budget``: the Qwen3-VL processor default,
      factor 32, 65,536 .. 16,777,216 pixels; no published grounding budget), exactly what the processor would do
      itself; relative values map straight onto the original (QwenLM/Qwen3-VL#1640).
    * Prompt: no system prompt; user = image, then ``Locate the UI element that matches the instruction
      "{instruction}" in this screenshot. Output the point coordinates in JSON format like {"point_2d": [x, y],
      "label": "element"}.`` Source: QwenLM/Qwen3-VL ``cookbooks/spatial_understanding.ipynb`` (point format
      ``{"point_2d": [x, y], "label": ...}``, request "Output the point coordinates in JSON format.").
    * Parse: the first ``"point_2d": [x, y]`` (in a list and/or a ```` ```json ```` fence too), else the centre of the
      first ``"bbox_2d": [x1, y1, x2, y2]``, else a ``(x,y)`` / box as for ``qwen2-vl``; then ``x/1000*W``,
      ``y/1000*H`` (``Frame.point_from_norm1000``).
    * SFT target: ``{"point_2d": [x, y], "label": "element"}`` on the 0-1000 grid (the cookbook's format).
    """

    name = "qwen3-vl"
    model_types = ("qwen3_vl", "qwen3_vl_moe")
    template = QWEN3_VL_POINT_PROMPT
    default_budget = QWEN3_VL_BUDGET
    supports_zoom_tool = True  # Qwen's Hermes tool calls (gui_grounding.models.zoom_tool)

    def parse_answer(self, text, *, strict=True):
        return parse_json_point(text) or parse_point_or_box(text)

    def sft_target(self, box, instruction):
        x, y = self._centre(box)
        return json.dumps({"point_2d": [int(_fmt(x)), int(_fmt(y))], "label": "element"})


ADAPTERS = (Qwen3VLAdapter,)


# ---------------------------------------------------------------------------------------------------------------------
# this family's published checkpoints (``PROFILES``, collected by gui_grounding.models.profiles); sources: public
# repositories at the commits named, model cards by URL
PROFILES = (
    Profile(
        "qwen3-vl-8b",
        "Qwen/Qwen3-VL-8B-Instruct",
        "qwen3_vl",
        "qwen3-vl",
        QWEN3_VL_BUDGET,
        512,
        ONE_GPU,
        {
            "adapter": "QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb (point_2d JSON on the 0-1000 grid); a "
            "paraphrase of its pointing request, not the request behind the published numbers (notes)",
            "max_new_tokens": "ZJU-REAL/ClawGUI clawgui-eval/scripts/infer/transformers/qwen3vl_run_transformers.sh:21-22 "
            "(d990d3e): MAX_TOKENS=512, TEMPERATURE=0.0 (its reproduction of the official 54.6)",
            "backends": "8B: one GPU",
        },
        {},
        (
            PublishedScore(
                "screenspot-pro", 54.6, "ZJU-REAL/ClawGUI clawgui-eval/README.md:462 (d990d3e), 'official' column"
            ),
        ),
        "pixel budget as ClawGUI pins it (clawgui-eval/scripts/infer/transformers/qwen3vl_run_transformers.sh:29-30: "
        "MIN_PIXELS=65536, MAX_PIXELS=16777216, the processor default). Qwen's own GUI numbers use a computer_use "
        "tool-call system prompt (ClawGUI injects it from its data files, SYSTEM_PROMPT=call_user, :43). A Qwen3-VL "
        "contributor shared the OSWorld-G request as two issue attachments (QwenLM/Qwen3-VL#1881: "
        "qwen3vl_osworld_g.py, agent_function_call_og.py); they could not be read here, so their system prompt, "
        "tool schema, image budget and parser are UNVERIFIED and not reproduced. This profile keeps the cookbook "
        "pointing request, labelled a paraphrase: expect a gap",
    ),
)
