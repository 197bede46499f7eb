"""Benchmark readers on hostile input, by rule rather than by case.

* identity: every reader hands out sample ids through ``SampleIds`` (``groundwork.validate.IdRegistry``): null ids get
  distinct generated ids, an explicit id equal to another record's generated id or to another explicit id (``1`` and
  ``"1"``) refuses the load;
* containment: an image path from a data file must stay inside the benchmark's folder (``..`` out of it or an absolute
  path: ``path_outside_root``; a directory: ``not_a_file``); WebClick never copies an outside file into its cache;
* framing: every document of an annotation file is read (a list then JSONL lines, concatenated lists, CRLF / CR line
  endings), garbage is counted as one error per document;
* image frame: sizes are the displayed frame (EXIF orientation), WebClick's embedded bytes included;
* a hypothesis property over generated canonical and ScreenSpot-V2 files.
"""

from __future__ import annotations

import io
import json
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from groundwork import validate
from gui_grounding.data.annotations import DuplicateIdError, EvalInputError, SampleIds, check_unique_ids
from gui_grounding.eval.benchmarks import get_benchmark
from tests.helpers.images import png_bytes

SIZE = (64, 48)


def png(path, size=SIZE, color=(200, 200, 200)) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return str(path)


def rotated_jpeg_bytes(raw_size=(200, 100), orientation=6) -> bytes:
    im = Image.new("RGB", raw_size, (200, 200, 200))
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    im.save(buf, format="JPEG", exif=exif)
    return buf.getvalue()


def write(path, text: str) -> str:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def reasons(report):
    return [(ref, why) for ref, why, _ in report.rejects]


# ---------------------------------------------------------------------------------------------------------------------
# benchmark folders built from scratch (tiny images)


def ssv2_dir(root, records, *, text=None) -> str:
    """A ScreenSpot-V2 folder whose web file holds ``records`` (or the raw ``text``); images a.png, sub/b.png."""
    png(os.path.join(root, "screenspotv2_image", "a.png"))
    png(os.path.join(root, "screenspotv2_image", "sub", "b.png"))
    write(os.path.join(root, "screenspot_web_v2.json"), text if text is not None else json.dumps(records))
    return str(root)


def ssv2_rec(img="a.png", **kw) -> dict:
    return {
        "img_filename": img,
        "bbox": [1, 1, 8, 8],
        "instruction": "Click it",
        "data_type": "text",
        "data_source": "t",
        **kw,
    }


def sspro_dir(root, files: dict[str, list | str]) -> str:
    png(os.path.join(root, "images", "app", "a.png"))
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    for name, recs in files.items():
        write(os.path.join(root, "annotations", f"{name}.json"), recs if isinstance(recs, str) else json.dumps(recs))
    return str(root)


def sspro_rec(rid="x", img="app/a.png", **kw) -> dict:
    rec = {
        "id": rid,
        "img_filename": img,
        "bbox": [1, 1, 9, 9],
        "img_size": list(SIZE),
        "instruction": "Click it",
        "application": "app",
        "platform": "macos",
        "ui_type": "text",
        "group": "Dev",
        **kw,
    }
    if rid is ...:
        del rec["id"]
    return rec


def oswg_dir(root, records, *, text=None, classified=None) -> str:
    png(os.path.join(root, "images", "a.png"))
    write(os.path.join(root, "OSWorld-G.json"), text if text is not None else json.dumps(records))
    cls = {"classified": classified if classified is not None else {"text_matching": []}}
    write(os.path.join(root, "classification_result.json"), json.dumps(cls))
    return str(root)


def oswg_rec(rid="x", img="a.png", **kw) -> dict:
    rec = {
        "id": rid,
        "image_path": img,
        "instruction": "Click it",
        "box_type": "bbox",
        "box_coordinates": [1, 1, 8, 8],
        **kw,
    }
    if rid is ...:
        del rec["id"]
    return rec


def canon_dir(root, records, *, text=None) -> str:
    png(os.path.join(root, "a.png"))
    write(
        os.path.join(root, "test.jsonl"), text if text is not None else "".join(json.dumps(r) + "\n" for r in records)
    )
    return str(root)


