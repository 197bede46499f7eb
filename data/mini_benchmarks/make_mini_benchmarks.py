"""Regenerate the committed mini benchmarks from the project's own screenshots in ``data/web_sample``.

Each mini benchmark is laid out exactly as its published original (annotation files, field names, box conventions,
image folders; see ``gui_grounding/eval/benchmarks/*.py``), but its screenshots are crops of our own rendered
python-docs pages and its targets are elements the web collector recorded there (``data/web_sample/*.jsonl``), moved
into the crop's frame. Nothing here comes from the real benchmarks: application/group/bucket/class labels are
assigned so that every breakdown key of each benchmark's metrics is exercised.

Crops are quantised to 64 colours (median cut) and saved as optimised PNG to keep the folder small (~0.4 MB); the
targets stay on the same pixels. Deterministic: the same inputs and Pillow/pyarrow versions give the same files.

Run from anywhere: ``.venv/bin/python data/mini_benchmarks/make_mini_benchmarks.py``.
"""

from __future__ import annotations

import io
import json
import os
import shutil

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
WEB_SAMPLE = os.path.join(HERE, "..", "web_sample")


def load_web_sample() -> dict[str, dict]:
    """``sample_id -> record`` of the committed web sample (train and test)."""
    records = {}
    for split in ("train", "test"):
        with open(os.path.join(WEB_SAMPLE, f"{split}.jsonl"), encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                records[rec["sample_id"]] = rec
    return records


RECORDS = load_web_sample()


def crop(page: str, rect: tuple[int, int, int, int]) -> Image.Image:
    """Crop ``rect`` = (x0, y0, x1, y1) (pixels, x1/y1 exclusive) of ``images/<page>.png``, quantised to 64 colours."""
    with Image.open(os.path.join(WEB_SAMPLE, "images", f"{page}.png")) as im:
        return im.convert("RGB").crop(rect).quantize(64)


def png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def save(im: Image.Image, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(png_bytes(im))


def target(sample_id: str, rect: tuple[int, int, int, int]) -> tuple[str, str, list[int]]:
    """``(instruction, ui_type, [x_min, y_min, x_max, y_max])`` of a web-sample element, in the crop's pixels.

    Raises:
        ValueError: the element is not fully inside the crop.
    """
    rec = RECORDS[sample_id]
    b = rec["target_bbox"]
    box = [b["x_min"] - rect[0], b["y_min"] - rect[1], b["x_max"] - rect[0], b["y_max"] - rect[1]]
    w, h = rect[2] - rect[0], rect[3] - rect[1]
    if not (0 <= box[0] < box[2] <= w and 0 <= box[1] < box[3] <= h):
        raise ValueError(f"{sample_id} box {box} is not inside the {w}x{h} crop {rect}")
    return rec["instruction"], rec["ui_type"], box


def write_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")


# ---------------------------------------------------------------------------------------------------------------------
# ScreenSpot-V2: screenspot_{mobile,desktop,web}_v2.json + screenspotv2_image/, bbox [x, y, w, h] pixels

SSV2 = {
    "mobile": (
        "installing-index__1024x768",
        (580, 0, 940, 640),
        [
            "installing-index__1024x768:7",
            "installing-index__1024x768:3",
            "installing-index__1024x768:2",
            "installing-index__1024x768:6",
        ],
    ),
    "desktop": (
        "tutorial-index__1280x720",
        (320, 0, 1280, 540),
        ["tutorial-index__1280x720:9", "tutorial-index__1280x720:10", "tutorial-index__1280x720:7"],
    ),
    "web": ("bugs__1024x768", (256, 0, 1024, 512), ["bugs__1024x768:8", "bugs__1024x768:7", "bugs__1024x768:5"]),
}


def make_screenspot_v2(out: str) -> int:
    n = 0
    for platform, (page, rect, ids) in SSV2.items():
        image_name = f"{platform}_{page}.png"
        save(crop(page, rect), os.path.join(out, "screenspotv2_image", image_name))
        items = []
        for sid in ids:
            instruction, ui_type, (x0, y0, x1, y1) = target(sid, rect)
            items.append(
                {
                    "img_filename": image_name,
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "instruction": instruction,
                    "data_type": ui_type,
                    "data_source": "python-docs",
                }
            )
        write_json(os.path.join(out, f"screenspot_{platform}_v2.json"), items)
        n += len(items)
    return n


# ---------------------------------------------------------------------------------------------------------------------
# ScreenSpot-Pro: annotations/<task>.json + images/<task>/<file>, bbox [x1, y1, x2, y2] pixels with img_size

SSPRO = {
    "vscode_macos": (
        "Dev",
        "vscode",
        "macos",
        "library-json__1280x720",
        (640, 0, 1280, 360),
        ["library-json__1280x720:4", "library-json__1280x720:5", "library-json__1280x720:8"],
    ),
    "pycharm_macos": (
        "Dev",
        "pycharm",
        "macos",
        "tutorial-index__1024x768",
        (512, 0, 1024, 640),
        ["tutorial-index__1024x768:7", "tutorial-index__1024x768:9", "tutorial-index__1024x768:11"],
    ),
    "word_windows": (
        "Office",
        "word",
        "windows",
        "glossary__1024x768",
        (256, 0, 1024, 768),
        ["glossary__1024x768:5", "glossary__1024x768:7", "glossary__1024x768:12"],
    ),
}


def make_screenspot_pro(out: str) -> int:
    n = 0
    for task, (group, app, platform, page, rect, ids) in SSPRO.items():
        img_filename = f"{task}/{page}.png"
        im = crop(page, rect)
        save(im, os.path.join(out, "images", img_filename))
        items = []
        for i, sid in enumerate(ids):
            instruction, ui_type, box = target(sid, rect)
            items.append(
                {
                    "img_filename": img_filename,
                    "bbox": box,
                    "instruction": instruction,
                    "application": app,
                    "id": f"{task}_{i}",
                    "ui_type": ui_type,
                    "group": group,
                    "platform": platform,
                    "img_size": list(im.size),
                    "instruction_cn": "",
                }
            )
        write_json(os.path.join(out, "annotations", f"{task}.json"), items)
        n += len(items)
    return n


# ---------------------------------------------------------------------------------------------------------------------
# OSWorld-G: OSWorld-G.json + classification_result.json + images/; bbox [x, y, w, h], polygon flat [x1, y1, ...]


def _poly(points: list[tuple[int, int]], rect: tuple[int, int, int, int]) -> list[int]:
    flat = []
    for x, y in points:
        flat += [x - rect[0], y - rect[1]]
    return flat


def make_osworld_g(out: str) -> int:
    index_rect, json_rect = (0, 0, 960, 600), (0, 96, 640, 560)
    index_img, json_img = "index__1280x720.png", "library-json__1280x720.png"
    save(crop("index__1280x720", index_rect), os.path.join(out, "images", index_img))
    save(crop("library-json__1280x720", json_rect), os.path.join(out, "images", json_img))

    def bbox_item(item_id: str, image: str, sid: str, rect) -> dict:
        instruction, _, (x0, y0, x1, y1) = target(sid, rect)
        return {
            "id": item_id,
            "image_path": image,
            "instruction": instruction,
            "box_type": "bbox",
            "box_coordinates": [x0, y0, x1 - x0, y1 - y0],
        }

    # polygons drawn around recorded elements: a rectangle as 4 vertices, and a chamfered hexagon
    x0, y0, x1, y1 = (RECORDS["index__1280x720:9"]["target_bbox"][k] for k in ("x_min", "y_min", "x_max", "y_max"))
    rect_poly = _poly([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], index_rect)
    x0, y0, x1, y1 = (
        RECORDS["library-json__1280x720:12"]["target_bbox"][k] for k in ("x_min", "y_min", "x_max", "y_max")
    )
    ym = (y0 + y1) // 2
    hexagon = _poly([(x0 + 4, y0), (x1 - 4, y0), (x1, ym), (x1 - 4, y1), (x0 + 4, y1), (x0, ym)], json_rect)
    items = [
        bbox_item("mini_0", index_img, "index__1280x720:5", index_rect),
        bbox_item("mini_1", index_img, "index__1280x720:13", index_rect),
        {
            "id": "mini_2",
            "image_path": index_img,
            "instruction": RECORDS["index__1280x720:9"]["instruction"],
            "box_type": "polygon",
            "box_coordinates": rect_poly,
        },
        {
            "id": "mini_3",
            "image_path": index_img,
            "instruction": 'Click the "Download Python 2.7 installer" button',
            "box_type": "refusal",
            "box_coordinates": [-1, -1, -1, -1],
        },
        bbox_item("mini_4", json_img, "library-json__1280x720:11", json_rect),
        {
            "id": "mini_5",
            "image_path": json_img,
            "instruction": RECORDS["library-json__1280x720:12"]["instruction"],
            "box_type": "polygon",
            "box_coordinates": hexagon,
        },
        bbox_item("mini_6", json_img, "library-json__1280x720:17", json_rect),
        {
            "id": "mini_7",
            "image_path": json_img,
            "instruction": 'Open the "yaml" module documentation',
            "box_type": "refusal",
            "box_coordinates": [-1, -1, -1, -1],
        },
    ]
    write_json(os.path.join(out, "OSWorld-G.json"), items)
    classes = {
        "text_matching": ["mini_0", "mini_1"],
        "element_recognition": ["mini_2", "mini_5"],
        "layout_understanding": ["mini_1"],
        "fine_grained_manipulation": ["mini_4", "mini_5"],
        "refusal": ["mini_3", "mini_7"],
    }  # fmt: skip  (mini_6 is in no class: "unclassified")
    by_id = {item["id"]: item for item in items}
    write_json(
        os.path.join(out, "classification_result.json"),
        {
            "classified": {
                c: [{"id": i, "instruction": by_id[i]["instruction"]} for i in ids] for c, ids in classes.items()
            }
        },
    )
    return len(items)


# ---------------------------------------------------------------------------------------------------------------------
# WebClick: data/test-00000-of-00001.parquet, columns image{bytes,path}, instruction, bbox (normalised xyxy), bucket

WEBCLICK = [  # (bucket, page, crop, sample ids); crops are 512x512 so normalised values are exact binary fractions
    (
        "agentbrowse",
        "bugs__1024x768",
        (512, 0, 1024, 512),
        ["bugs__1024x768:5", "bugs__1024x768:7", "bugs__1024x768:9"],
    ),
    (
        "humanbrowse",
        "glossary__1024x768",
        (0, 256, 512, 768),
        ["glossary__1024x768:7", "glossary__1024x768:11", "glossary__1024x768:13"],
    ),
    (
        "calendars",
        "tutorial-index__1024x768",
        (0, 0, 512, 512),
        ["tutorial-index__1024x768:5", "tutorial-index__1024x768:13"],
    ),
]


def webclick_rows() -> list[dict]:
    """The mini WebClick rows (image bytes PNG, bbox normalised [0, 1] x_min, y_min, x_max, y_max)."""
    rows = []
    for bucket, page, rect, ids in WEBCLICK:
        im = crop(page, rect)
        data = png_bytes(im)
        w, h = im.size
        for sid in ids:
            instruction, _, (x0, y0, x1, y1) = target(sid, rect)
            rows.append(
                {
                    "image": {"bytes": data, "path": f"{page}.png"},
                    "instruction": instruction,
                    "bbox": [x0 / w, y0 / h, x1 / w, y1 / h],
                    "bucket": bucket,
                }
            )
    return rows


def write_webclick_parquet(rows: list[dict], path: str) -> None:
    """Write rows as a parquet file with WebClick's columns (image struct{bytes, path}, instruction, bbox, bucket)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("instruction", pa.string()),
            ("bbox", pa.list_(pa.float64())),
            ("bucket", pa.string()),
        ]
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def make_webclick(out: str) -> int:
    rows = webclick_rows()
    write_webclick_parquet(rows, os.path.join(out, "data", "test-00000-of-00001.parquet"))
    return len(rows)


def main() -> None:
    for name, make in (
        ("screenspot_v2", make_screenspot_v2),
        ("screenspot_pro", make_screenspot_pro),
        ("osworld_g", make_osworld_g),
        ("webclick", make_webclick),
    ):
        out = os.path.join(HERE, name)
        if os.path.isdir(out):
            shutil.rmtree(out)
        n = make(out)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        print(f"{name:<15} {n:>3} samples  {size / 1024:>6.1f} KiB  -> {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
