"""The browser side of ``collect-web`` (:mod:`gui_grounding.data.collect.web`): Chromium, what a page may load, and
what is read from a page.

* :data:`CHROMIUM_ARGS`: the headless flags, with a dead proxy as the second network wall;
* containment: :func:`request_block_reason` (the rule) and :class:`_Router` (every request of every frame of a page
  load goes through it: allowed ones continue, the rest are aborted and counted per reason, :data:`BLOCK_REASONS`);
* extraction: :data:`EXTRACT_JS` runs in the page and returns its visible interactable elements;
  :func:`_check_extracted` checks every field of what it returned (the page's own script can tamper with it);
* rendering: :func:`_render_all` runs each page load (page x viewport) in its own browser context within the page
  time limit, relaunches a crashed browser, and records failures (:data:`FAIL_REASONS`) and blocked requests in the
  :class:`~gui_grounding.data.collect.web.CollectResult`.

The rules themselves (what is dropped, blocked or failed, and why) are in the collector's module docstring.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

from groundwork.validate import is_text

logger = logging.getLogger(__name__)

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--font-render-hinting=none",
    # a dead proxy for everything, loopback included: network traffic that routing does not see fails too
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]
DROP_REASONS = ("hidden", "offscreen", "tiny", "wrapped", "occluded", "no_name", "long_name", "ambiguous", "over_cap")
BLOCK_REASONS = ("outside_folder", "network", "other_scheme")
FAIL_REASONS = ("timeout", "load_error", "extract_error", "screenshot_error", "bad_extract", "browser_error")
NETWORK_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})
_CLOSE_TIMEOUT = 10.0  # s for closing a context or the browser

# Runs inside the page. Returns {"elements": [...], "drops": {reason: n}} for the current viewport.
# Each element: tag, role, kind, name, name_is_visible_text, rect (left, top, right, bottom in viewport CSS px).
EXTRACT_JS = r"""
(params) => {
  const {minSize, minArea} = params;
  const W = document.documentElement.clientWidth, H = document.documentElement.clientHeight;
  const SELECTOR = 'a[href], button, input:not([type=hidden]), select, textarea, [role=button], [role=link], ' +
                   '[role=tab], [role=menuitem], summary, [onclick]';
  const drops = {};
  const drop = (reason) => { drops[reason] = (drops[reason] || 0) + 1; };
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();

  // accessible name, in the usual order; second value: whether the name is text shown on screen
  function accessibleName(el) {
    const labelledby = el.getAttribute('aria-labelledby');
    if (labelledby) {
      const t = clean(labelledby.split(/\s+/).map(id => document.getElementById(id))
                      .filter(Boolean).map(e => e.innerText).join(' '));
      if (t) return [t, false];
    }
    const aria = clean(el.getAttribute('aria-label'));
    if (aria) return [aria, false];
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') {
      if (el.id) {
        const label = document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
        if (label && clean(label.innerText)) return [clean(label.innerText), false];
      }
      if (tag === 'INPUT' && ['submit', 'button', 'reset'].includes(el.type) && clean(el.value)) return [clean(el.value), true];
      if (tag === 'INPUT' && el.type === 'image' && clean(el.alt)) return [clean(el.alt), false];
      if (clean(el.placeholder)) return [clean(el.placeholder), true];
      if (tag === 'SELECT' && el.selectedOptions.length) return [clean(el.selectedOptions[0].text), true];
    }
    const text = clean(el.innerText);
    if (text) return [text, true];
    const img = el.querySelector('img[alt]');
    if (img && clean(img.alt)) return [clean(img.alt), false];
    if (clean(el.title)) return [clean(el.title), false];
    return ['', false];
  }

  function kindOf(el) {
    const role = el.getAttribute('role');
    if (role) return role;
    const tag = el.tagName.toLowerCase();
    if (tag === 'a') return 'link';
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'select') return 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'input') {
      const t = (el.type || 'text').toLowerCase();
      if (['submit', 'button', 'reset', 'image'].includes(t)) return 'button';
      if (t === 'checkbox' || t === 'radio') return t;
      return 'textbox';
    }
    return 'clickable';
  }

  const elements = [];
  for (const el of document.querySelectorAll(SELECTOR)) {
    const style = getComputedStyle(el);
    const visible = el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
    const r = el.getBoundingClientRect();
    if (!visible || style.visibility !== 'visible' || r.width === 0 || r.height === 0) { drop('hidden'); continue; }
    if (r.left < 0 || r.top < 0 || r.right > W || r.bottom > H) { drop('offscreen'); continue; }
    if (r.width < minSize || r.height < minSize || r.width * r.height < minArea) { drop('tiny'); continue; }
    // an inline element broken over lines has fragments that do not overlap vertically (children may split one
    // line into several fragments; those overlap and are fine)
    const frags = Array.from(el.getClientRects()).filter(q => q.width > 0 && q.height > 0);
    if (frags.some(q => q.top >= frags[0].bottom - 1 || q.bottom <= frags[0].top + 1)) { drop('wrapped'); continue; }
    const probes = [[0.5, 0.5], [0.2, 0.5], [0.8, 0.5], [0.5, 0.2], [0.5, 0.8]];
    const hits = probes.map(([fx, fy]) => {
      const t = document.elementFromPoint(r.left + fx * r.width, r.top + fy * r.height);
      return t !== null && (t === el || el.contains(t));
    });
    if (!hits[0] || hits.filter(Boolean).length < 4) { drop('occluded'); continue; }
    const [name, shown] = accessibleName(el);
    elements.push({tag: el.tagName.toLowerCase(), role: el.getAttribute('role'), kind: kindOf(el), name: name,
                   name_is_visible_text: shown, rect: [r.left, r.top, r.right, r.bottom]});
  }
  return {elements: elements, drops: drops, viewport: [W, H], scroll_y: window.scrollY};
}
"""


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _inside(path: str, folders: str | tuple[str, ...]) -> bool:
    """``path`` (a real path) is one of ``folders`` (real paths) or lies under one."""
    folders = (folders,) if isinstance(folders, str) else folders
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def request_block_reason(url: str, folders: str | tuple[str, ...]) -> str | None:
    """None when a page whose folder is ``folders`` (a real path, or several) may load ``url``; else the reason it is
    blocked: ``outside_folder`` (a ``file:`` URL whose real path, ``..`` and symlinks resolved, is not inside a folder
    of ``folders``, or one naming another host), ``network`` (http, https, ws, wss, ftp) or ``other_scheme``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "other_scheme"
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            return "outside_folder"
        path = os.fsdecode(urllib.parse.unquote_to_bytes(parts.path))
        if not path.startswith("/") or "\0" in path:
            return "outside_folder"
        return None if _inside(os.path.realpath(path), folders) else "outside_folder"
    return "network" if scheme in NETWORK_SCHEMES else "other_scheme"


