"""The zoom tool in training rollouts (``--zoom_tool true``, issue 30): the ``gui_grounding`` task's
:class:`vlm_r1.tool_rollout.RolloutEnvironment`, and the per-rollout facts the stage rewards read.

:class:`ZoomEnvironment` answers each turn of a rollout (``step``):

* a turn without a ``<tool_call>`` is the final answer (``None``);
* a valid call (``gui_grounding.models.zoom_tool.parse_call``) on a region in the row's answer frame gets the crop:
  the row's screenshot is opened again at full resolution (``groundwork.validate.open_image``: the displayed frame,
  the one image-frame rule; the row's ``image`` is the budget-resized copy), cut to the window
  (``zoom_tool.region_window``: clamped to the image, rounded outwards), resized by the run's pixel budget
  (``groundwork.pixel_budget.resize_for_model``) and returned as a user turn (``zoom_tool.response_messages``). Its
  ``info`` records the window in original pixels, the crop's frame ``[W, H, W', H']`` and the per-call cost;
* a call refused by the rules (:data:`gui_grounding.models.zoom_tool.REJECTS`), or one past ``--max_zoom_calls``,
  ends the rollout (``ToolStop``), so its final text is that call and every reward scores it as no answer.

:func:`final_point` is the one reading of a rollout for the rewards: the final answer's point in **original pixels**
of the screenshot (mapped back through every window, ``zoom_tool.crop_point_to_original``), or ``None``.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from typing import Any

from groundwork import validate
from groundwork.geometry import valid_box, valid_size
from groundwork.pixel_budget import resize_for_model
from groundwork.validate import is_coord
from gui_grounding.models import zoom_tool
from gui_grounding.models.frames import CropWindow, Frame, point_in_box, zoom_window
from gui_grounding.models.rows import row_adapter, row_frame
from vlm_r1.answers import completion_text
from vlm_r1.tool_rollout import ToolStop, ToolTurn

logger = logging.getLogger(__name__)

#: the most calls ``--max_zoom_calls`` allows (each call adds an image to the sequence)
MAX_ZOOM_CALLS = 8


class ZoomEnvironment:
    """The crop tool of one run (see the module docstring). ``budget``: the run's pixel budget; ``max_calls``: the
    limit; ``cost``: ``--zoom_cost``, recorded per call for the ``zoom_cost`` reward."""

    tool_name = zoom_tool.ZOOM_TOOL_NAME
    reasons = zoom_tool.REJECTS

    #: screenshots kept decoded: the G rollouts of a group crop the same screenshot, so it is read once per group
    CACHED_IMAGES = 16

    def __init__(self, budget: Any, max_calls: int = 1, cost: float = 0.0):
        self.budget = budget
        self.max_calls = int(max_calls)
        self.cost = float(cost)
        self._images: dict[str, Any] = {}

    def _screenshot(self, path: str):
        """The screenshot at ``path`` in its displayed frame (``groundwork.validate.open_image``), decoded once for the
        rollouts that crop it (at most :attr:`CACHED_IMAGES` kept, oldest dropped first). Raises what
        ``open_image`` raises."""
        image = self._images.pop(path, None)
        if image is None:
            image = validate.open_image(path)
            image.load()
        self._images[path] = image  # most recent last
        while len(self._images) > self.CACHED_IMAGES:
            self._images.pop(next(iter(self._images)))
        return image

    def step(self, row: dict, turns: list[dict]) -> ToolTurn | ToolStop | None:
        """The tool's answer to the last of ``turns`` (see the module docstring). Never raises for a call or a row
        the rules refuse: an image that no longer opens is ``ToolStop("unsendable")``."""
        call = zoom_tool.parse_call(turns[-1]["text"])
        if call is None:
            return None
        if len(_crops(turns)) >= self.max_calls:
            return ToolStop("over_limit")
        if call.reason is not None:
            return ToolStop(call.reason)
        try:
            screen = row_frame(row)
        except (KeyError, ValueError) as err:  # a row whose sizes are unusable: nothing can be cropped
            return ToolStop("unsendable", {"why": str(err)[:200]})
        adapter, crops = row_adapter(row), _crops(turns)
        # a further call names a region of the crop it sees: its frame is the last crop's, offset by its window
        frame, offset = screen, (0, 0)
        if crops:
            frame, offset = Frame(*crops[-1]["crop_frame"]), tuple(crops[-1]["window"][:2])
        window = zoom_tool.region_window(call.region, adapter, frame)
        if isinstance(window, str):
            return ToolStop(window)
        window = CropWindow(
            window.x_min + offset[0], window.y_min + offset[1], window.x_max + offset[0], window.y_max + offset[1]
        )
        try:
            crop_frame = self.budget.frame(window.width, window.height)
            image = self._screenshot(row["image_path"])
            if image.size != (screen.width, screen.height):
                return ToolStop("unsendable", {"why": "image size changed since the row was built"})
            crop = resize_for_model(window.crop(image), self.budget)
        except (OSError, ValueError) as err:  # an aspect ratio smart_resize refuses; an image gone or broken
            return ToolStop("unsendable", {"why": str(err)[:200]})
        info = {
            "window": window.as_list(),
            "crop_frame": [crop_frame.width, crop_frame.height, crop_frame.resized_width, crop_frame.resized_height],
            "cost": self.cost,
        }
        return ToolTurn(zoom_tool.response_messages(adapter, crop_frame), [crop], info)


def final_point(row: dict, turns: Sequence[dict] | None, text: str) -> tuple[float, float] | None:
    """The final answer of a rollout in original pixels of the screenshot, or ``None`` (no answer: the text is a
    call, or parses to no point). ``turns``: the rollout's ``rollout_turns`` (``None``: a single-turn rollout, the
    point is in the row's answer frame of the screenshot). Total: any row and turns give a point or ``None``."""
    if zoom_tool.is_call(text):
        return None
    try:
        adapter = row_adapter(row)
        point = adapter.parse_answer(text)
        if point is None:
            return None
        crops = _crops(turns)
        if not crops:
            return adapter.point_to_original(point, row_frame(row))
        last = crops[-1]
        return zoom_tool.crop_point_to_original(point, adapter, Frame(*last["crop_frame"]), CropWindow(*last["window"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def _numbers(value: Any, n: int) -> bool:
    """True when ``value`` is a list of ``n`` coordinates (``groundwork.validate.is_coord``: a number, no bool, finite,
    within +-1e7; a huge int is refused without converting it)."""
    return isinstance(value, list) and len(value) == n and all(is_coord(v) for v in value)


def _crops(turns: Sequence[dict] | None) -> list[dict]:
    """The ``info`` of each tool turn that cropped (``window``: 4 finite numbers; ``crop_frame``: 4 finite numbers,
    sides at least 1; ``cost``: a finite number, 0 when absent), in order. Anything else (a hand-made or corrupted
    turn record) is no crop, so every reading of the turns stays total."""
    out = []
    if not isinstance(turns, (list, tuple)):
        return out
    for t in turns:
        info = t.get("info") if isinstance(t, dict) else None
        if not isinstance(info, dict) or not _numbers(info.get("window"), 4):
            continue
        frame, cost = info.get("crop_frame"), info.get("cost", 0.0)
        if not _numbers(frame, 4) or min(frame) < 1 or not _numbers([cost], 1):
            continue
        out.append(info)
    return out


def windows_of(turns: Sequence[dict] | None) -> list[list[int]]:
    """The windows (original pixels of the screenshot) a rollout cropped, in order."""
    return [info["window"] for info in _crops(turns)]


def calls_cost(turns: Sequence[dict] | None) -> float:
    """The summed ``--zoom_cost`` of a rollout's crops."""
    return float(sum(info.get("cost", 0.0) for info in _crops(turns)))


def _blocks(prompt: list[dict]) -> list[dict]:
    """A training row's prompt (plain strings) in content blocks, the screenshot's image part before the first user
    text (TRL's ``prepare_multimodal_messages`` rule, so it renders to the same text), so further turns can hold
    their own image parts."""
    out, placed = [], False
    for m in prompt:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
            if m["role"] == "user" and not placed:
                content = [{"type": "image"}, *content]
                placed = True
        out.append({"role": m["role"], "content": content})
    return out


def sft_window(row: dict, fraction: float, grid: int = 0) -> CropWindow:
    """The window a zoom SFT sample calls (original pixels). ``grid`` 0: ``fraction`` of each side
    (``frames.zoom_window``, the ``--tts zoom`` window rule), centred on the first target's centre moved by up to a
    quarter window on each axis, drawn from a generator seeded by the row's ``sample_id`` (the same rows on every run
    and rank). ``grid`` N > 0: the cell of an N x N grid over the screenshot that holds the target's centre (integer
    edges ``floor(k * W / N)``).

    Raises:
        KeyError, IndexError: a column is missing or the row has no target.
        ValueError: the sizes (:func:`gui_grounding.models.rows.row_frame`) or the first target box
            (:func:`groundwork.geometry.valid_box`) are unusable."""
    frame = row_frame(row)
    target = valid_box(row["target_boxes"][0])
    if target is None:
        raise ValueError(f"row {str(row.get('sample_id'))[:80]}: unusable first target box")
    x0, y0, x1, y1 = target
    if grid > 0:
        i = min(grid - 1, max(0, int((x0 + x1) / 2 * grid // frame.width)))
        j = min(grid - 1, max(0, int((y0 + y1) / 2 * grid // frame.height)))
        edges_x = [k * frame.width // grid for k in (i, i + 1)]
        edges_y = [k * frame.height // grid for k in (j, j + 1)]
        return CropWindow(edges_x[0], edges_y[0], edges_x[1], edges_y[1])
    rng = random.Random(f"zoom-sft:{row['sample_id']}")
    dx = rng.uniform(-0.25, 0.25) * fraction * frame.width
    dy = rng.uniform(-0.25, 0.25) * fraction * frame.height
    return zoom_window(((x0 + x1) / 2 + dx, (y0 + y1) / 2 + dy), frame.width, frame.height, fraction)


def zoom_sft_rows(dataset: Any, budget: Any, fraction: float, grid: int = 0):
    """SFT rows of the zoom tool: each row of ``dataset`` (built with the tool in its prompt) becomes two.

    1. ``zoom_call``: the prompt, and as target the call of :func:`sft_window`'s window in the row's answer frame
       (``Adapter.boxes_to_answer``; the task's ``sft_completion`` writes ``zoom_tool.call_text``).
    2. the prompt + that call + the tool's answer (the crop, ``zoom_tool.response_messages``), and as target the
       answer in the crop's frame (``target_boxes_answer`` replaced by the targets in the crop's answer frame; the
       column ``crop_window`` makes :func:`zoom_images_transform` add the crop as the second image).

    A sample whose window the budget cannot send (aspect ratio over 200) or whose target is unusable is dropped and
    counted in the log. Returns a ``datasets.Dataset`` with :func:`zoom_images_transform`."""
    from datasets import Dataset

    rows, dropped = [], 0
    for row in dataset.with_format(None):
        try:
            adapter, frame = row_adapter(row), row_frame(row)
            window = sft_window(row, fraction, grid)
            crop_frame = budget.frame(window.width, window.height)
        except (KeyError, IndexError, TypeError, ValueError):
            dropped += 1
            continue
        region = [float(v) for v in adapter.boxes_to_answer([window.as_list()], frame)[0]]
        prompt = _blocks(row["prompt"])
        shifted = [
            [b[0] - window.x_min, b[1] - window.y_min, b[2] - window.x_min, b[3] - window.y_min]
            for b in row["target_boxes"]
        ]
        base = {**row, "prompt": prompt, "image_path": [row["image_path"]], "zoom_call": None, "crop_window": None}
        rows.append({**base, "zoom_call": region})
        answer_turn = [{"role": "assistant", "content": [{"type": "text", "text": zoom_tool.call_text(region)}]}]
        rows.append(
            {
                **base,
                "prompt": prompt + answer_turn + zoom_tool.response_messages(adapter, crop_frame),
                "target_boxes_answer": adapter.boxes_to_answer(shifted, crop_frame),
                "crop_window": window.as_list(),
            }
        )
    if dropped:
        logger.warning(
            "zoom SFT: %d sample(s) dropped (no window the pixel budget can send, or no usable target)", dropped
        )
    if not rows:
        raise ValueError("zoom SFT: no sample gave a window the pixel budget can send")
    logger.info("zoom SFT: %d rows (a zoom call and an answer in the crop per sample)", len(rows))
    return Dataset.from_list(rows).with_transform(zoom_images_transform(budget))


def zoom_images_transform(budget: Any):
    """A ``Dataset.with_transform`` function for zoom SFT rows: ``images`` = the screenshot resized by ``budget``
    (``groundwork.pixel_budget.resize_for_model``), plus, on rows with a ``crop_window``, that window of the
    full-resolution screenshot resized by the same budget (what the tool returns in a rollout)."""

    def transform(batch: dict) -> dict:
        images = []
        for paths, window in zip(batch["image_path"], batch["crop_window"], strict=True):
            original = validate.open_image(paths[0])
            row_images = [resize_for_model(original, budget)]
            if window:
                row_images.append(resize_for_model(CropWindow(*window).crop(original), budget))
            images.append(row_images)
        batch["images"] = images
        return batch

    return transform


def _usable_boxes(boxes) -> list:
    """The usable target boxes of a row (``groundwork.geometry.valid_box``; the click reward's rule)."""
    if not isinstance(boxes, (list, tuple)):
        return []
    return [box for box in map(valid_box, boxes) if box is not None]


# ---- the stage rewards (registered by the gui_grounding task: gui_grounding.training.rewards.REWARDS) ------------------------------------------
ZOOM_ROW_KEYS = ("image_size", "resized_size", "adapter", "prompt_mode", "target_boxes", "image_path")


def zoom_rows(n: int, kwargs: dict) -> list:
    """Per rollout, the row facts a zoom-stage score needs (``None`` for a rollout without the column
    ``rollout_turns``, which only a run with the zoom tool writes)."""
    turns = kwargs.get("rollout_turns")
    if not isinstance(turns, list) or len(turns) != n:
        return [None] * n
    cols = {k: kwargs.get(k) for k in ZOOM_ROW_KEYS}
    out = []
    for i in range(n):
        row = {k: v[i] for k, v in cols.items() if isinstance(v, list) and len(v) == n}
        out.append({**row, "rollout_turns": turns[i]} if isinstance(turns[i], list) else None)
    return out


def hit(point, row: dict) -> float:
    """1.0 when ``point`` (original pixels) lies in a usable target box of ``row`` (edges inclusive), else 0.0."""
    if point is None:
        return 0.0
    return 1.0 if any(point_in_box(point, box) for box in _usable_boxes(row.get("target_boxes"))) else 0.0


def _target_centre_and_diagonal(row: dict):
    boxes, size = _usable_boxes(row.get("target_boxes")), valid_size(row.get("image_size"))
    if not boxes or size is None:
        return None
    return boxes[0], math.hypot(size[0], size[1])


def score_zoom_tool(row: dict) -> float:
    """The tool stage's score of one rollout: ``0.5 * overlap + 0.5 * proximity`` of its first crop window ``W``
    with the target box ``B`` (original pixels), 0.0 when it did not crop.

    * overlap = area(B ∩ W) / area(B): 1 when the crop holds the whole target (a zero-area target: 1 when its centre
      is inside W);
    * proximity = max(0, 1 - |centre(W) - centre(B)| / diagonal of the screenshot).

    The form of GUI-Eyes' tool reward (arXiv 2601.09770, "a spatially continuous reward ... which integrates both
    location proximity and region overlap"); the two terms and their equal weights are ours, stated here. Several
    targets: the first usable one. Total: any row gives a finite float in [0, 1]."""
    windows = windows_of(row.get("rollout_turns"))
    found = _target_centre_and_diagonal(row)
    if not windows or found is None:
        return 0.0
    (bx0, by0, bx1, by1), diagonal = found
    wx0, wy0, wx1, wy1 = (float(v) for v in windows[0])
    area = (bx1 - bx0) * (by1 - by0)
    inter = max(0.0, min(bx1, wx1) - max(bx0, wx0)) * max(0.0, min(by1, wy1) - max(by0, wy0))
    if area > 0:
        overlap = inter / area
    else:
        overlap = 1.0 if point_in_box(((bx0 + bx1) / 2, (by0 + by1) / 2), (wx0, wy0, wx1, wy1)) else 0.0
    gap = math.hypot((wx0 + wx1) / 2 - (bx0 + bx1) / 2, (wy0 + wy1) / 2 - (by0 + by1) / 2)
    proximity = max(0.0, 1.0 - gap / diagonal) if diagonal > 0 else 0.0
    value = 0.5 * min(1.0, overlap) + 0.5 * proximity
    return value if math.isfinite(value) else 0.0


def score_zoom_gain(row: dict, text: str) -> float:
    """The refinement stage's improvement: ``hit(final point) - hit(coarse point)`` in {-1, 0, 1}, where the coarse
    point is the centre of the first crop window (what the first stage pointed at) and ``hit`` is the click
    reward's test; 0.0 when the rollout did not crop. GUI-C²'s improvement-aware stage reward (arXiv 2605.30884:
    the fine stage is paid for what it adds over the coarse one), with the click hit as the stage score (ours)."""
    windows = windows_of(row.get("rollout_turns"))
    if not windows:
        return 0.0
    x0, y0, x1, y1 = windows[0]
    final = final_point(row, row.get("rollout_turns"), text)
    return hit(final, row) - hit(((x0 + x1) / 2, (y0 + y1) / 2), row)


def zoom_tool_reward(completions: list, **kwargs) -> list:
    """TRL reward function ``zoom_tool``: :func:`score_zoom_tool` per rollout (0.0 without the zoom tool)."""
    rows = zoom_rows(len(completions), kwargs)
    return [score_zoom_tool(r) if r is not None else 0.0 for r in rows]


def zoom_gain_reward(completions: list, **kwargs) -> list:
    """TRL reward function ``zoom_gain``: :func:`score_zoom_gain` per rollout (0.0 without the zoom tool)."""
    rows = zoom_rows(len(completions), kwargs)
    return [
        score_zoom_gain(r, completion_text(c)) if r is not None else 0.0 for c, r in zip(completions, rows, strict=True)
    ]


def zoom_cost_reward(completions: list, **kwargs) -> list:
    """TRL reward function ``zoom_cost``: ``-(--zoom_cost) * calls`` per rollout, so the policy zooms only where
    the click reward it gains pays for it (0.0 without the zoom tool or with ``--zoom_cost 0``). Ours: a per-call
    price, as GUI-C² gates its crops by area and GUI-Eyes by a two-level policy."""
    rows = zoom_rows(len(completions), kwargs)
    return [-calls_cost(r.get("rollout_turns")) if r is not None else 0.0 for r in rows]
