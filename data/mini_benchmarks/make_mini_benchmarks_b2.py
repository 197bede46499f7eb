"""Regenerate the committed mini VenusBench-GD and UI-I2E-Bench folders from the project's own screenshots.

The same recipe as ``make_mini_benchmarks.py`` (whose ``crop``, ``save``, ``target`` and ``write_json`` this script
imports): each folder is laid out as its published original (``gui_grounding/eval/benchmarks/venusbench_gd.py`` and
``ui_i2e.py`` give the layouts and their sources), its screenshots are crops of our rendered python-docs pages
(``data/web_sample/images``), quantised to 64 colours, and its targets are elements the web collector recorded there,
moved into the crop's frame. Nothing comes from the real benchmarks: task files, platforms, applications, instruction
types and sources are assigned so that every breakdown of each benchmark's metrics occurs, the Chinese instructions are
ours, the implicit instructions are our rewordings of the recorded ones, and the refusal items ask for elements the
pages do not have. The refusal items' ``bbox`` ``[-1, -1, -1, -1]`` is our placeholder (the published
``refusal_spatial.json`` could not be read; the reader ignores a refusal item's box).

Run from anywhere: ``.venv/bin/python data/mini_benchmarks/make_mini_benchmarks_b2.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_mini_benchmarks import HERE, crop, save, target, write_json  # noqa: E402

# ---------------------------------------------------------------------------------------------------------------------
# VenusBench-GD: instruction/<task>.json + images/{web,mobile,desktop}/, bbox [x1, y1, x2, y2] pixels

VENUS_IMAGES = {  # platform -> (page, crop, image file under images/, application label)
    "web": ("howto-index__1280x720", (640, 0, 1280, 400), "web/howto-index.png", "python-docs-howto"),
    "mobile": ("faq-index__1024x768", (256, 150, 656, 550), "mobile/faq-index.png", "python-docs-faq"),
    "desktop": ("library-os__1280x720", (0, 150, 640, 700), "desktop/library-os.png", "python-docs-library"),
}
VENUS_TASKS = {  # task file -> [(platform, web-sample id or a refusal instruction)]
    "element_grounding": [
        ("web", "howto-index__1280x720:1"),
        ("web", "howto-index__1280x720:5"),
        ("mobile", "faq-index__1024x768:0"),
    ],
    "spatial_grounding": [("desktop", "library-os__1280x720:9"), ("mobile", "faq-index__1024x768:2")],
    "visual_grounding": [("web", "howto-index__1280x720:6")],
    "reasoning_grounding": [("desktop", "library-os__1280x720:4")],
    "functional_grounding": [("mobile", "faq-index__1024x768:4"), ("desktop", "library-os__1280x720:7")],
    "refusal_spatial": [
        ("web", 'Click the "Download as EPUB" button below the search field'),
        ("mobile", 'Open the "Rust FAQ" link under "Programming FAQ"'),
        ("desktop", 'Click the "os.teleport()" link left of "environ"'),
    ],
}
ZH = "点击："  # our Chinese prefix ("click:"), so that instruction_zh differs from instruction


def make_venusbench_gd(out: str) -> int:
    for page, rect, image, _ in VENUS_IMAGES.values():
        save(crop(page, rect), os.path.join(out, "images", image))
    n = 0
    for task, items in VENUS_TASKS.items():
        records = []
        for platform, ref in items:
            page, rect, image, application = VENUS_IMAGES[platform]
            if task.startswith("refusal"):
                instruction, ui_type, box = ref, "text", [-1, -1, -1, -1]
            else:
                instruction, ui_type, box = target(ref, rect)
            records.append(
                {
                    "img_filename": image,
                    "bbox": box,
                    "instruction": instruction,
                    "instruction_zh": ZH + instruction,
                    "platform": platform,
                    "application": application,
                    "ui_type": ui_type,
                }
            )
        write_json(os.path.join(out, "instruction", f"{task}.json"), records)
        n += len(records)
    return n


# ---------------------------------------------------------------------------------------------------------------------
# UI-I2E-Bench: I2E-bench-annotation.jsonl + images, bounding_box [x1, y1, x2, y2] pixels, annotations.instr_type

I2E_IMAGES = {  # source label -> (page, crop, image file)
    "web": ("contents__1024x768", (300, 150, 700, 450), "images/contents.png"),
    "android": ("py-modindex__1280x720", (256, 100, 896, 500), "images/py-modindex.png"),
}
I2E_ITEMS = [  # (source, web-sample id, element type, implicit rewording or None for the recorded instruction)
    ("web", "contents__1024x768:4", "button", None),
    ("web", "contents__1024x768:6", "button", "Read about the new way to raise several exceptions at once"),
    ("web", "contents__1024x768:9", "button", "Learn how a method can annotate that it returns its own class"),
    ("web", "contents__1024x768:10", "button", None),
    ("android", "py-modindex__1280x720:3", "icon", "Jump to the modules whose names start with the fourth letter"),
    ("android", "py-modindex__1280x720:14", "icon", None),
    ("android", "py-modindex__1280x720:15", "icon", "Open the module for compact arrays of numbers"),
    ("android", "py-modindex__1280x720:16", "icon", "Open the module that parses Python source into a tree"),
]


def make_ui_i2e(out: str) -> int:
    for page, rect, image in I2E_IMAGES.values():
        save(crop(page, rect), os.path.join(out, image))
    lines = []
    for source, sid, el_type, implicit in I2E_ITEMS:
        page, rect, image = I2E_IMAGES[source]
        instruction, _, box = target(sid, rect)
        record = {
            "image": image,
            "instruction": implicit or instruction,
            "bounding_box": box,
            "annotations": {"instr_type": "implicit" if implicit else "explicit"},
            "source": source,
            "el_type": el_type,
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    with open(os.path.join(out, "I2E-bench-annotation.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)


def main() -> None:
    for name, make in (("venusbench_gd", make_venusbench_gd), ("ui_i2e", make_ui_i2e)):
        out = os.path.join(HERE, name)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        n = make(out)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        print(f"{name:<15} {n:>3} samples  {size / 1024:>6.1f} KiB  -> {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
