"""Readers of the public GUI grounding datasets: one small function per published record format.

Each reader turns one parsed record (a JSON object, or a parquet row as a dict) into a list of :class:`Target`
(instruction, image, box(es) **in that format's own convention**, extra fields); ``gui_grounding.data.convert`` (its
engine, ``gui_grounding.data.convert_engine``) then reads the image size from the image header, converts the boxes to
original-image pixels, validates them (``schema.clip_box``) and writes canonical records. Readers do no I/O and no
coordinate maths.

``FORMATS`` maps a ``--format`` name to its :class:`FormatSpec`; each reader's docstring gives the dataset's source,
its record layout and its box convention (with the dataset card, repository file or discussion it was read from),
and says whether the schema is **confirmed** from published documentation/records or **assumed**.

The pieces every reader shares (``Target``, ``ReadContext``, the box units ``pixel``/``ratio``/``norm1000`` and the
field rules) are ``gui_grounding.data.formats_common``.

Points are never turned into boxes: a record whose target is only a point is rejected as ``point_only`` (a point has
no extent; inventing one would silently change what counts as a hit).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groundwork import validate
from groundwork.records import lax_loads
from gui_grounding.data.formats_common import (
    PLATFORMS,
    ReadContext,
    Target,
    _box,
    _boxes,
    _grouped,
    _image_path,
    _image_value,
    _instructions,
    _stated_size,
    _ui_type,
    box_from_xywh,
    platform_from_path,
)
from gui_grounding.data.schema import (
    CANONICAL_KEYS,  # the canonical record's keys: one declaration (Sample.to_record's), used here too
    SampleError,
    conversation_turns,
    read_no_target,
    require,  # the one record-shape check (benchmark readers share it)
)
from gui_grounding.models.frames import Box


@dataclass(frozen=True)
class FormatSpec:
    """A registered format: ``read(record, ctx) -> list[Target]``, its docstring, and its fixed platform if any."""

    name: str
    read: Callable[[Any, ReadContext], list[Target]]
    doc: str
    platform: str | None = None

    @property
    def summary(self) -> str:
        """First paragraph of the reader's docstring (source and box convention), on one line, plain text."""
        return " ".join(self.doc.strip().split("\n\n")[0].replace("``", "").replace("**", "").split())


FORMATS: dict[str, FormatSpec] = {}


def register(name: str, platform: str | None = None):
    """Decorator adding a reader to ``FORMATS`` under ``name`` (its docstring documents the format)."""

    def wrap(fn):
        FORMATS[name] = FormatSpec(name, fn, fn.__doc__ or "", platform)
        return fn

    return wrap


# --------------------------------------------------------------------------------------------------------------------
# readers


@register("gta1")
def read_gta1(record: dict, ctx: ReadContext) -> list[Target]:
    """GTA1 ``HelloKKMe/grounding_dataset`` (also ``Salesforce/grounding_dataset``): ``bbox`` ``[x0, y0, x1, y1]`` in
    **0-1000** of the original image (one box or a list: any hit counts), instruction in the first (human) turn.

    Record (JSON list, or JSONL): ``{"id", "image": <path relative to the image root>, "bbox": [..],
    "conversations": [{"from": "human", "value": "<image>instruction"}, {"from": "gpt", "value": "(x, y)"}]}``; the
    gpt turn is ignored (GTA1's RL ignores it too). Confirmed: GTA1 ``src/grpo_grounding.py`` and the dataset card.
    Ours: ``"no_target": true`` with ``bbox`` ``[]`` or ``null`` marks a sample with no valid target
    (``gui_grounding.data.schema.read_no_target``; hostile values are ``bad_field`` rejects).
    Platform: from the image's folder names (:func:`platform_from_path`). The record's ``id`` is kept as
    ``source_id``.
    """
    require(record, ("image", "bbox", "conversations"), ctx.ref)
    human, _ = conversation_turns(record, ctx.ref)
    image = _image_path(record["image"], ctx.ref, "image")
    extra = {"source_id": record["id"]} if "id" in record else {}
    no_target = read_no_target(record, ctx.ref, "gta1")
    return [
        Target(
            human,
            image,
            [] if no_target else _boxes(record["bbox"], ctx.ref, "bbox"),
            "norm1000",
            platform=platform_from_path(image),
            extra=extra,
            raw=record,
            no_target=no_target,
        )
    ]