def canon_rec(img="a.png", **kw) -> dict:
    return {
        "instruction": "Click it",
        "image_path": img,
        "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 9, "y_max": 9},
        **kw,
    }


def webclick_rows(path, rows) -> str:
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
    return str(path)


def wc_row(data=None, path=None, **kw) -> dict:
    return {
        "image": {"bytes": data, "path": path},
        "instruction": "Click it",
        "bbox": [0.1, 0.1, 0.5, 0.5],
        "bucket": "agentbrowse",
        **kw,
    }


# ---------------------------------------------------------------------------------------------------------------------
# identity


def test_sample_ids_rule():
    ids = SampleIds()
    assert [
        ids.assign(None, "f:0", "r0"),
        ids.assign(True, "f:1", "r1"),
        ids.assign([], "f:2", "r2"),
        ids.assign("", "f:3", "r3"),
        ids.assign(7, "f:4", "r4"),
    ] == ["f:0", "f:1", "f:2", "f:3", "7"]
    assert ids.assign("f:0", "f:5", "r5") == "f:0"  # an explicit id equal to a generated one
    assert ids.assign("7", "f:6", "r6") == "7"  # 7 and "7" are one id
    assert ids.duplicates == [("f:0", "r0", "r5"), ("7", "r4", "r6")] and "f:1" in ids and len(ids) == 5
    with pytest.raises(
        DuplicateIdError,
        match=r"^w: 2 duplicate sample id\(s\): id 'f:0' at r0 and r5; id '7' at r4 "
        r"and r6\. Sample ids must be unique",
    ) as err:
        ids.check("w")
    assert isinstance(err.value, EvalInputError) and "\n" not in str(err.value)
    check_unique_ids([("a", "r0"), ("b", "r1")], "w")
    with pytest.raises(DuplicateIdError, match="id 'a' at r0 and r2"):
        check_unique_ids([("a", "r0"), ("b", "r1"), ("a", "r2")], "w")


def test_canonical_identity(tmp_path):
    bench = get_benchmark("canonical")
    data = canon_dir(
        tmp_path / "n",
        [
            canon_rec(sample_id=None, id=None),
            canon_rec(sample_id=None),
            canon_rec(id=None),
            canon_rec(sample_id=None, id="x"),
            canon_rec(sample_id=True),
            canon_rec(id=[1]),
            canon_rec(id=""),
        ],
    )
    samples, report = bench.load(data)
    assert [s.sample_id for s in samples] == ["test:0", "test:1", "test:2", "x", "test:4", "test:5", "test:6"]
    assert report.rejects == []
    # an explicit id equal to another record's generated id: refused, naming both
    path = os.path.join(canon_dir(tmp_path / "g", [canon_rec(), canon_rec(sample_id="test:0")]), "test.jsonl")
    with pytest.raises(DuplicateIdError, match=f"1 duplicate sample id.*id 'test:0' at {path}:1 and {path}:2"):
        bench.load(path)
    # 1 and "1" are one id (sample_id and id alike); a rejected record's id takes part too
    path = os.path.join(
        canon_dir(tmp_path / "i", [canon_rec(sample_id=1), canon_rec("missing.png", id="1")]), "test.jsonl"
    )
    with pytest.raises(DuplicateIdError, match=f"id '1' at {path}:1 and {path}:2"):
        bench.load(path)


def test_screenspot_v2_identity(tmp_path):
    # the format has no id field: an "id" key is ignored, every id is <file stem>:<index>, never merged
    data = ssv2_dir(
        tmp_path,
        [ssv2_rec(id=None), ssv2_rec(id=None), ssv2_rec(id="screenspot_web_v2:0"), ssv2_rec(id=1), ssv2_rec(id="1")],
    )
    samples, report = get_benchmark("screenspot-v2").load(data)
    assert [s.sample_id for s in samples] == [f"screenspot_web_v2:{i}" for i in range(5)] and report.rejects == []


