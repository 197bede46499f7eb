"""The web collector against hostile input: pages that reach outside their folder, pages that never load or tamper
with the DOM, hostile output folders and CLI numbers.

The browser tests need Playwright and Debian's ``/usr/bin/chromium`` (like ``tests/test_collect_web.py``: they fail,
never skip, when either is missing).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from groundwork.outputs import OutputError, OutputLock
from gui_grounding.data.collect import web
from gui_grounding.data.collect.web import (
    DEFAULT_CHROMIUM,
    MAX_SCROLL_OFFSET,
    MAX_VIEWPORT_SIDE,
    _check_extracted,
    _parse_offsets,
    _parse_viewports,
    _scan_pages,
    _shot_names,
    collect_web,
    find_pages,
    register_cli,
    request_block_reason,
)
from tests.helpers.paths import REPO

FIXTURE = os.path.join(REPO, "tests", "fixtures", "html", "elements.html")
MAGENTA, RED, BLUE, GREEN = (255, 0, 255), (255, 0, 0), (0, 0, 255), (0, 170, 0)


def _require_browser():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is missing: pip install -e .[collect]")
    assert os.path.exists(DEFAULT_CHROMIUM), f"{DEFAULT_CHROMIUM} is missing: apt-get install chromium"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gui-grounding")
    register_cli(parser.add_subparsers(dest="command", required=True))
    return parser


def _colours(path: str) -> set:
    with Image.open(path) as im:
        return {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20)}


def _hostile_site(tmp_path):
    """site/page.html reaching outside its folder in five ways, next to one allowed image and one button."""
    Image.new("RGB", (60, 60), MAGENTA).save(tmp_path / "outside.png")
    (tmp_path / "outside.html").write_text("<body style='margin:0;background:#f00'></body>")
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    Image.new("RGB", (60, 60), BLUE).save(site / "sub" / "inside.png")
    os.symlink(tmp_path / "outside.png", site / "link.png")  # a symlink inside the folder pointing out
    (site / "page.html").write_text(f"""<!doctype html><html><body style="margin:0">
<iframe src="file:///etc/passwd" style="position:absolute;left:0;top:0;width:300px;height:200px;border:0"></iframe>
<iframe src="{(tmp_path / "outside.html").as_uri()}"
        style="position:absolute;left:320px;top:0;width:200px;height:200px;border:0"></iframe>
