"""``gui-grounding eval --tts zoom-tool``: the model decides whether to zoom (issue 30 item 5). The turns of one
chunk of :func:`gui_grounding.eval.tts.predict_tts` (the one test-time dispatch; this module is its ``zoom-tool``
part and imports nothing of it), and the mode's summary in ``metrics.json``.

Per sample (the tool's prompt, call, window and map-back are :mod:`gui_grounding.models.zoom_tool`'s):

1. turn 1: ``Adapter.zoom_messages`` (the adapter's prompt with the tool offered for ``max_zoom_calls`` calls), the
   screenshot resized by the run's budget (``Adapter.build_request``), greedy;
2. a turn that calls no tool (``zoom_tool.parse_call`` is ``None``) is the answer: turn 1's by the adapter's parse
   (``gui_grounding.eval.backends.record``, eval's one path), a later turn's by ``Adapter.parse_answer(strict=False)``
   in the crop's answer frame mapped back with ``zoom_tool.crop_point_to_original``;
3. a valid call: its window (``zoom_tool.region_window`` in the answer frame of the image the turn answered on; a
   window found in a crop moves to the screenshot by the crop's offset, ``CropWindow.to_image``), the crop of the
   **original** screenshot (displayed frame) with its frame under the budget and resized by it
   (``resize_for_model``), and the next turn: the turn's messages, the call as the assistant's turn, the tool's
   answer (``zoom_tool.next_turn_messages``), sending every image so far (``Request.images``: screenshot, crops);
4. a reject (``zoom_tool.REJECTS``: a call ``parse_call`` refuses, a window ``region_window`` refuses, a crop the
   budget cannot send ``unsendable``, a call after ``max_zoom_calls`` calls ``over_limit``) ends the sample with no
   point and the code in ``tts.reject``; nothing raises. A request that fails for good ends it too, and its line
   carries ``"error"`` (a resume asks it again).
"""

from __future__ import annotations

from groundwork.pixel_budget import resize_for_model
from gui_grounding.eval.backends import record
from gui_grounding.eval.predictions import parse_point
from gui_grounding.models import zoom_tool
from gui_grounding.models.adapters import Request, messages_to_text
from gui_grounding.models.frames import CropWindow

#: the cost phase of every zoom-tool turn
PHASE = "tool"


def new_record(mode: str, max_calls: int) -> dict:
    """A sample's ``tts`` record before its turns (``gui_grounding.eval.tts`` module docstring)."""
    return {
        "mode": mode,
        "point": None,
        "agreement": None,
        "refusal": False,
        "zoomed": False,
        "reject": None,
        "max_zoom_calls": max_calls,
        "prompt": None,
        "turns": [],
    }


def run_turns(chunk) -> None:
    """The zoom-tool turns of a ``gui_grounding.eval.tts._Chunk`` (its samples, images, adapter, budget, settings,
    ``info`` records and ``run`` engine calls): greedy turns until each sample answers, is rejected, or fails. Turn 1
    asks every sample with the tool offered; each later turn asks only the samples whose last turn was a valid
    call, with that call's crop (one engine call per turn for the chunk)."""
    adapter, calls = chunk.adapter, chunk.tts.max_zoom_calls
    current: dict[int, Request] = {}
    for i, (s, image) in enumerate(zip(chunk.samples, chunk.images, strict=True)):

        def tool_messages(frame, s=s):
            return adapter.zoom_messages(s.instruction, frame, image_block=True, max_calls=calls)

        request = adapter.build_request(s, image, budget=chunk.budget, messages=tool_messages)
        request.context["sample_id"] = s.sample_id
        current[i] = request
        chunk.info[i]["prompt"] = request.prompt_text
    used = dict.fromkeys(chunk.everyone, 0)  # calls made per sample
    active = list(chunk.everyone)
    while active:
        draws = chunk.run(PHASE, [current[i] for i in active], 1, None, active)
        following = []
        for j, i in enumerate(active):
            request = current[i]
            text = draws[j].text
            turn = {"text": text, **request.context.get("turn", {})}
            chunk.info[i]["turns"].append(turn)
            if draws[j].error is not None:  # the line carries "error": a resume asks this sample again
                continue
            nxt = _turn(chunk, i, request, text, turn, used[i])
            if nxt is not None:
                used[i] += 1
                current[i] = nxt
                following.append(i)
        active = following