def _first_line(err: BaseException, limit: int = 300) -> str:
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _BadExtract(ValueError):
    """The page's script returned something that is not the extraction result (a tampered page)."""


class _Router:
    """The per-unit request router: continue what :func:`request_block_reason` allows, abort and count the rest."""

    def __init__(self, folders: tuple[str, ...]):
        self.folders = folders
        self.blocked: Counter = Counter()
        self.examples: list[str] = []

    async def __call__(self, route) -> None:
        url = route.request.url
        reason = request_block_reason(url, self.folders)
        try:
            if reason is None:
                await route.continue_()
                return
            self.blocked[reason] += 1
            if len(self.examples) < 3:
                self.examples.append(url if len(url) <= 200 else url[:197] + "...")
            await route.abort("blockedbyclient")
        except Exception as err:  # noqa: BLE001 - the context closed under a pending request: nothing to route
            logger.debug("routing %s: %s", url[:200], _first_line(err))


async def _render_unit(context, path: str, opts: dict, stage: list[str]) -> list:
    """Load ``path`` in ``context`` and return ``[(offset, extracted, png bytes), ...]`` (``stage[0]`` names the
    step under way, for the failure reason)."""
    timeout_ms = opts["page_timeout"] * 1000
    stage[0] = "load"
    page = await context.new_page()
    page.set_default_timeout(timeout_ms)
    page.set_default_navigation_timeout(timeout_ms)
    await page.goto(Path(path).as_uri(), wait_until="load", timeout=timeout_ms)
    shots = []
    for offset in opts["scroll_offsets"]:
        stage[0] = "extract"
        await page.evaluate("y => window.scrollTo({left: 0, top: y, behavior: 'instant'})", offset)
        raw = await page.evaluate(EXTRACT_JS, {"minSize": opts["min_size"], "minArea": opts["min_area"]})
        extracted = _check_extracted(raw)
        if offset and round(extracted["scroll_y"]) != offset:
            continue  # the page is too short for this offset: it would repeat a screenshot
        stage[0] = "screenshot"
        shots.append((offset, extracted, await page.screenshot(type="png", full_page=False, timeout=timeout_ms)))
    return shots


