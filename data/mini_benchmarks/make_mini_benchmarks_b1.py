"""Regenerate the mini UI-Vision, MMBench-GUI L2 and Showdown-clicks benchmarks from our own screenshots.

The same method as ``make_mini_benchmarks.py`` (whose ``crop``, ``save``, ``target`` and ``write_json`` this script
reuses): each folder is laid out exactly as its published original (file names, field names, box conventions, image
folders; see ``gui_grounding/eval/benchmarks/{ui_vision,mmbench_gui,showdown_clicks}.py``), its screenshots are crops
of our rendered python-docs pages and its targets are elements the web collector recorded there, moved into the
crop's frame. Nothing comes from the real benchmarks: application, category, platform, level, element-type and
recording labels are assigned so that every breakdown key and each headline rule matters (UI-Vision files of 4 / 3 /
2 records, so the mean of the file accuracies differs from the pooled accuracy; MMBench-GUI levels of 5 and 6 records
over platforms of different sizes, so mean(Basic, Advanced) differs from the pooled accuracy).

Deterministic for the same inputs and Pillow version. Run from anywhere:
``.venv/bin/python data/mini_benchmarks/make_mini_benchmarks_b1.py``.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_mini_benchmarks as base  # noqa: E402  (the first generator: crop, save, target, write_json)

# ---------------------------------------------------------------------------------------------------------------------
# UI-Vision: annotations/element_grounding/element_grounding_{basic,functional,spatial}.json + images/, bbox [x1, y1,
# x2, y2] pixels, image_size [w, h]

UIV_APPS = {  # application -> (category, page, crop)
    "VSCode": ("Development", "library-json__1280x720", (0, 160, 320, 448)),
    "GIMP": ("Creativity", "bugs__1024x768", (512, 0, 1024, 256)),
    "LibreOffice Calc": ("Productivity", "index__1280x720", (288, 208, 928, 448)),
}
UIV_FILES = {  # file -> [(application, web-sample id, element_type, corners reversed?)]
    "basic": [
        ("VSCode", "library-json__1280x720:11", "text", False),
        ("GIMP", "bugs__1024x768:5", "icon", False),
        ("LibreOffice Calc", "index__1280x720:3", "text", False),
        ("VSCode", "library-json__1280x720:12", "text", True),  # the scorer exchanges reversed corners
    ],
    "functional": [
        ("GIMP", "bugs__1024x768:6", "icon", False),
        ("LibreOffice Calc", "index__1280x720:9", "text", False),
        ("VSCode", "library-json__1280x720:13", "text", False),
    ],
    "spatial": [
        ("GIMP", "bugs__1024x768:7", "text", False),
        ("LibreOffice Calc", "index__1280x720:5", "text", False),
    ],
}


def uiv_image_name(app: str) -> str:
    return "element_grounding/" + app.lower().replace(" ", "_") + ".png"


def make_ui_vision(out: str) -> int:
    sizes = {}
    for app, (_, page, rect) in UIV_APPS.items():
        im = base.crop(page, rect)
        sizes[app] = list(im.size)
        base.save(im, os.path.join(out, "images", uiv_image_name(app)))
    n = 0
    for kind, items in UIV_FILES.items():
        records = []
        for app, sid, element_type, reverse in items:
            category, _, rect = UIV_APPS[app]
            instruction, _, (x0, y0, x1, y1) = base.target(sid, rect)
            records.append(
                {
                    "image_path": uiv_image_name(app),
                    "prompt_to_evaluate": instruction,
                    "bbox": [x1, y1, x0, y0] if reverse else [x0, y0, x1, y1],
                    "image_size": sizes[app],
                    "platform": app,
                    "element_type": element_type,
                    "category": category,
                }
            )
        base.write_json(
            os.path.join(out, "annotations", "element_grounding", f"element_grounding_{kind}.json"), records
        )
        n += len(records)
    return n


# ---------------------------------------------------------------------------------------------------------------------
# MMBench-GUI L2: L2_annotations.json + offline_images/<platform>/<image_path>, bbox normalised [0, 1] x1, y1, x2, y2;
# crops 512 or 256 px wide and 256 px high, so the normalised values are exact binary fractions

MMB_IMAGES = {  # platform -> (app_name, page, crop)
    "os_windows": ("Notepad", "glossary__1024x768", (512, 448, 1024, 704)),
    "os_mac": ("Safari", "contents__1024x768", (256, 160, 768, 416)),
    "os_android": ("Chrome", "faq-index__1024x768", (256, 160, 512, 416)),
    "os_web": ("python.org", "howto-index__1280x720", (768, 0, 1280, 256)),
}
MMB_RECORDS = [  # (platform, grounding_type, data_type, web-sample id)
    ("os_windows", "basic", "text", "glossary__1024x768:8"),
    ("os_windows", "basic", "text", "glossary__1024x768:10"),
    ("os_windows", "basic", "icon", "glossary__1024x768:12"),
    ("os_mac", "basic", "icon", "contents__1024x768:4"),
    ("os_mac", "basic", "text", "contents__1024x768:5"),
    ("os_windows", "advanced", "icon", "glossary__1024x768:14"),
    ("os_windows", "advanced", "text", "glossary__1024x768:16"),
    ("os_web", "advanced", "icon", "howto-index__1280x720:5"),
    ("os_web", "advanced", "text", "howto-index__1280x720:6"),
    ("os_android", "advanced", "icon", "faq-index__1024x768:0"),
    ("os_android", "advanced", "text", "faq-index__1024x768:2"),
]


def mmb_image_name(page: str) -> str:
    return f"{page}.png"


def make_mmbench_gui_l2(out: str) -> int:
    sizes = {}
    for platform, (_, page, rect) in MMB_IMAGES.items():
        im = base.crop(page, rect)
        sizes[platform] = im.size
        base.save(im, os.path.join(out, "offline_images", platform, mmb_image_name(page)))
    records = []
    for index, (platform, level, data_type, sid) in enumerate(MMB_RECORDS):
        app, page, rect = MMB_IMAGES[platform]
        instruction, _, (x0, y0, x1, y1) = base.target(sid, rect)
        w, h = sizes[platform]
        records.append(
            {
                "index": index,
                "image_path": mmb_image_name(page),
                "platform": platform,
                "app_name": app,
                "instruction": instruction,
                "bbox": [x0 / w, y0 / h, x1 / w, y1 / h],
                "image_size": [w, h],
                "grounding_type": level,
                "data_type": data_type,
            }
        )
    base.write_json(os.path.join(out, "L2_annotations.json"), records)
    return len(records)


# ---------------------------------------------------------------------------------------------------------------------
# Showdown-clicks: showdown-clicks-dev/data.csv + showdown-clicks-dev/frames/<recording>/<n>.png, x1..y2 pixels

SHOWDOWN_FRAMES = {  # image (relative to showdown-clicks-dev/) -> (recording id, page, crop)
    "frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/3.png": (
        "7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10",
        "about__1280x720",
        (320, 128, 832, 400),
    ),
    "frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/4.png": (
        "7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10",
        "library-os__1024x768",
        (320, 240, 864, 352),
    ),
    "frames/C41B9E07-5D2A-4B3C-8E6F-0A1B2C3D4E5F/0.png": (
        "C41B9E07-5D2A-4B3C-8E6F-0A1B2C3D4E5F",
        "faq-index__1024x768",
        (704, 384, 1024, 560),
    ),
}
SHOWDOWN_ROWS = [  # (frame, web-sample id)
    ("frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/3.png", "about__1280x720:0"),
    ("frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/3.png", "about__1280x720:2"),
    ("frames/7D3E1A52-0B6C-4F1E-9A1D-2C8B5E4F6A10/4.png", "library-os__1024x768:3"),
    ("frames/C41B9E07-5D2A-4B3C-8E6F-0A1B2C3D4E5F/0.png", "faq-index__1024x768:11"),
    ("frames/C41B9E07-5D2A-4B3C-8E6F-0A1B2C3D4E5F/0.png", "faq-index__1024x768:13"),
]
SHOWDOWN_COLUMNS = ["id", "recording_id", "instruction", "image", "x1", "y1", "x2", "y2", "width", "height"]


def make_showdown_clicks(out: str) -> int:
    split = os.path.join(out, "showdown-clicks-dev")
    sizes = {}
    for image, (_, page, rect) in SHOWDOWN_FRAMES.items():
        im = base.crop(page, rect)
        sizes[image] = im.size
        base.save(im, os.path.join(split, image))
    os.makedirs(split, exist_ok=True)
    with open(os.path.join(split, "data.csv"), "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(SHOWDOWN_COLUMNS)
        for i, (image, sid) in enumerate(SHOWDOWN_ROWS):
            recording, _, rect = SHOWDOWN_FRAMES[image]
            instruction, _, (x0, y0, x1, y1) = base.target(sid, rect)
            w, h = sizes[image]
            writer.writerow([f"{recording}_{i}", recording, instruction, image, x0, y0, x1, y1, w, h])
    return len(SHOWDOWN_ROWS)


def main() -> None:
    for name, make in (
        ("ui_vision", make_ui_vision),
        ("mmbench_gui_l2", make_mmbench_gui_l2),
        ("showdown_clicks", make_showdown_clicks),
    ):
        out = os.path.join(HERE, name)
        if os.path.isdir(out):
            shutil.rmtree(out)
        n = make(out)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        print(f"{name:<16} {n:>3} samples  {size / 1024:>6.1f} KiB  -> {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