<img src="../outside.png" style="position:absolute;left:0;top:220px">
<img src="link.png" style="position:absolute;left:80px;top:220px">
<img src="sub/../../outside.png?again" style="position:absolute;left:160px;top:220px">
<img src="http://127.0.0.1:9/remote.png" style="position:absolute;left:240px;top:220px">
<img src="sub/inside.png" style="position:absolute;left:320px;top:220px">
<button style="position:absolute;left:20px;top:320px;width:120px;height:40px">Save file</button>
</body></html>""")
    return site


# ---------------------------------------------------------------------------------------------------------------
# containment


def test_outside_files_are_blocked_and_counted(tmp_path):
    _require_browser()
    site = _hostile_site(tmp_path)
    out = tmp_path / "out"
    result = collect_web([str(site)], str(out), viewports=((600, 400),), page_timeout=20)
    assert result.failed == [] and len(result.screenshots) == 1
    colours = _colours(out / "images" / "page__600x400.png")
    assert MAGENTA not in colours and RED not in colours  # no outside image, no outside frame
    assert BLUE in colours  # the image inside the folder loads
    with Image.open(out / "images" / "page__600x400.png") as im:
        assert im.convert("RGB").getpixel((330, 230)) == BLUE
    # iframe /etc/passwd, iframe outside.html, ../outside.png, the symlink, sub/../../outside.png; http
    assert dict(result.blocked) == {"outside_folder": 5, "network": 1}
    assert [r["element"]["name"] for r in result.train] == ["Save file"]
    prov = json.loads((out / "provenance.json").read_text())
    blocked = prov["blocked_requests"]
    assert blocked["total"] == 6 and blocked["by_reason"] == {"outside_folder": 5, "network": 1, "other_scheme": 0}
    assert [(p["page"], p["viewport"], p["blocked"]) for p in blocked["by_page"]] == [("page.html", [600, 400], 6)]
    assert blocked["by_page"][0]["by_reason"] == {"network": 1, "outside_folder": 5}
    assert len(blocked["by_page"][0]["examples"]) == 3  # the first three blocked URLs
    assert "blocked requests: 6" in result.table()


def test_folder_rule_directory_file_and_resource_root(tmp_path):
    """A page in site/sub/ may load ../shared.png when the directory site/ is given, not when the page is given as a
    file (its own folder is site/sub/), and again with --resource-root site."""
    _require_browser()
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    Image.new("RGB", (60, 60), GREEN).save(site / "shared.png")
    (site / "sub" / "p.html").write_text('<body style="margin:0"><img src="../shared.png"></body>')
    runs = {
        "dir": ([str(site)], None),
        "file": ([str(site / "sub" / "p.html")], None),
        "root": ([str(site / "sub" / "p.html")], str(site)),
        "roots": ([str(site / "sub" / "p.html")], [str(site / "sub"), str(site)]),
    }
    seen = {}
    for name, (paths, root) in runs.items():
        out = tmp_path / f"out-{name}"
        result = collect_web(paths, str(out), viewports=((200, 100),), resource_roots=root, page_timeout=20)
        (shot,) = result.screenshots
        seen[name] = (GREEN in _colours(out / shot["file"]), sum(result.blocked.values()))
    assert seen == {"dir": (True, 0), "file": (False, 1), "root": (True, 0), "roots": (True, 0)}
    args = _parser().parse_args(["collect-web", "p.html", "--out", "o", "--resource-root", "a", "--resource-root", "b"])
    assert args.resource_roots == ["a", "b"]
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError, match="outside every --resource-root"):
        collect_web([str(site / "sub" / "p.html")], str(tmp_path / "o"), resource_roots=str(tmp_path / "elsewhere"))


def test_request_block_reason(tmp_path):
    folder = str(tmp_path / "site")
    os.makedirs(os.path.join(folder, "sub"))
    os.symlink(str(tmp_path), os.path.join(folder, "up"))
    ok = [
        f"file://{folder}/a.html",
        f"file://{folder}/sub/x.png?v=1#f",
        f"file://localhost{folder}/a.css",
        f"file://{folder}/sub/%2e%2e/b.png",
        f"file://{folder}",
    ]
    assert [request_block_reason(u, folder) for u in ok] == [None] * len(ok)
    outside = [
        "file:///etc/passwd",
        f"file://{folder}/../x.png",
        f"file://{folder}/sub/%2e%2e/%2e%2e/x.png",
        f"file://{folder}/up/x.png",
        f"file://{folder}x/a.html",
        f"file://evil{folder}/a.html",
        f"file://{folder}/a%00.html",
        "file:relative.html",
    ]
    assert [request_block_reason(u, folder) for u in outside] == ["outside_folder"] * len(outside)
    assert [request_block_reason(u, folder) for u in ["http://x/", "HTTPS://x/", "ws://x", "wss://x", "ftp://x"]] == [
        "network"
    ] * 5
    assert request_block_reason("chrome://settings", folder) == "other_scheme"
    assert request_block_reason("http://[::1/", folder) == "other_scheme"  # unparsable
    assert request_block_reason(f"file://{folder}/x", "/") is None  # the root folder holds everything


def test_scan_pages_symlinks_loops_and_bad_names(tmp_path):
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    shutil.copy(FIXTURE, site / "a.html")
    (tmp_path / "secret.html").write_text("<p>secret</p>")
    os.symlink(tmp_path / "secret.html", site / "leak.html")  # a page pointing out of its folder
    os.symlink(tmp_path, site / "sub" / "up")  # a folder pointing out
    os.symlink(site, site / "sub" / "loop")  # a loop
    bad = os.fsdecode(b"bad-\xff.html")
    shutil.copy(FIXTURE, os.path.join(str(site), bad))
    pages, skipped = _scan_pages([str(site)])
    assert [rel for _, rel, _ in pages] == ["a.html"]
    assert sorted((s["path"], s["reason"]) for s in skipped) == [
        ("bad-\ufffd.html", "bad_name"),
        ("leak.html", "escapes_folder"),
        ("sub/up", "escapes_folder"),
    ]
    assert [rel for _, rel in find_pages([str(site)])] == ["a.html"]
    # two directory arguments: names relative to their common folder, never one name twice
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(FIXTURE, other / "a.html")
    assert [rel for _, rel in find_pages([str(site), str(other)])] == ["other/a.html", "site/a.html"]


def test_shot_names_are_distinct():
    rels = ["a-b.html", "a_b.html", "A B.htm", "x/index.html", "x-index.html", "q" * 300 + ".html"]
    names = _shot_names(rels)
    assert len(set(names.values())) == len(rels)
    assert names["x/index.html"].startswith("x-index-") and names["a-b.html"].startswith("a-b-")
    assert all(len(n) <= 80 + 1 + 64 for n in names.values()) and len(names["q" * 300 + ".html"]) == 89
    assert _shot_names(["index.html", "tutorial/index.html"]) == {
        "index.html": "index",
        "tutorial/index.html": "tutorial-index",
    }
    assert _shot_names(list(reversed(rels))) == names  # independent of order


def test_same_slug_pages_keep_their_own_screenshots(tmp_path):
    _require_browser()
    pages = tmp_path / "pages"
    pages.mkdir()
    for name, colour in (("a-b.html", "#f00"), ("a_b.html", "#00f")):
        (pages / name).write_text(f'<body style="margin:0;background:{colour}"><button>Go {name}</button></body>')
    result = collect_web([str(pages)], str(tmp_path / "out"), viewports=((200, 100),), page_timeout=20)
    files = {s["page"]: s["file"] for s in result.screenshots}
    assert len(set(files.values())) == 2
    assert RED in _colours(tmp_path / "out" / files["a-b.html"])
    assert BLUE in _colours(tmp_path / "out" / files["a_b.html"])
    ids = [r["sample_id"] for r in result.train + result.test]
    assert len(ids) == len(set(ids)) == 2


# ---------------------------------------------------------------------------------------------------------------
# one bad page never ends the run

BAD_PAGES = {
    "loop.html": "<body><button>Loop</button><script>while (true) {}</script></body>",  # load never fires
    "late.html": "<body><button>Late</button><script>addEventListener('load', () => setTimeout(() => "
    "{ while (true) {} }, 0))</script></body>",  # loops after load: extraction or screenshot never ends
    "throws.html": "<body><button>Throws</button><script>window.getComputedStyle = () => { throw new Error('no') "
    "}</script></body>",
    "tampered.html": "<body><button>Tampered</button><script>Object.defineProperty(window, 'scrollY', "
    "{get: () => 'x'})</script></body>",
}


@pytest.mark.slow  # ~14 s: real Chromium pages
def test_bad_pages_are_counted_and_good_pages_written(tmp_path):
    _require_browser()
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(FIXTURE, pages / "good.html")
    for name, html in BAD_PAGES.items():
        (pages / name).write_text(html)
    out = tmp_path / "out"
    result = collect_web([str(pages)], str(out), viewports=((1000, 600),), page_timeout=6)  # the good page: < 1 s
    assert {f["page"]: f["reason"] for f in result.failed} == {
        "loop.html": "timeout",
        "late.html": "timeout",
        "throws.html": "extract_error",
        "tampered.html": "bad_extract",
    }
    assert result.page_loads == 5
    assert [s["page"] for s in result.screenshots] == ["good.html"]
    assert os.listdir(out / "images") == ["good__1000x600.png"]  # nothing of a failed page is written
    records = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    records += [json.loads(x) for x in (out / "test.jsonl").read_text().splitlines()]
    assert len(records) == 7 and {r["page"] for r in records} == {"good.html"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["page_loads"] == {"total": 5, "failed": 4}
    assert {(f["page"], f["viewport"][0], f["reason"]) for f in prov["failed_pages"]} == {
        ("loop.html", 1000, "timeout"),
        ("late.html", 1000, "timeout"),
        ("throws.html", 1000, "extract_error"),
        ("tampered.html", 1000, "bad_extract"),
    }
    assert all(f["detail"] and "\n" not in f["detail"] for f in prov["failed_pages"])
    assert prov["settings"]["page_timeout"] == 6
    table = result.table()
    assert "failed: 4" in table and "timeout" in table and "loop.html @ 1000x600: timeout" in table


def test_cli_fails_in_one_line_when_every_page_fails(tmp_path, capsys):
    _require_browser()
    (tmp_path / "loop.html").write_text(BAD_PAGES["loop.html"])
    out = tmp_path / "out"
    args = _parser().parse_args(
        ["collect-web", str(tmp_path / "loop.html"), "--out", str(out), "--viewports", "300x200", "--page-timeout", "1"]
    )
    with pytest.raises(RuntimeError, match=r"all 1 page load\(s\) failed") as err:
        args.func(args)
    assert "\n" not in str(err.value)
    assert "failed: 1" in capsys.readouterr().out
    prov = json.loads((out / "provenance.json").read_text())  # the outputs are still written
    assert [f["reason"] for f in prov["failed_pages"]] == ["timeout"] and prov["num_samples"] == {"train": 0, "test": 0}


def test_check_extracted_rejects_malformed_results():
    good = {
        "elements": [
            {
                "tag": "a",
                "role": None,
                "kind": "link",
                "name": "Home",
                "name_is_visible_text": True,
                "rect": [1, 2, 30, 40],
            }
        ],
        "drops": {"hidden": 2},
        "viewport": [10, 10],
        "scroll_y": 0,
    }
    assert _check_extracted(good)["elements"][0]["rect"] == [1.0, 2.0, 30.0, 40.0]
    bad = [
        None,
        [],
        {"elements": "x", "drops": {}, "scroll_y": 0},
        {"elements": [], "drops": {}, "scroll_y": math.nan},
        {"elements": [], "drops": {"evil": 1}, "scroll_y": 0},
        {"elements": [], "drops": {"hidden": -1}, "scroll_y": 0},
        {"elements": [], "drops": {"hidden": 1.5}, "scroll_y": 0},
        {"elements": [7], "drops": {}, "scroll_y": 0},
    ]
    for el in (
        {"rect": [0, 0, math.inf, 1]},
        {"rect": [0, 0, 1]},
        {"rect": ["0", 0, 1, 1]},
        {"name": 5},
        {"name_is_visible_text": "yes"},
        {"tag": ""},
        {"tag": "x" * 201},
        {"tag": None},
    ):
        bad.append({**good, "elements": [{**good["elements"][0], **el}]})
    for raw in bad:
        with pytest.raises(ValueError):
            _check_extracted(raw)
    odd = {**good["elements"][0], "name": "bad \ud800", "role": "r" * 65, "kind": "\udfff"}
    cleaned = _check_extracted({**good, "elements": [odd]})["elements"][0]
    assert (cleaned["name"], cleaned["role"], cleaned["kind"]) == ("", None, "clickable")  # name "" -> no_name


# ---------------------------------------------------------------------------------------------------------------
# outputs


def test_out_folder_checks_and_lock(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(FIXTURE, pages / "p.html")
    with pytest.raises(OutputError, match="one of the inputs"):
        collect_web([str(pages)], str(pages))
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        collect_web([str(pages)], str(tmp_path / "file"))
    out = tmp_path / "out"
    with OutputLock(str(out), folder=True), pytest.raises(OutputError, match="another run is writing"):
        collect_web([str(pages)], str(out))
    assert sorted(os.listdir(out)) == []  # nothing rendered or written by the refused run
    (out / "images").symlink_to(tmp_path)
    with pytest.raises(OutputError, match="not a plain folder"):
        collect_web([str(pages)], str(out))


def test_settings_are_checked_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    bad = [
        dict(viewports=((10**9, 10),)),
        dict(viewports=((800, 600), (800, 600))),
        dict(viewports=((True, 5),)),
        dict(viewports=()),
        dict(scroll_offsets=(0, 0)),
        dict(scroll_offsets=(-1,)),
        dict(test_fraction=math.nan),
        dict(test_fraction=-0.1),
        dict(page_timeout=0),
        dict(page_timeout=math.inf),
        dict(page_timeout=math.nan),
        dict(max_pages=0),
        dict(min_size=-1),
        dict(min_area=1.5),
        dict(max_name_chars=0),
        dict(max_per_screenshot=0),
        dict(seed=-1),
        dict(seed=1.0),
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            collect_web([FIXTURE], str(out), **kwargs)
    assert not out.exists()


def test_interrupted_run_leaves_no_summary(tmp_path, monkeypatch):
    """The earlier summary and its screenshots go before rendering; an interrupted run writes no summary."""
    _require_browser()
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(FIXTURE, pages / "p.html")
    out = tmp_path / "out"
    collect_web([str(pages)], str(out), viewports=((400, 300),), page_timeout=20)
    assert sorted(os.listdir(out)) == ["images", "provenance.json", "test.jsonl", "train.jsonl"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(web, "_render_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        collect_web([str(pages)], str(out), viewports=((400, 300),))
    assert not (out / "provenance.json").exists() and os.listdir(out / "images") == []
    assert not [f for f in os.listdir(out) if f.startswith(".")]  # no lock or temp file left behind


def test_malformed_earlier_provenance_is_tolerated(tmp_path):
    _require_browser()
    out = tmp_path / "out"
    (out / "images").mkdir(parents=True)
    (out / "images" / "keep.png").write_bytes(b"x")
    for old in ("{not json", '{"screenshots": 5}', "[1, 2]", '{"screenshots": [{"file": "../../etc/x.png"}, 3]}'):
        (out / "provenance.json").write_text(old)
        result = collect_web([FIXTURE], str(out), viewports=((400, 300),), page_timeout=20)
        assert len(result.screenshots) == 1
        assert json.loads((out / "provenance.json").read_text())["screenshots"] == result.screenshots
    assert sorted(os.listdir(out / "images")) == ["elements__400x300.png", "keep.png"]
    assert not [f for d, _, fs in os.walk(out) for f in fs if f.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------------------------
# CLI numbers

NUMERIC_FLAGS = {  # flag: (lowest, highest, integer?)
    "--max-pages": (1, None, True),
    "--test-fraction": (0.0, 1.0, False),  # [0, 1)
    "--seed": (0, None, True),
    "--min-size": (0, MAX_VIEWPORT_SIDE, True),
    "--min-area": (0, 100_000_000, True),
    "--max-name-chars": (1, 10_000, True),
    "--max-per-screenshot": (1, None, True),
    "--page-timeout": (0.0, 86_400.0, False),  # (0, 86400]
}


def _parse(flag_args: list[str]):
    """Parsed namespace, or None when argparse refused (its message must be one ``error:`` line)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return _parser().parse_args(["collect-web", "page.html", "--out", "o", *flag_args])
        except SystemExit as exc:
            assert exc.code == 2
    lines = err.getvalue().strip().splitlines()
    assert lines[-1].startswith("gui-grounding collect-web: error: argument ")
    return None