def test_screenspot_pro_identity(tmp_path):
    bench = get_benchmark("screenspot-pro")
    data = sspro_dir(
        tmp_path / "n",
        {"app_macos": [sspro_rec(None), sspro_rec(None), sspro_rec(...), sspro_rec(False), sspro_rec(7)]},
    )
    samples, report = bench.load(data)
    assert [s.sample_id for s in samples] == ["app_macos:0", "app_macos:1", "app_macos:2", "app_macos:3", "7"]
    assert report.rejects == []
    ann = os.path.join(tmp_path, "g", "annotations")
    sspro_dir(tmp_path / "g", {"a": [sspro_rec(None)], "b": [sspro_rec("a:0")]})  # across files
    with pytest.raises(DuplicateIdError, match=f"id 'a:0' at {ann}/a.json:\\[0\\] and {ann}/b.json:\\[0\\]"):
        bench.load(str(tmp_path / "g"))
    sspro_dir(tmp_path / "i", {"a": [sspro_rec(1), sspro_rec("1", img="nope.png")]})
    with pytest.raises(DuplicateIdError, match=r"id '1' at .*a\.json:\[0\] and .*a\.json:\[1\]"):
        bench.load(str(tmp_path / "i"))


def test_osworld_g_identity(tmp_path):
    bench = get_benchmark("osworld-g")
    data = oswg_dir(
        tmp_path / "n",
        [oswg_rec(None), oswg_rec(None), oswg_rec(...), oswg_rec(5), oswg_rec("")],
        classified={"text_matching": [{"id": 5}, {"id": None}, {"id": "None"}]},
    )
    samples, report = bench.load(data)
    assert [s.sample_id for s in samples] == ["OSWorld-G:0", "OSWorld-G:1", "OSWorld-G:2", "5", "OSWorld-G:4"]
    assert [s.extra["classes"] for s in samples] == [["unclassified"]] * 3 + [["text_matching"], ["unclassified"]]
    assert report.rejects == [] and report.notes["classification_item_without_id"] == 1
    assert report.notes["classified_id_not_in_annotations"] == 1  # "None" is no record's id
    path = os.path.join(oswg_dir(tmp_path / "g", [oswg_rec(None), oswg_rec("OSWorld-G:0")]), "OSWorld-G.json")
    with pytest.raises(DuplicateIdError, match=f"id 'OSWorld-G:0' at {path}:\\[0\\] and {path}:\\[1\\]"):
        bench.load(os.path.dirname(path))
    oswg_dir(tmp_path / "i", [oswg_rec(1), oswg_rec("1")])
    with pytest.raises(DuplicateIdError, match="id '1'"):
        bench.load(str(tmp_path / "i"))


def test_webclick_identity(tmp_path):
    # no id column: the row index across the parquet files, handed out once each
    webclick_rows(tmp_path / "d" / "data" / "test-00000-of-00002.parquet", [wc_row(png_bytes(*SIZE))] * 2)
    webclick_rows(tmp_path / "d" / "data" / "test-00001-of-00002.parquet", [wc_row(png_bytes(*SIZE))] * 2)
    samples, report = get_benchmark("webclick", cache_dir=str(tmp_path / "c")).load(str(tmp_path / "d"))
    assert [s.sample_id for s in samples] == ["0", "1", "2", "3"] and report.rejects == []


# ---------------------------------------------------------------------------------------------------------------------
# containment


@pytest.fixture()
def outside(tmp_path):
    """An image and a text file outside every benchmark folder, and a folder holding a link to the image."""
    out = tmp_path / "outside"
    return {"image": png(out / "secret.png"), "text": write(out / "passwd", "root:x:0:0\n")}


def test_screenspot_v2_paths_stay_inside_the_image_folder(tmp_path, outside):
    root = tmp_path / "ssv2"
    records = [
        ssv2_rec("a.png"),
        ssv2_rec("sub/../sub/b.png"),
        ssv2_rec("../../outside/secret.png"),
        ssv2_rec(outside["image"]),
        ssv2_rec(outside["text"]),
        ssv2_rec("sub"),
        ssv2_rec("sub/../../x.png"),
        ssv2_rec("link.png"),
        ssv2_rec("a\u0000.png"),
        ssv2_rec(""),
    ]
    data = ssv2_dir(root, records)
    os.symlink(outside["image"], root / "screenspotv2_image" / "link.png")  # a link inside the root is followed
    samples, report = get_benchmark("screenspot-v2").load(data)
    web = root / "screenspot_web_v2.json"
    image_dir = str(root / "screenspotv2_image")
    assert [s.image_path for s in samples] == [f"{image_dir}/a.png", f"{image_dir}/sub/b.png", f"{image_dir}/link.png"]
    assert reasons(report) == [
        (f"{web}:[2]", "path_outside_root"),
        (f"{web}:[3]", "path_outside_root"),
        (f"{web}:[4]", "path_outside_root"),
        (f"{web}:[5]", "not_a_file"),
        (f"{web}:[6]", "path_outside_root"),
        (f"{web}:[8]", "not_a_file"),
        (f"{web}:[9]", "bad_field"),
    ]
    assert "is absolute" in report.rejects[1][2]
    assert report.num_records == 10 and report.num_samples == 3


