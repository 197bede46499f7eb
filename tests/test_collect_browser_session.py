"""The collector's browser session (``gui_grounding.data.collect.browser._render_all``) against a fake Playwright.

Every page load is counted once and ends either committed or failed with its reason code (``FAIL_REASONS``), blocked
requests are counted per reason, and a browser that crashes or does not close is relaunched; a relaunch that fails
fails the page loads not yet done. No Chromium is needed: the real-browser tests are ``tests/test_collect_web.py`` and
``tests/test_collect_web_hostile.py``.
"""

from __future__ import annotations

import asyncio
import json

import playwright.async_api as playwright_api
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from gui_grounding.data.collect.browser import FAIL_REASONS, _render_all
from gui_grounding.data.collect.web import CollectResult

EXTRACTED = {
    "elements": [
        {"tag": "a", "role": None, "kind": "link", "name": "Home", "name_is_visible_text": True, "rect": [1, 2, 30, 40]}
    ],
    "drops": {"hidden": 2},
    "scroll_y": 0,
}
#: what a unit named so ends as: None = committed, else its failure reason
OUTCOME = {
    "ok": None,
    "blocked": None,  # committed, with three requests blocked (one per reason) and one allowed
    "closeerr": None,  # committed; its context does not close, so the browser is restarted for the next unit
    "ptimeout": "timeout",
    "loaderr": "load_error",
    "badextract": "bad_extract",
    "extracterr": "extract_error",
    "shoterr": "screenshot_error",
    "ctxerr": "browser_error",
    "routeerr": "browser_error",
    "crash": "browser_error",
}
REQUESTS = ["http://example.org/a.js", "file:///etc/passwd", "gopher://x/", "file:///site/style.css"]


class _Route:
    def __init__(self, url: str):
        self.request = type("Request", (), {"url": url})()

    async def continue_(self):
        pass

    async def abort(self, why):
        pass


class _Page:
    def __init__(self, context):
        self.context, self.kind, self.y = context, "", 0

    def set_default_timeout(self, ms):
        pass

    def set_default_navigation_timeout(self, ms):
        pass

    async def goto(self, uri, wait_until, timeout):
        self.kind = uri.rsplit("/", 1)[-1].split("-")[0]
        if self.kind == "blocked":
            for url in REQUESTS:
                await self.context.router(_Route(url))
        if self.kind == "hang":
            await asyncio.sleep(60)
        if self.kind == "loaderr":
            raise PlaywrightError("net::ERR_FAILED\nsecond line")
        if self.kind == "ptimeout":
            raise PlaywrightTimeout("Timeout 30000ms exceeded")
        if self.kind == "crash":
            self.context.browser.connected = False
            raise PlaywrightError("Target closed")

    async def evaluate(self, script, arg):
        if "scrollTo" in script:
            self.y = arg
            return None
        if self.kind == "badextract":
            return {"elements": "not a list"}
        if self.kind == "extracterr":
            raise PlaywrightError("Execution context was destroyed")
        return {**json.loads(json.dumps(EXTRACTED)), "scroll_y": min(self.y, 500)}

    async def screenshot(self, type, full_page, timeout):
        if self.kind == "shoterr":
            raise PlaywrightError("screenshot failed")
        return b"png %d" % self.y


class _Context:
    def __init__(self, browser, kind):
        self.browser, self.kind, self.router = browser, kind, None

    async def route(self, pattern, router):
        if self.kind == "routeerr":
            raise PlaywrightError("route failed")
        self.router = router

    async def new_page(self):
        return _Page(self)

    async def close(self):
        if self.kind == "closeerr":
            raise PlaywrightError("close failed")


class _Browser:
    def __init__(self, n, kinds):
        self.version, self.connected, self.kinds = f"fake {n}", True, kinds

    def is_connected(self):
        return self.connected

    async def new_context(self, viewport, **kwargs):
        kind = self.kinds[viewport["width"]]  # the unit's name, found by its viewport width
        if kind == "ctxerr":
            raise PlaywrightError("cannot create a context")
        return _Context(self, kind)

    async def close(self):
        self.connected = False