def _single(record, instruction, image, box, unit: str, ui_type, platform=None, **fields) -> list[Target]:
    """The one target of a record (or of one element of a grouped record) that holds one instruction and one box, the
    readers' shared last step: ``ui_type`` kept when text/icon (:func:`_ui_type`), ``platform`` when it is one of
    :data:`PLATFORMS`, ``record`` as ``raw`` (``None`` for an element: :func:`_grouped` sets the image and raw);
    other :class:`Target` fields (``extra``, ``stated_size``) as given."""
    platform = platform if platform in PLATFORMS else None
    return [Target(instruction, image, [box], unit, platform=platform, ui_type=_ui_type(ui_type), raw=record, **fields)]


def _ratio_element(el: dict, ref: str, sub: str) -> list[Target]:
    """The target of one ``{"instruction", "bbox": [x1, y1, x2, y2] as ratios in [0, 1], "data_type"?}`` element, the
    element shape OS-Atlas and SeeClick share: ``data_type`` becomes ``ui_type`` when text/icon and is kept."""
    require(el, ("instruction", "bbox"), ref)
    extra = {"data_type": el["data_type"]} if "data_type" in el else {}
    return _single(
        None, el["instruction"], None, _box(el["bbox"], ref, "bbox"), "ratio", el.get("data_type"), extra=extra
    )


@register("os-atlas")
def read_os_atlas(record: dict, ctx: ReadContext) -> list[Target]:
    """OS-Atlas grounding data (``OS-Copilot/OS-Atlas-data``): ``bbox`` ``[left, top, right, bottom]`` as **ratios
    in [0, 1]** of the image width/height; one file per source, under ``mobile_domain/``, ``desktop_domain/``,
    ``web_domain/``.

    Flat records ``{"img_filename", "instruction", "bbox", "data_type"?}`` or, in files that group several elements
    per screenshot, ``{"img_filename", "elements": [{"instruction", "bbox", "data_type"?}, ...]}`` (one sample per
    element). Confirmed: the flat layout and the ratio convention, from the dataset card ("each value is a [0, 1]
    decimal number indicating the ratio"); assumed: the name ``elements`` of the grouped layout (the card only says
    some files group several elements per screenshot; a file with another key is a ``bad_field`` reject naming the
    keys it has, so ``--strict`` shows it on the first record). ``data_type``
    becomes ``ui_type`` when it is ``text``/``icon`` and is kept as ``data_type``. Platform: from the folder names
    (:func:`platform_from_path` on the image path, else on the annotation file's path).
    """

    require(record, ("img_filename",), ctx.ref)
    if "elements" in record:
        targets = _grouped(record, ctx, ("img_filename",), "elements", _ratio_element)
    else:
        targets = _ratio_element(record, ctx.ref, "")
        targets[0].image, targets[0].raw = _image_path(record["img_filename"], ctx.ref, "img_filename"), record
    image = record["img_filename"] if isinstance(record["img_filename"], str) else ""
    # the image's folders, else the annotation file's own folder and stem (e.g. web_domain/fineweb_3m.json)
    here = f"{os.path.basename(os.path.dirname(os.path.abspath(ctx.path)))}/{ctx.stem}/file"
    platform = platform_from_path(image) or platform_from_path(here)
    for t in targets:
        t.platform = platform
    return targets