async def _render_all(units: list, opts: dict, chromium: str, result: Any, commit) -> str:
    """Render every unit ``(path, name, folder, viewport)``, one browser context each, within ``page_timeout``;
    ``commit(name, viewport, shots)`` writes a unit that succeeded; failures and blocked requests go into ``result``
    (a :class:`~gui_grounding.data.collect.web.CollectResult`). Returns the Chromium version.

    Raises:
        RuntimeError: Chromium does not start (a relaunch that fails later fails the units not yet done instead).
    """
    from playwright.async_api import async_playwright
    from tqdm.auto import tqdm

    async with async_playwright() as pw:
        session = _Session(pw, chromium, opts, result)
        version = await session.start()
        for i, _ in enumerate(tqdm(units, desc="page loads", unit="page")):
            if not await session.load(units, i, commit):
                break
        await session.close_browser()
    return version


class _Session:
    """The browser of one collection and the steps of one page load (:func:`_render_all`): (re)launch Chromium, open
    the unit's context with its :class:`_Router`, render it within ``page_timeout``, close the context (one that does
    not close restarts the browser), then record the unit's failure and its blocked requests in ``result``."""

    def __init__(self, pw: Any, chromium: str, opts: dict, result: Any):
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        self.pw, self.chromium, self.opts, self.result = pw, chromium, opts, result
        self.Error, self.Timeout = PlaywrightError, PlaywrightTimeout
        self.browser = None

    async def launch(self) -> None:
        """Start Chromium (``self.browser``; unchanged when it does not start).

        Raises:
            RuntimeError: Chromium does not start (one line naming the binary).
        """
        try:
            self.browser = await self.pw.chromium.launch(executable_path=self.chromium, args=CHROMIUM_ARGS)
        except self.Error as err:
            raise RuntimeError(f"cannot start Chromium {self.chromium}: {_first_line(err)}") from None

    async def start(self) -> str:
        """Launch the browser; returns its version."""
        await self.launch()
        return self.browser.version

    async def load(self, units: list, i: int, commit) -> bool:
        """Page load ``units[i]``, counted; False when the browser is gone and cannot be restarted."""
        path, rel, folder, viewport = units[i]
        self.result.page_loads += 1
        if not await self.ensure_browser(units, i):
            return False
        router = _Router(folder)
        context, failure = await self.open_context(viewport, router)
        if failure is None:
            failure = await self.render(context, path, rel, viewport, commit)
        if context is not None:
            await self.close_context(context, rel)
        if failure is not None:
            self.record_failure(rel, viewport, failure)
        if router.blocked:
            self.record_blocked(rel, viewport, router)
        return True

    async def ensure_browser(self, units: list, i: int) -> bool:
        """Relaunch a closed or crashed browser before ``units[i]``; when that fails, every unit from ``i`` on is
        counted and failed (``browser_error``) and the answer is False."""
        if self.browser is not None and self.browser.is_connected():
            return True
        try:
            await self.launch()
        except RuntimeError as err:
            for _, rel, _, viewport in units[i:]:
                self.result.failed.append(
                    {"page": rel, "viewport": list(viewport), "reason": "browser_error", "detail": _first_line(err)}
                )
            self.result.page_loads += len(units) - i - 1
            logger.error("%s; %d page load(s) not done", err, len(units) - i)
            return False
        return True

    async def open_context(self, viewport: tuple[int, int], router: _Router) -> tuple[Any, tuple[str, str] | None]:
        """``(context, failure)``: a fresh context of ``viewport`` (scale 1, no service workers, no downloads) with
        every request routed through ``router``; the failure is ``browser_error`` when Playwright refuses (the
        context, if it was made, is still returned to be closed)."""
        context = None
        try:
            context = await self.browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]},
                device_scale_factor=1,
                service_workers="block",
                accept_downloads=False,
            )
            await context.route("**/*", router)
        except self.Error as err:
            return context, ("browser_error", _first_line(err))
        return context, None

    async def render(self, context: Any, path: str, rel: str, viewport: tuple[int, int], commit) -> tuple | None:
        """Render ``path`` in ``context`` within ``page_timeout`` and commit its shots; or the failure ``(reason,
        detail)``: ``timeout`` (naming the step under way), ``bad_extract``, or ``<step>_error``."""
        stage = ["load"]
        timeout = self.opts["page_timeout"]
        try:
            shots = await asyncio.wait_for(_render_unit(context, path, self.opts, stage), timeout)
        except (TimeoutError, asyncio.TimeoutError, self.Timeout):
            return ("timeout", f"{stage[0]} did not finish within {timeout:g} s")
        except _BadExtract as err:
            return ("bad_extract", _first_line(err))
        except self.Error as err:
            return (f"{stage[0]}_error", _first_line(err))
        commit(rel, viewport, shots)
        return None

    async def close_context(self, context: Any, rel: str) -> None:
        """Close the unit's context within ``_CLOSE_TIMEOUT``; when it does not close, close the browser too (the next
        unit relaunches it)."""
        try:
            await asyncio.wait_for(context.close(), _CLOSE_TIMEOUT)
        except (TimeoutError, asyncio.TimeoutError, self.Error) as err:
            logger.warning("closing the context of %s failed (%s); restarting Chromium", rel, _first_line(err))
            await self.close_browser()
            self.browser = None

    async def close_browser(self) -> None:
        """Close the browser within ``_CLOSE_TIMEOUT``, if there is one (errors ignored: it may have crashed)."""
        if self.browser is None:
            return
        try:
            await asyncio.wait_for(self.browser.close(), _CLOSE_TIMEOUT)
        except (TimeoutError, asyncio.TimeoutError, self.Error):
            pass

    def record_failure(self, rel: str, viewport: tuple[int, int], failure: tuple[str, str]) -> None:
        """Count and log a failed unit; any failure with the browser gone is ``browser_error``."""
        reason, detail = failure
        if self.browser is not None and not self.browser.is_connected():
            reason = "browser_error"
        self.result.failed.append({"page": rel, "viewport": list(viewport), "reason": reason, "detail": detail})
        logger.warning("page %s @ %dx%d failed (%s): %s", rel, *viewport, reason, detail)

    def record_blocked(self, rel: str, viewport: tuple[int, int], router: _Router) -> None:
        """Count and log the unit's blocked requests (per reason, with up to three example URLs)."""
        n = sum(router.blocked.values())
        self.result.blocked.update(router.blocked)
        self.result.blocked_pages.append(
            {
                "page": rel,
                "viewport": list(viewport),
                "blocked": n,
                "by_reason": dict(sorted(router.blocked.items())),
                "examples": router.examples,
            }
        )
        by_reason = ", ".join(f"{k} {v}" for k, v in sorted(router.blocked.items()))
        logger.warning(
            "page %s @ %dx%d: blocked %d request(s) (%s), e.g. %s",
            rel,
            *viewport,
            n,
            by_reason,
            router.examples[0],
        )