class _Playwright:
    """``async_playwright()``: launches succeed ``launches_ok`` times, then fail."""

    def __init__(self, kinds, launches_ok):
        self.kinds, self.launches_ok, self.launches = kinds, launches_ok, 0
        self.chromium = self

    async def launch(self, executable_path, args):
        self.launches += 1
        if self.launches > self.launches_ok:
            raise PlaywrightError("spawn failed\nmore")
        return _Browser(self.launches, self.kinds)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def _run(monkeypatch, names, *, launches_ok=99, page_timeout=30.0):
    """Render one unit per name; returns (result, commits, the fake, version)."""
    kinds = {100 + i: name for i, name in enumerate(names)}
    fake = _Playwright(kinds, launches_ok)
    monkeypatch.setattr(playwright_api, "async_playwright", lambda: fake)
    units = [(f"/site/{name}-{i}.html", f"{name}-{i}", ("/site",), (100 + i, 50)) for i, name in enumerate(names)]
    commits = []
    result = CollectResult()
    opts = {"scroll_offsets": (0, 300, 900), "min_size": 4, "min_area": 64, "page_timeout": page_timeout}
    version = asyncio.run(_render_all(units, opts, "/fake/chromium", result, lambda *c: commits.append(c)))
    return result, commits, fake, version


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(OUTCOME)), min_size=1, max_size=8))
def test_every_page_load_is_committed_or_failed_once_with_its_reason(names):
    with pytest.MonkeyPatch.context() as monkeypatch:
        result, commits, fake, version = _run(monkeypatch, names)
    assert version == "fake 1" and result.page_loads == len(names)
    units = [f"{name}-{i}" for i, name in enumerate(names)]
    assert [c[0] for c in commits] == [u for u, n in zip(units, names, strict=True) if OUTCOME[n] is None]
    assert [(f["page"], f["reason"]) for f in result.failed] == [
        (u, OUTCOME[n]) for u, n in zip(units, names, strict=True) if OUTCOME[n] is not None
    ]
    assert {f["reason"] for f in result.failed} <= set(FAIL_REASONS)
    for _, viewport, shots in commits:  # offsets 0 and 300 reached, 900 not (the page scrolls to 500 at most)
        assert [offset for offset, _, _ in shots] == [0, 300] and viewport[1] == 50
    blocked = names.count("blocked")
    assert dict(result.blocked) == (
        {"network": blocked, "outside_folder": blocked, "other_scheme": blocked} if blocked else {}
    )
    assert [p["page"] for p in result.blocked_pages] == [u for u in units if u.startswith("blocked")]
    restarts = sum(n in ("closeerr", "crash") for n in names[:-1])  # the last unit's browser is not relaunched
    assert fake.launches == 1 + restarts


def test_failure_details_and_blocked_requests(monkeypatch):
    result, commits, _, _ = _run(monkeypatch, ["blocked", "loaderr", "ctxerr"])
    assert result.failed == [
        {"page": "loaderr-1", "viewport": [101, 50], "reason": "load_error", "detail": "net::ERR_FAILED"},
        {"page": "ctxerr-2", "viewport": [102, 50], "reason": "browser_error", "detail": "cannot create a context"},
    ]
    assert result.blocked_pages == [
        {
            "page": "blocked-0",
            "viewport": [100, 50],
            "blocked": 3,
            "by_reason": {"network": 1, "other_scheme": 1, "outside_folder": 1},
            "examples": REQUESTS[:3],
        }
    ]
    assert [c[0] for c in commits] == ["blocked-0"]


def test_a_page_over_its_time_limit_fails_with_timeout_and_the_next_one_runs(monkeypatch):
    result, commits, _, _ = _run(monkeypatch, ["hang", "ok"], page_timeout=0.05)
    assert result.failed == [
        {"page": "hang-0", "viewport": [100, 50], "reason": "timeout", "detail": "load did not finish within 0.05 s"}
    ]
    assert [c[0] for c in commits] == ["ok-1"] and result.page_loads == 2


def test_a_relaunch_that_fails_fails_the_rest(monkeypatch):
    result, commits, fake, _ = _run(monkeypatch, ["ok", "crash", "ok", "ok"], launches_ok=1)
    detail = "cannot start Chromium /fake/chromium: spawn failed"
    assert [(f["page"], f["reason"], f["detail"]) for f in result.failed] == [
        ("crash-1", "browser_error", "Target closed"),
        ("ok-2", "browser_error", detail),
        ("ok-3", "browser_error", detail),
    ]
    assert [c[0] for c in commits] == ["ok-0"] and result.page_loads == 4 and fake.launches == 2


def test_chromium_that_does_not_start_is_one_error(monkeypatch):
    with pytest.raises(RuntimeError, match=r"^cannot start Chromium /fake/chromium: spawn failed$"):
        _run(monkeypatch, ["ok"], launches_ok=0)