def _aria_element(el: dict, ref: str, sub: str) -> list[Target]:
    """Targets of one Aria-UI element: one per instruction, all sharing the element's box."""
    if "position (top-left x&y)" in el or "size (w&h)" in el:
        require(el, ("position (top-left x&y)", "size (w&h)"), ref)
        pos, size = el["position (top-left x&y)"], el["size (w&h)"]
        if not (isinstance(pos, list) and isinstance(size, list) and len(pos) == 2 and len(size) == 2):
            raise SampleError(ref, "bad_field", f"position/size must be [x, y] and [w, h], got {pos!r}, {size!r}")
        box, unit = box_from_xywh([*pos, *size], ref, "position + size"), "pixel"
    elif "bbox" in el:
        box, unit = _box(el["bbox"], ref, "bbox"), "pixel"
    elif "bbox_norm" in el:
        box, unit = _box(el["bbox_norm"], ref, "bbox_norm"), "norm1000"
    else:
        raise SampleError(
            ref,
            "bad_field",
            "element has no box (expected 'position (top-left x&y)' + 'size (w&h)', "
            f"'bbox' or 'bbox_norm'); it has {sorted(el)}",
        )
    extra = {k: el[k] for k in ("tag",) if k in el}
    if "instructions" not in el and "instruction" in el:  # a single instruction: the element is the target
        return [Target(el["instruction"], None, [box], unit, sub=sub, extra=extra)]
    return [
        Target(text, None, [box], unit, sub=f"{sub}.instructions[{k}]", sub_id=str(k), extra=dict(extra))
        for k, text in enumerate(_instructions(el, ref))
    ]


def _read_aria(record: dict, ctx: ReadContext) -> list[Target]:
    if "elements" in record:
        return _grouped(record, ctx, ("img_file", "image", "img_filename", "img_url"), "elements", _aria_element)
    key = next((k for k in ("img_file", "image", "img_filename", "img_url") if k in record), None)
    if key is None:
        raise SampleError(
            ctx.ref, "bad_field", f"record has neither 'elements' nor an image key; it has {sorted(record)}"
        )
    image = _image_path(record[key], ctx.ref, key)
    targets = _aria_element(record, ctx.ref, "")
    for t in targets:
        t.image, t.raw = image, record
    return targets


@register("aria-ui-desktop", platform="desktop")
def read_aria_ui_desktop(record: dict, ctx: ReadContext) -> list[Target]:
    """Aria-UI desktop (``Aria-UI/Aria-UI_Data``, ``desktop/``): **pixel** ``position (top-left x&y)`` + ``size
    (w&h)`` per element, several instructions per element (one sample each).

    Record: ``{"img_file", "elements": [{"id", "tag", "name", "text", "class", "description",
    "position (top-left x&y)": [x, y], "size (w&h)": [w, h], "element_caption", "instructions": [...]}, ...]}``.
    Confirmed: the dataset's discussion #5 quotes a record. Box = ``[x, y, x + w, y + h]``. Also accepted, unconfirmed:
    an element ``bbox`` ``[x0, y0, x1, y1]`` in pixels, or ``bbox_norm`` in 0-1000 (seen in one third-party loader of
    ``aria_ui_desktop_with_instructions.json``). An element with an empty ``instructions`` list is an
    ``empty_instruction`` reject; the element ``tag`` is kept.
    """
    return _read_aria(record, ctx)


@register("aria-ui-web", platform="web")
def read_aria_ui_web(record: dict, ctx: ReadContext) -> list[Target]:
    """Aria-UI web (``Aria-UI/Aria-UI_Data``, ``web/aria_ui_web_2889k.json``, 4.26 GB JSON list; images
    ``web/images.z01...``): schema **ASSUMED** to be the desktop one, boxes in **pixels**.

    Not confirmed: no published record of this file could be found (the dataset card documents only the desktop
    schema). Read like ``aria-ui-desktop``: ``{"img_file" | "image" | "img_filename" | "img_url", "elements": [{
    "position (top-left x&y)" + "size (w&h)" | "bbox" [x0, y0, x1, y1] | "bbox_norm" (0-1000), "instructions": [..] |
    "instruction"}]}``, or the same keys flat on one record. If the real file uses 0-1000 or ratio ``bbox`` values,
    run with ``--box-unit norm1000`` / ``ratio``; a record matching none of these layouts is a ``bad_field`` reject
    that names the keys it has (``--strict`` stops at the first one).
    """
    return _read_aria(record, ctx)