def _in_range(flag: str, value) -> bool:
    lo, hi, is_int = NUMERIC_FLAGS[flag]
    if is_int and (not isinstance(value, int) or isinstance(value, bool)):
        return False
    if not math.isfinite(value) or value < lo or (hi is not None and value > hi):
        return False
    if flag == "--test-fraction":
        return value < 1
    if flag == "--page-timeout":
        return value > 0
    return True


def test_numeric_flags_refuse_bad_values():
    for flag in NUMERIC_FLAGS:
        for bad in ("nan", "inf", "-inf", "-1", "1e400", "", "x", "1e9" if NUMERIC_FLAGS[flag][1] else "-5"):
            args = _parse([f"{flag}={bad}"])
            assert args is None or _in_range(flag, getattr(args, flag[2:].replace("-", "_"))), (flag, bad)
        assert _parse([flag, "nan"]) is None and _parse([f"{flag}=-1"]) is None and _parse([flag, "inf"]) is None
    for args in (
        ["--viewports", "1000000000x10"],
        ["--viewports", "nanxnan"],
        ["--viewports", "infx1"],
        ["--viewports", "800x600,800x600"],
        ["--viewports", "1e3x600"],
        ["--scroll-offsets", "0,0"],
        ["--scroll-offsets", "nan"],
        ["--scroll-offsets", "10000000"],
        ["--scroll-offsets", ""],
        ["--test-fraction", "1"],
        ["--page-timeout", "0"],
        ["--page-timeout", "86401"],
    ):
        assert _parse(args) is None, args
    ok = _parse(["--viewports", " 800 X 600 ,1_024x768", "--scroll-offsets", "0,600", "--page-timeout", "0.5"])
    assert ok.viewports == ((800, 600), (1024, 768)) and ok.scroll_offsets == (0, 600) and ok.page_timeout == 0.5
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        _parser().parse_args(["collect-web", "--help"])
    help_text = " ".join(out.getvalue().split())
    assert "(a number > 0 and <= 86400)" in help_text and "(an integer >= 1)" in help_text