def _check_extracted(raw) -> dict:
    """The extraction result with every field checked (the page's own script can tamper with the DOM functions the
    extractor calls). Names that are not valid Unicode text become ``""`` (dropped as ``no_name``); a role or kind
    that is not a short text becomes None / ``clickable``.

    Raises:
        _BadExtract: the structure is not the one :data:`EXTRACT_JS` returns.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("elements"), list) or not isinstance(raw.get("drops"), dict):
        raise _BadExtract("the extraction script returned no element list (the page replaced DOM functions?)")
    if not _finite(raw.get("scroll_y")):
        raise _BadExtract(f"the extraction script returned scroll_y {str(raw.get('scroll_y'))[:40]!r}")
    drops = {}
    for reason, n in raw["drops"].items():
        if reason not in DROP_REASONS or not _finite(n) or n < 0 or n != int(n):
            raise _BadExtract(f"the extraction script returned a bad drop count {str(reason)[:40]!r}")
        drops[reason] = int(n)
    elements = []
    for el in raw["elements"]:
        if not isinstance(el, dict):
            raise _BadExtract("the extraction script returned an element that is not an object")
        rect, name, tag = el.get("rect"), el.get("name"), el.get("tag")
        if not isinstance(rect, list) or len(rect) != 4 or not all(_finite(v) for v in rect):
            raise _BadExtract(f"the extraction script returned a bad element box {str(rect)[:60]!r}")
        if not isinstance(name, str) or not isinstance(el.get("name_is_visible_text"), bool):
            raise _BadExtract("the extraction script returned an element without a name")
        if not isinstance(tag, str) or not is_text(tag) or not 0 < len(tag) <= 200:
            raise _BadExtract(f"the extraction script returned a bad tag {str(tag)[:40]!r}")
        role, kind = el.get("role"), el.get("kind")
        elements.append(
            {
                "tag": tag,
                "role": role if isinstance(role, str) and is_text(role) and len(role) <= 64 else None,
                "kind": kind if isinstance(kind, str) and is_text(kind) and len(kind) <= 64 else "clickable",
                "name": name if is_text(name) else "",
                "name_is_visible_text": el["name_is_visible_text"],
                "rect": [float(v) for v in rect],
            }
        )
    return {"elements": elements, "drops": drops, "scroll_y": float(raw["scroll_y"])}