@register("aria-ui-mobile", platform="mobile")
def read_aria_ui_mobile(record: dict, ctx: ReadContext) -> list[Target]:
    """Aria-UI mobile (``Aria-UI/Aria-UI_Data``, ``mobile/aria_ui_mobile_AMEX_1077k.json``, AMEX screenshots):
    schema **ASSUMED** to be the desktop one, boxes in **pixels**.

    Not confirmed (same situation and same accepted layouts as ``aria-ui-web``; ``--box-unit`` overrides the unit).
    """
    return _read_aria(record, ctx)


@register("showui")
def read_showui(record: dict, ctx: ReadContext) -> list[Target]:
    """ShowUI (``showlab/ShowUI-web``, ``showlab/ShowUI-desktop-8K``): boxes ``[x1, y1, x2, y2]`` as **ratios in
    [0, 1]**; points ``[x, y]`` in [0, 1] are ignored (the box is the target).

    Three layouts are read:

    * one row per screenshot (``ShowUI-web``): ``{"image_url", "instruction": [..], "bbox": [[..], ..],
      "point": [[..], ..], "type": [..]}``, lists aligned by index (one sample per instruction);
    * one row per element (``ShowUI-desktop-8K`` parquet): ``{"image_url", "image"?, "instruction", "bbox", "point",
      "type"}``;
    * ShowUI's training metadata (``TRAIN.md``): ``{"img_url", "img_size": [w, h], "element": [{"instruction",
      "bbox", "data_type", "point"}], "element_size"}``; ``img_size`` is checked against the image header.

    Confirmed: the ShowUI-desktop-8K dataset card (features) and ShowUI ``TRAIN.md``; the per-screenshot layout of
    ShowUI-web (21,988 rows) is taken from its dataset page, https://huggingface.co/datasets/showlab/ShowUI-web, not
    checked against a downloaded row. An element with a point but no box is a ``point_only`` reject. Embedded parquet
    images are written to ``<image root>/<image_url>``. ``type``/``data_type`` becomes ``ui_type`` when ``text``/
    ``icon`` and is kept as ``element_type``.
    """
    if "element" in record:  # TRAIN.md metadata
        size = _stated_size(record.get("img_size"), ctx.ref, "img_size")

        def element(el: dict, ref: str, sub: str) -> list[Target]:
            require(el, ("instruction",), ref)
            if el.get("bbox") is None:
                raise SampleError(ref, "point_only", f"element has a point {el.get('point')!r} but no bbox")
            kind = el.get("data_type")
            box, extra = _box(el["bbox"], ref, "bbox"), {"element_type": kind} if kind is not None else {}
            return _single(None, el["instruction"], None, box, "ratio", kind, extra=extra, stated_size=size)

        return _grouped(record, ctx, ("img_url",), "element", element)
    require(record, ("image_url", "instruction"), ctx.ref)
    image = _image_value(record["image"], ctx, "image", record["image_url"]) if record.get("image") else None
    image = image or _image_path(record["image_url"], ctx.ref, "image_url")
    if isinstance(record["instruction"], list):  # one row per screenshot, aligned lists
        if not record["instruction"]:
            raise SampleError(ctx.ref, "bad_field", "instruction is an empty list (the screenshot has no targets)")
        out = []
        for k, text in enumerate(record["instruction"]):
            sub = f".instruction[{k}]"
            item = {"image_url": record["image_url"], "instruction": text}
            for key in ("bbox", "point", "type"):
                column = record.get(key)
                item[key] = column[k] if isinstance(column, list) and k < len(column) else None
            try:
                if item["bbox"] is None:
                    raise SampleError(
                        ctx.ref + sub, "point_only", f"instruction {k} has a point {item['point']!r} but no bbox"
                    )
                box = _box(item["bbox"], ctx.ref + sub, f"bbox[{k}]")
            except SampleError as err:
                out.append(Target(sub=sub, error=err, raw=item))
                continue
            kind = item["type"]
            out.append(
                Target(
                    text,
                    image,
                    [box],
                    "ratio",
                    sub=sub,
                    sub_id=str(k),
                    ui_type=_ui_type(kind),
                    extra={"element_type": kind} if kind is not None else {},
                    raw=item,
                )
            )
        return out
    if record.get("bbox") is None:
        raise SampleError(ctx.ref, "point_only", f"row has a point {record.get('point')!r} but no bbox")
    kind = record.get("type")
    box, extra = _box(record["bbox"], ctx.ref, "bbox"), {"element_type": kind} if kind is not None else {}
    return _single(record, record["instruction"], image, box, "ratio", kind, extra=extra)