def test_screenspot_pro_and_osworld_g_paths(tmp_path, outside):
    data = sspro_dir(
        tmp_path / "p",
        {
            "t": [
                sspro_rec("a"),
                sspro_rec("b", "../../outside/secret.png"),
                sspro_rec("c", outside["image"]),
                sspro_rec("d", "app"),
            ]
        },
    )
    samples, report = get_benchmark("screenspot-pro").load(data)
    ann = f"{data}/annotations/t.json"
    assert [s.sample_id for s in samples] == ["a"]
    assert reasons(report) == [
        (f"{ann}:[1]", "path_outside_root"),
        (f"{ann}:[2]", "path_outside_root"),
        (f"{ann}:[3]", "not_a_file"),
    ]
    data = oswg_dir(
        tmp_path / "o", [oswg_rec("a"), oswg_rec("b", "../../outside/secret.png"), oswg_rec("c", outside["text"])]
    )
    samples, report = get_benchmark("osworld-g").load(data)
    path = f"{data}/OSWorld-G.json"
    assert [s.sample_id for s in samples] == ["a"]
    assert reasons(report) == [(f"{path}:[1]", "path_outside_root"), (f"{path}:[2]", "path_outside_root")]


def test_canonical_paths(tmp_path, outside):
    root = tmp_path / "c"
    data = canon_dir(
        root,
        [
            canon_rec("a.png"),
            canon_rec("../outside/secret.png"),
            canon_rec(outside["image"]),
            canon_rec(outside["text"]),
            canon_rec("."),
            canon_rec("x/../../outside/secret.png"),
        ],
    )
    samples, report = get_benchmark("canonical").load(data)
    path = f"{root}/test.jsonl"
    # the canonical data rule: relative paths stay inside the file's folder; absolute paths (convert writes images
    # outside its --image-root that way) are accepted and counted
    assert [(s.sample_id, s.image_path) for s in samples] == [("test:0", f"{root}/a.png"), ("test:2", outside["image"])]
    assert report.notes["absolute_image_path"] == 1
    assert reasons(report) == [
        (f"{path}:2", "path_outside_root"),
        (f"{path}:4", "unreadable_image"),
        (f"{path}:5", "not_a_file"),
        (f"{path}:6", "path_outside_root"),
    ]


def test_webclick_path_rows_stay_inside_and_are_never_copied(tmp_path, outside):
    root = tmp_path / "wc"
    inside = png(root / "imgs" / "in.png")
    os.makedirs(root / "adir")
    rows = [
        wc_row(path="imgs/in.png"),
        wc_row(path="../outside/secret.png"),
        wc_row(path=outside["image"]),
        wc_row(path="../../../../../../etc/passwd"),
        wc_row(path="adir"),
        wc_row(path="nope.png"),
        wc_row(b"", path=None),
        wc_row(None, path=None),
        wc_row(png_bytes(*SIZE)),
    ]
    pq_path = webclick_rows(root / "data" / "test-00000-of-00001.parquet", rows)
    cache = tmp_path / "cache"
    samples, report = get_benchmark("webclick", cache_dir=str(cache)).load(str(root))
    assert [(s.sample_id, s.image_path) for s in samples] == [("0", inside), ("8", samples[1].image_path)]
    assert os.path.dirname(samples[1].image_path) == str(cache) and samples[1].image_path.endswith(".png")
    assert reasons(report) == [
        (f"{pq_path}:[1]", "path_outside_root"),
        (f"{pq_path}:[2]", "path_outside_root"),
        (f"{pq_path}:[3]", "path_outside_root"),
        (f"{pq_path}:[4]", "not_a_file"),
        (f"{pq_path}:[5]", "missing_image"),
        (f"{pq_path}:[6]", "missing_image"),
        (f"{pq_path}:[7]", "missing_image"),
    ]
    assert os.listdir(cache) == [os.path.basename(samples[1].image_path)]  # nothing outside was copied in