def _turn(chunk, i: int, request: Request, text: str, turn: dict, used: int) -> Request | None:
    """One turn's ``text`` of sample ``i`` (asked with ``request``, ``used`` calls made before it): the answer, a
    reject, or the next turn's request (returned) after a valid call."""
    info = chunk.info[i]
    if not zoom_tool.is_call(text):
        _answer(chunk, i, request, text, turn)
        return None
    if used >= chunk.tts.max_zoom_calls:
        info["reject"] = "over_limit"
        return None
    call = zoom_tool.parse_call(text)
    if call.reason is not None:
        info["reject"] = call.reason
        return None
    turn["call"] = list(call.region)
    window = _window(chunk.adapter, call.region, request)
    if isinstance(window, str):
        info["reject"] = window
        return None
    try:
        crop_frame = chunk.budget.frame(window.width, window.height)
    except ValueError:  # smart_resize refuses the crop (aspect ratio over 200)
        info["reject"] = "unsendable"
        return None
    crop = resize_for_model(window.crop(chunk.images[i]), chunk.budget)
    messages = zoom_tool.next_turn_messages(request.messages, text, chunk.adapter, crop_frame)
    info["zoomed"] = True
    shown = {"window": window.as_list(), "crop_size": [crop_frame.resized_width, crop_frame.resized_height]}
    context = {"frame": crop_frame, "sample_id": chunk.samples[i].sample_id, "window": window, "turn": shown}
    return Request(
        messages, request.image, context, messages_to_text(messages), extra_images=[*request.extra_images, crop]
    )


def _window(adapter, region, request: Request) -> CropWindow | str:
    """The window (original pixels) of a call's ``region``, given in the answer frame of the image the turn answered
    on (``request``'s frame: the screenshot, or the crop of ``context["window"]``), or a reject code
    (``zoom_tool.region_window``). A window found in a crop moves to the screenshot by the crop's offset."""
    window = zoom_tool.region_window(region, adapter, request.context["frame"])
    outer = request.context.get("window")
    if isinstance(window, str) or outer is None:
        return window
    return CropWindow(*outer.to_image((window.x_min, window.y_min)), *outer.to_image((window.x_max, window.y_max)))


def _answer(chunk, i: int, request: Request, text: str, turn: dict) -> None:
    """Sample ``i``'s answer from a turn that calls no tool: the adapter's parse in the screenshot (turn 1: eval's
    one path, :func:`gui_grounding.eval.backends.record`), or in the crop's answer frame mapped back
    (``zoom_tool.crop_point_to_original``); a point the predictions reader refuses is no point."""
    info, adapter = chunk.info[i], chunk.adapter
    window = request.context.get("window")
    if window is None:
        line = record(chunk.samples[i], request, text, adapter)
        info["point"], info["refusal"] = line["point"], line.get("refusal", False)
        return
    if adapter.is_refusal(text):
        info["refusal"], turn["crop_answer"], turn["point"] = True, None, None
        return
    answer = adapter.parse_answer(text, strict=False)
    point = (
        zoom_tool.crop_point_to_original(answer, adapter, request.context["frame"], window)
        if answer is not None
        else None
    )
    ok, point = parse_point(list(point)) if point is not None else (True, None)
    turn["crop_answer"] = list(answer) if answer is not None else None
    turn["point"] = point if ok else None
    info["point"] = turn["point"]


def summary(predictions: dict[str, dict], samples: list, mode: str, max_calls: int) -> dict:
    """``metrics.json["tts"]["zoom_tool"]``: over the samples whose line holds a ``mode`` record, how many zoomed
    (``tts.zoomed`` true) and the share, how many were rejected per reason (codes of
    :data:`gui_grounding.models.zoom_tool.REJECTS`; any other value of a hostile file counts as ``unknown``), and
    the turns per sample. The cost per answer is ``gui_grounding.eval.tts.cost_summary``'s (phase ``tool``)."""
    records = [
        info
        for info in (predictions.get(s.sample_id, {}).get("tts") for s in samples)
        if isinstance(info, dict) and info.get("mode") == mode
    ]
    zoomed = sum(1 for info in records if info.get("zoomed") is True)
    rejects: dict[str, int] = {}
    turns = 0
    for info in records:
        reason = info.get("reject")
        if reason is not None:
            key = reason if isinstance(reason, str) and reason in zoom_tool.REJECTS else "unknown"
            rejects[key] = rejects.get(key, 0) + 1
        turns += len(info["turns"]) if isinstance(info.get("turns"), list) else 0
    n = len(records)
    return {
        "max_zoom_calls": max_calls,
        "samples": n,
        "zoomed": zoomed,
        "zoomed_share": round(zoomed / n, 4) if n else None,
        "rejected": sum(rejects.values()),
        "rejects": dict(sorted(rejects.items())),
        "turns_per_sample": round(turns / n, 4) if n else None,
    }