_UGROUND_BOX = re.compile(
    r"^\(?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*(?:,\s*(-?\d+(?:\.\d+)?)\s*,\s*"
    r"(-?\d+(?:\.\d+)?)\s*)?\)?$"
)


@register("uground")
def read_uground(record: dict, ctx: ReadContext) -> list[Target]:
    """UGround (``osunlp/UGround-V1-Data-Box``; ``osunlp/UGround-V1-Data`` holds points only): LLaVA-style
    conversations whose gpt answers are ``"(x1, y1, x2, y2)"`` in **[0, 1000) relative** coordinates (``x / 1000 *
    W``, UGround / Qwen2-VL convention); several human/gpt pairs per screenshot (one sample each).

    Row (parquet shards, or JSON): ``{"image": bytes | {"bytes", "path"} | path, "conversations": JSON string or list
    of {"from", "value"}, "width"?, "height"?}``; ``width``/``height`` are checked against the image header.
    Point answers ``"(x, y)"`` (the V1-Data variant) are ``point_only`` rejects: a point has no extent. Source: the
    UGround README and cards (https://github.com/OSU-NLP-Group/UGround, https://huggingface.co/osunlp/UGround-V1-7B,
    https://huggingface.co/datasets/osunlp/UGround-V1-Data-Box); one third-party loader divides by 999
    instead of 1000 (< 0.1% apart) and another treats the Box values as pixels; we follow the documented [0, 1000)
    convention (``--box-unit`` overrides it). Embedded images are written to ``embedded/<input stem>/<row>_<sha1>.<ext>``.
    """
    require(record, ("image", "conversations"), ctx.ref)
    conv = record["conversations"]
    if isinstance(conv, str):
        try:
            conv = lax_loads(conv)  # a key twice is an error here too (groundwork.records.unique_object)
        except (ValueError, RecursionError) as err:
            raise SampleError(ctx.ref, "bad_field", f"conversations is not JSON: {err}") from err
    if not isinstance(conv, list) or not all(isinstance(t, dict) and "value" in t for t in conv):
        raise SampleError(ctx.ref, "bad_field", "conversations must be a list of {from, value} turns")
    if len(conv) < 2 or len(conv) % 2:
        raise SampleError(ctx.ref, "bad_field", f"conversations must hold human/gpt pairs, got {len(conv)} turns")
    image = _image_value(record["image"], ctx, "image")
    size = None
    if record.get("width") is not None or record.get("height") is not None:
        size = _stated_size([record.get("width"), record.get("height")], ctx.ref, "width/height")
    out = []
    for k in range(len(conv) // 2):
        human, gpt = conv[2 * k], conv[2 * k + 1]
        sub = f".conversations[{2 * k + 1}]"
        ref = ctx.ref + sub
        answer = gpt["value"].strip() if isinstance(gpt["value"], str) else gpt["value"]
        match = _UGROUND_BOX.match(answer) if isinstance(answer, str) else None
        try:
            if match is None:
                raise SampleError(ref, "bad_field", f"gpt answer is not '(x1, y1, x2, y2)': {answer!r}")
            if match.group(3) is None:
                raise SampleError(
                    ref,
                    "point_only",
                    f"gpt answer {answer!r} is a point (x, y), not a box; a point "
                    "cannot become a box without inventing its extent",
                )
            box = _box([float(v) for v in match.groups()], ref, "gpt answer")
        except SampleError as err:
            out.append(Target(sub=sub, error=err, raw={"human": human["value"], "gpt": gpt["value"]}))
            continue
        out.append(
            Target(
                human["value"],
                image,
                [box],
                "norm1000",
                sub=sub,
                sub_id=str(k),
                stated_size=size,
                raw={"human": human["value"], "gpt": gpt["value"]},
            )
        )
    return out


@register("seeclick", platform="web")
def read_seeclick(record: dict, ctx: ReadContext) -> list[Target]:
    """SeeClick web data (``seeclick_web.json``, SeeClick repository): per screenshot ``{"img_filename", "url",
    "elements": [{"instruction", "bbox": [x1, y1, x2, y2], "data_type"}]}``, boxes as **ratios in [0, 1]** (one
    sample per element).

    Confirmed: SeeClick's data description (njucckevin/SeeClick ``readme_data.md:4-5,40-50`` at 989a7e6).
    ``data_type`` (``text``, ``hover``) becomes ``ui_type`` when ``text``/``icon`` and is kept as ``data_type``;
    ``url`` is kept.
    """

    targets = _grouped(record, ctx, ("img_filename",), "elements", _ratio_element)
    for t in targets:
        if "url" in record and t.error is None:
            t.extra["url"] = record["url"]
    return targets


@register("gui-r1")
def read_gui_r1(record: dict, ctx: ReadContext) -> list[Target]:
    """GUI-R1 (``ritzzai/GUI-R1``, parquet): ``gt_bbox`` ``[x1, y1, x2, y2]`` as **ratios in [0, 1]** when all four
    values lie in [0, 1] (the train parquet), else in **pixels** of the stored image (the eval parquets); 2 values =
    a point (``point_only`` reject).

    Units: GUI-R1's train parquet stores fractions of the image size (its maintainer in GUI-R1 issue #5; its dataset
    loader multiplies ``gt_bbox`` by the image width/height), its eval parquets store pixels; a pixel box with all
    four values in [0, 1] would be a sub-pixel box at the image corner, so the rule is unambiguous. ``--box-unit``
    overrides it for every record.

    Row: ``{"image": {"bytes"}, "instruction", "history", "gt_action", "gt_bbox", "gt_input_text", "group"?,
    "ui_type"?}``. Confirmed: the parquet schema (``image: struct<bytes>``, ``gt_bbox: list<int64>``, ``group``,
    ``ui_type``) as printed by third-party loaders of the dataset; the 2-or-4 rule from GUI-R1's own code
    (ritzz-ai/GUI-R1 ``verl/utils/dataset.py:156-163`` and ``verl/utils/reward_score/r1gui.py:142-143`` at d43eea2).
    Embedded images go to ``embedded/<input stem>/<row>_<sha1>.<ext>``. ``group`` becomes the platform when it is
    mobile/desktop/web and is kept; ``ui_type`` is kept when text/icon; ``gt_action`` kept.
    """
    require(record, ("image", "instruction", "gt_bbox"), ctx.ref)
    box = _box(record["gt_bbox"], ctx.ref, "gt_bbox")
    group = record.get("group")
    extra = {k: record[k] for k in ("gt_action", "group") if record.get(k) is not None}
    unit = "ratio" if validate.all_fractions(box) else "pixel"
    image = _image_value(record["image"], ctx, "image")
    return _single(record, record["instruction"], image, box, unit, record.get("ui_type"), platform=group, extra=extra)


@register("screenspot-v2")
def read_screenspot_v2(record: dict, ctx: ReadContext) -> list[Target]:
    """ScreenSpot-V2 (``OS-Copilot/ScreenSpot-v2``) as training/validation data: ``bbox`` ``[x, y, w, h]`` in
    **pixels** (top-left corner + size); files ``screenspot_{mobile,desktop,web}_v2.json``, images relative to the
    image root (``screenspotv2_image/``).

    Record: ``{"img_filename", "bbox", "instruction", "data_type": "text"|"icon", "data_source"}``. Confirmed (same
    reader conventions as ``gui-grounding eval --benchmark screenspot-v2``). Platform from the file name;
    ``data_source`` is kept.
    """
    require(record, ("img_filename", "bbox", "instruction"), ctx.ref)
    match = re.search(r"screenspot_(mobile|desktop|web)", os.path.basename(ctx.path))
    extra = {"data_source": record["data_source"]} if "data_source" in record else {}
    image, box = _image_path(record["img_filename"], ctx.ref, "img_filename"), box_from_xywh(record["bbox"], ctx.ref)
    platform = match.group(1) if match else None
    return _single(
        record, record["instruction"], image, box, "pixel", record.get("data_type"), platform=platform, extra=extra
    )


@register("screenspot-pro", platform="desktop")
def read_screenspot_pro(record: dict, ctx: ReadContext) -> list[Target]:
    """ScreenSpot-Pro (``likaixin/ScreenSpot-Pro``): ``bbox`` ``[x1, y1, x2, y2]`` in **pixels**, with ``img_size``
    ``[w, h]`` (checked against the image header); ``annotations/<app>_<os>.json``, images relative to ``images/``.

    Record: ``{"id", "img_filename", "bbox", "img_size", "instruction", "instruction_cn", "application",
    "platform": <OS>, "ui_type", "group"}``. Confirmed (same conventions as ``gui-grounding eval --benchmark
    screenspot-pro``). All screenshots are desktop software: platform ``desktop``; the OS is kept as ``os``, with
    ``application``, ``group`` and ``id`` (as ``source_id``).
    """
    require(record, ("img_filename", "bbox", "instruction"), ctx.ref)
    extra = {
        "source_id": record.get("id"),
        "application": record.get("application"),
        "group": record.get("group"),
        "os": record.get("platform"),
    }
    image, box = _image_path(record["img_filename"], ctx.ref, "img_filename"), _box(record["bbox"], ctx.ref, "bbox")
    return _single(
        record,
        record["instruction"],
        image,
        box,
        "pixel",
        record.get("ui_type"),
        extra={k: v for k, v in extra.items() if v is not None},
        stated_size=_stated_size(record.get("img_size"), ctx.ref, "img_size"),
    )


VLM_R1_REC_KEYS = ("image", "problem", "solution")
VLM_R1_NEEDS = (
    "a VLM-R1 record needs 'image' + 'conversations' (grpo_jsonl) or 'image', 'problem', 'solution' "
    "(REC annotation, grpo_rec.py)"
)


def _missing_keys(missing: list[str], record: dict, ref: str) -> SampleError:
    names = ", ".join(repr(k) for k in missing)
    return SampleError(
        ref,
        "bad_field",
        f"missing key{'s' if len(missing) > 1 else ''} {names} ({VLM_R1_NEEDS}); record has {sorted(record)}",
    )


def _rec_solution(value: Any, ref: str) -> Box:
    """A REC ``solution``: a list of 4 numbers in original pixels, or a string holding one (optionally in
    ``<answer>`` tags), as upstream's ``rec_jsons_processed`` files and ``grpo_jsonl`` gpt turns store it."""
    if isinstance(value, str):
        text = value.replace("<answer>", "").replace("</answer>", "").strip()
        try:
            value = lax_loads(text)
        except (ValueError, RecursionError) as err:  # JSONDecodeError, a key twice, an integer with too many digits
            raise SampleError(
                ref, "bad_field", f"solution is not a bbox list: {text[:80]!r} ({type(err).__name__})"
            ) from None
    return _box(value, ref, "solution")


@register("vlm-r1")
def read_vlm_r1(record: dict, ctx: ReadContext) -> list[Target]:
    """VLM-R1 REC data, boxes ``[x1, y1, x2, y2]`` in original **pixels**, in either of upstream's two forms.

    * ``grpo_jsonl`` records: ``{"image", "conversations": [{"from": "human", "value": "<image>..."},
      {"from": "gpt", "value": "[x1, y1, x2, y2]"}]}``, the gpt answer a box (a list, or a string, plain or inside
      ``<answer>...</answer>``). Read by ``gui_grounding.data.schema.record_to_sample`` (the one reader of this form);
      ``bbox``/``target_bbox`` keys of such a record are kept as extra fields, never read as GTA1/canonical boxes.
    * REC annotation records, as in upstream's published ``rec_jsons_processed/*.json`` (a JSON list; read by
      ``src/open-r1-multimodal/src/open_r1/grpo_rec.py:92-195``): ``{"image": "train2014/COCO_train2014_...jpg",
      "problem": "the man on the left", "solution": [x1, y1, x2, y2], "normal_caption": ...}``. ``problem`` is the
      instruction, ``solution`` the box (a list, or a string holding one, optionally in ``<answer>`` tags), ``image``
      a path (or a one-element list). Other keys are kept as extra fields (``id`` as ``source_id``; ``platform`` /
      ``ui_type`` used when valid; other keys named like canonical fields are not copied).

    A record with ``conversations`` is read as the first form; any other record needs ``image``, ``problem`` and
    ``solution``; a missing key is a ``bad_field`` reject whose message names it (``missing key 'solution'``).
    Image paths are relative to the image root.
    """
    if "conversations" in record:
        if "image" not in record:
            raise _missing_keys(["image"], record, ctx.ref)
        shadow = {k: record[k] for k in ("bbox", "target_bbox") if k in record}
        direct = {k: v for k, v in record.items() if k not in shadow} if shadow else record
        return [Target(record=direct, raw=record, extra=shadow)]
    missing = [k for k in VLM_R1_REC_KEYS if k not in record]
    if missing:
        raise _missing_keys(missing, record, ctx.ref)
    image = record["image"]
    if isinstance(image, list):
        if len(image) != 1:
            raise SampleError(ctx.ref, "bad_field", f"grounding needs exactly one image, got {len(image)}")
        image = image[0]
    image = _image_path(image, ctx.ref, "image")
    box = _rec_solution(record["solution"], ctx.ref)
    # a record key named like a canonical output key (gui_grounding.data.schema.CANONICAL_KEYS) is not copied into the
    # sample's extra fields, which would overwrite them
    extra = {k: v for k, v in record.items() if k not in (*VLM_R1_REC_KEYS, "id", *CANONICAL_KEYS)}
    if "id" in record:
        extra["source_id"] = record["id"]
    platform = record.get("platform")
    return _single(
        record, record["problem"], image, box, "pixel", record.get("ui_type"), platform=platform, extra=extra
    )


@register("canonical")
def read_canonical(record: dict, ctx: ReadContext) -> list[Target]:
    """Our canonical records (``gui_grounding.data.schema``): ``{"instruction", "image_path", "target_bbox": {x_min,
    y_min, x_max, y_max} or a list of them}`` in original **pixels**, optional ``sample_id``, ``source``,
    ``platform``, ``ui_type``, ``image_width``/``image_height``.

    Read by ``gui_grounding.data.schema.record_to_sample``; useful to re-validate, clip and de-duplicate a file, or to
    merge several. Image paths relative to the image root.
    """
    return [Target(record=record, raw=record)]


DIRECT_FORMATS = ("vlm-r1", "canonical")  # resolved by schema.record_to_sample, not by the Target pipeline