def test_webclick_cache_file_is_rewritten_when_it_is_a_link(tmp_path, outside):
    rows = [wc_row(png_bytes(*SIZE))]
    webclick_rows(tmp_path / "wc" / "x.parquet", rows)
    bench = get_benchmark("webclick", cache_dir=str(tmp_path / "cache"))
    (first,), _ = bench.load(str(tmp_path / "wc"))
    os.remove(first.image_path)
    os.symlink(outside["image"], first.image_path)  # a planted link where the cached image should be
    (again,), report = bench.load(str(tmp_path / "wc"))
    assert again.image_path == first.image_path and not os.path.islink(again.image_path)
    with open(again.image_path, "rb") as f:
        assert f.read() == png_bytes(*SIZE)
    assert report.rejects == []


# ---------------------------------------------------------------------------------------------------------------------
# framing


def test_screenspot_v2_reads_every_document(tmp_path):
    recs = [json.dumps(ssv2_rec()) for _ in range(5)]
    # a list (CRLF), a second list, JSONL lines, one garbage line: every record read, the garbage one error
    text = "[" + ",\r\n".join(recs[:2]) + "]\r\n[" + recs[2] + "]\r\n" + recs[3] + "\r\n@@@ garbage\r\n" + recs[4]
    data = ssv2_dir(tmp_path / "a", [], text=text)
    web = f"{data}/screenspot_web_v2.json"
    samples, report = get_benchmark("screenspot-v2").load(data)
    assert [s.sample_id for s in samples] == [f"screenspot_web_v2:{i}" for i in (0, 1, 2, 3, 5)]
    assert report.num_records == 6 and reasons(report) == [(f"{web}:5", "unparseable_record")]
    # CR-only line endings
    data = ssv2_dir(tmp_path / "b", [], text="[" + ",\r".join(recs[:2]) + "]\r" + recs[2] + "\r" + recs[3])
    samples, report = get_benchmark("screenspot-v2").load(data)
    assert len(samples) == report.num_records == 4 and report.rejects == []
    # a file that does not start with a list is one error, the file its ref (as the published format is a list)
    for name, text in [("c", recs[0]), ("d", ""), ("e", "  \n"), ("f", "garbage")]:
        data = ssv2_dir(tmp_path / name, [], text=text)
        samples, report = get_benchmark("screenspot-v2").load(data)
        assert samples == [] and reasons(report) == [(f"{data}/screenspot_web_v2.json", "unparseable_record")]
        assert report.num_records == 1


def test_screenspot_pro_and_osworld_g_read_every_document(tmp_path):
    a, b, c = (json.dumps(sspro_rec(i)) for i in "abc")
    data = sspro_dir(tmp_path / "p", {"t": f"[{a}]\n[{b}]\n{c}\n[1, 2"})
    ann = f"{data}/annotations/t.json"
    samples, report = get_benchmark("screenspot-pro").load(data)
    assert [s.sample_id for s in samples] == ["a", "b", "c"]
    assert reasons(report) == [(f"{ann}:4", "unparseable_record")] and report.num_records == 4
    a, b, c = (json.dumps(oswg_rec(i)) for i in "abc")
    data = oswg_dir(tmp_path / "o", [], text=f"[{a},\r{b}]\r{c}\r")
    samples, report = get_benchmark("osworld-g").load(data)
    assert [s.sample_id for s in samples] == ["a", "b", "c"] and report.rejects == []


def test_canonical_reads_every_document(tmp_path):
    r = [json.dumps(canon_rec(sample_id=f"s{i}")) for i in range(4)]
    data = canon_dir(tmp_path, [], text=f"[{r[0]}, {r[1]}]\r\n{r[2]}\r\n{{broken\r\n{r[3]}")
    samples, report = get_benchmark("canonical").load(data)
    assert [s.sample_id for s in samples] == ["s0", "s1", "s2", "s3"]
    assert reasons(report) == [(f"{data}/test.jsonl:3", "unparseable_record")] and report.num_records == 5