def _check_viewports(text):
    try:
        sizes = _parse_viewports(text)
    except argparse.ArgumentTypeError as err:
        assert "\n" not in str(err)
        return
    assert 0 < len(sizes) == len(set(sizes)) <= web.MAX_VIEWPORTS
    assert all(type(v) is int and 1 <= v <= MAX_VIEWPORT_SIDE for size in sizes for v in size)


def _check_offsets(text):
    try:
        offsets = _parse_offsets(text)
    except argparse.ArgumentTypeError as err:
        assert "\n" not in str(err)
        return
    assert 0 < len(offsets) == len(set(offsets)) <= web.MAX_SCROLL_OFFSETS
    assert all(type(v) is int and 0 <= v <= MAX_SCROLL_OFFSET for v in offsets)


_sides = st.one_of(
    st.integers(-10, 10_000),
    st.integers(-(10**30), 10**30),
    st.sampled_from(["nan", "inf", "-0", "1e3", " 7", "", "x"]),
)


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.text(alphabet="0123456789x,-_ .e", max_size=40))
def test_viewport_and_offset_parsers_property(text):
    _check_viewports(text)
    _check_offsets(text)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(_sides, _sides), min_size=1, max_size=4), st.lists(_sides, min_size=1, max_size=4))
def test_structured_viewports_and_offsets_property(pairs, offsets):
    text = ",".join(f"{w}x{h}" for w, h in pairs)
    _check_viewports(text)
    ints = [(w, h) for w, h in pairs if isinstance(w, int) and isinstance(h, int)]
    if (
        len(ints) == len(pairs)
        and all(1 <= v <= MAX_VIEWPORT_SIDE for p in ints for v in p)
        and len(set(ints)) == len(ints)
    ):
        assert _parse_viewports(text) == tuple(ints)  # every valid list is accepted exactly
    text = ",".join(str(o) for o in offsets)
    _check_offsets(text)
    if all(isinstance(o, int) and 0 <= o <= MAX_SCROLL_OFFSET for o in offsets) and len(set(offsets)) == len(offsets):
        assert _parse_offsets(text) == tuple(offsets)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(sorted(NUMERIC_FLAGS)),
    st.one_of(st.text(max_size=20), st.floats().map(repr), st.integers(-(10**30), 10**30).map(str)),
)
def test_numeric_flags_property(flag, value):
    args = _parse([f"{flag}={value}"])  # "=": a value like "-h" stays a value
    if args is not None:
        assert _in_range(flag, getattr(args, flag[2:].replace("-", "_"))), (flag, value)