# ---------------------------------------------------------------------------------------------------------------------
# image frame


def test_webclick_embedded_bytes_are_sized_in_the_displayed_frame(tmp_path):
    rows = [wc_row(rotated_jpeg_bytes(), bbox=[10.0, 150.0, 50.0, 190.0])]  # raw 200x100, displayed 100x200
    webclick_rows(tmp_path / "wc" / "x.parquet", rows)
    (s,), report = get_benchmark("webclick", cache_dir=str(tmp_path / "c")).load(str(tmp_path / "wc"))
    assert (s.width, s.height) == (100, 200) and s.image_path.endswith(".jpg")
    assert report.rejects == [] and "box_outside_image" not in report.notes  # the box lies in the displayed frame
    assert s.boxes == [(10.0, 150.0, 50.0, 190.0)]


def test_screenspot_v2_sizes_are_the_displayed_frame(tmp_path):
    data = ssv2_dir(tmp_path, [ssv2_rec("r.jpg", bbox=[20, 150, 40, 40])])
    with open(tmp_path / "screenspotv2_image" / "r.jpg", "wb") as f:
        f.write(rotated_jpeg_bytes())
    (s,), report = get_benchmark("screenspot-v2").load(data)
    assert (s.width, s.height) == (100, 200) and report.notes == {"missing_annotation_file": 2}


# ---------------------------------------------------------------------------------------------------------------------
# property: generated canonical and ScreenSpot-V2 files


def _layout(root: str) -> dict:
    """Images under ``root`` (a.png, sub/b.png, link.png -> an outside image, a folder ``sub``) and outside it."""
    outside = os.path.join(os.path.dirname(root), "outside")
    out_image = png(os.path.join(outside, "o.png"))
    out_text = write(os.path.join(outside, "t.txt"), "not an image\n")
    png(os.path.join(root, "a.png"))
    png(os.path.join(root, "sub", "b.png"))
    os.symlink(out_image, os.path.join(root, "link.png"))
    return {"out_image": out_image, "out_text": out_text}


# image path as written -> (outcome for canonical, outcome for ScreenSpot-V2): a reason, or "keep"
PATHS = {
    "a.png": ("keep", "keep"),
    "sub/../sub/b.png": ("keep", "keep"),
    "link.png": ("keep", "keep"),
    "../outside/o.png": ("path_outside_root", "path_outside_root"),
    "sub/../../outside/o.png": ("path_outside_root", "path_outside_root"),
    "OUT_IMAGE": ("keep", "path_outside_root"),  # absolute: the canonical rule accepts it, a benchmark does not
    "OUT_TEXT": ("unreadable_image", "path_outside_root"),
    "missing.png": ("missing_image", "missing_image"),
    "sub": ("not_a_file", "not_a_file"),
    "a\u0000.png": ("not_a_file", "not_a_file"),
    "": ("bad_field", "bad_field"),
    7: ("bad_field", "bad_field"),
}
IDS = st.one_of(
    st.just(...),
    st.none(),
    st.booleans(),
    st.just([]),
    st.just(""),
    st.integers(0, 3),
    st.sampled_from(["0", "1", "dup", "test:0", "test:1", "test:2", "screenspot_web_v2:1"]),
)
RECORD = st.tuples(st.sampled_from(sorted(PATHS, key=str)), st.sampled_from(["sample_id", "id"]), IDS)
FRAMING = st.sampled_from(["list", "jsonl", "list_then_jsonl", "two_lists"])
NEWLINE = st.sampled_from(["\n", "\r\n", "\r"])


def _text(docs: list[str], framing: str, nl: str, split: int, garbage: int) -> str:
    if framing == "two_lists" and len(docs) < 2:  # a later empty list would be one bad document, not framing
        framing = "list"
    k = max(1, min(split, len(docs) - (framing == "two_lists")))
    if framing == "list":
        text = "[" + f",{nl}".join(docs) + "]"
    elif framing == "jsonl":
        text = nl.join(docs)
    elif framing == "list_then_jsonl":
        text = "[" + f",{nl}".join(docs[:k]) + "]" + "".join(nl + d for d in docs[k:])
    else:
        text = "[" + f",{nl}".join(docs[:k]) + "]" + nl + "[" + f",{nl}".join(docs[k:]) + "]"
    return text + "".join(f"{nl}@@@ garbage {i}" for i in range(garbage)) + nl


def _check_property(kind: str, records, framing: str, nl: str, split: int, garbage: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "data")
        image_root = root if kind == "canonical" else os.path.join(root, "screenspotv2_image")
        names = _layout(image_root)
        docs, expect = [], []
        for i, (path, key, rid) in enumerate(records):
            written = names["out_image"] if path == "OUT_IMAGE" else names["out_text"] if path == "OUT_TEXT" else path
            rec = canon_rec(written) if kind == "canonical" else ssv2_rec(written)
            if rid is not ...:
                rec[key] = rid
            docs.append(json.dumps(rec))
            if kind == "canonical":  # the identity rule: sample_id, else id, else <stem>:<index>
                sid = validate.explicit_id(rec.get("sample_id"))
                sid = sid if sid is not None else validate.explicit_id(rec.get("id"))
                expect.append((sid if sid is not None else f"test:{i}", PATHS[path][0], written))
            else:  # no id field in ScreenSpot-V2: always generated
                expect.append((f"screenspot_web_v2:{i}", PATHS[path][1], written))
        if kind == "canonical":
            text = _text(docs, framing, nl, split, garbage)
            write(os.path.join(root, "test.jsonl"), text)
            bench = get_benchmark("canonical")
        else:
            text = _text(docs, "list" if framing == "jsonl" else framing, nl, split, garbage)
            write(os.path.join(root, "screenspot_web_v2.json"), text)
            bench = get_benchmark("screenspot-v2")
        ids = [sid for sid, _, _ in expect]
        if len(set(ids)) < len(ids):
            with pytest.raises(DuplicateIdError) as err:
                bench.load(root)
            assert "\n" not in str(err.value)
            return
        samples, report = bench.load(root)
        again, report2 = bench.load(root)
        # kept + rejected = records read; the kept ones and the reasons are exactly the rule's
        assert report.num_records == len(records) + garbage
        assert report.num_samples == len(samples) and len(samples) + len(report.rejects) == report.num_records
        assert [s.sample_id for s in samples] == [sid for sid, outcome, _ in expect if outcome == "keep"]
        assert [why for _, why, _ in report.rejects] == [o for _, o, _ in expect if o != "keep"] + [
            "unparseable_record"
        ] * garbage
        assert len({s.sample_id for s in samples}) == len(samples)
        for s in samples:
            inside = os.path.commonpath([image_root, s.image_path]) == image_root
            assert inside or (kind == "canonical" and s.image_path == names["out_image"]), s.image_path
        absolute = sum(1 for _, o, w in expect if o == "keep" and w == names["out_image"])
        assert report.notes.get("absolute_image_path", 0) == absolute
        # the same result twice
        key = lambda s: (s.sample_id, s.image_path, s.boxes, s.width, s.height)  # noqa: E731
        assert [key(s) for s in again] == [key(s) for s in samples] and report2.rejects == report.rejects


@settings(max_examples=25, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=8), FRAMING, NEWLINE, st.integers(1, 8), st.integers(0, 2))
def test_canonical_property(records, framing, nl, split, garbage):
    _check_property("canonical", records, framing, nl, split, garbage)


@settings(max_examples=25, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=8), FRAMING, NEWLINE, st.integers(1, 8), st.integers(0, 2))
def test_screenspot_v2_property(records, framing, nl, split, garbage):
    _check_property("screenspot-v2", records, framing, nl, split, garbage)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["canonical", "screenspot-v2"]),
    st.lists(RECORD, min_size=1, max_size=12),
    FRAMING,
    NEWLINE,
    st.integers(1, 12),
    st.integers(0, 3),
)
def test_readers_property_deep(kind, records, framing, nl, split, garbage):
    _check_property(kind, records, framing, nl, split, garbage)
