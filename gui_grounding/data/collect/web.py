"""Web screenshot collector: real pages rendered in headless Chromium -> canonical grounding samples.

For each local HTML page and viewport (and optional scroll offsets) it takes a viewport screenshot, finds the visible
interactable elements (links, buttons, inputs, selects, textareas, ARIA buttons/links/tabs/menu items, summaries,
``onclick`` elements) with their accessible names and boxes, and writes one canonical sample per element with a
natural instruction ("Click the "Library Reference" link").

Dropped, and counted per reason: ``hidden`` (display/visibility/opacity/zero size), ``offscreen`` (box not fully in the
viewport), ``tiny`` (side < ``min_size`` px or area < ``min_area`` px^2), ``wrapped`` (an inline element broken over
several lines: its box would cover text that is not the element), ``occluded`` (``document.elementFromPoint`` at the
centre and at inner points does not hit the element), ``no_name`` (no accessible name with a letter or digit, or a
name that is not valid Unicode text), ``long_name`` (name over ``max_name_chars``), ``ambiguous`` (two or more
elements of one screenshot share a name: the instruction would not identify one element, so all of them go),
``over_cap`` (beyond ``max_per_screenshot``).

``ui_type`` is ``text`` when the name is text shown inside the element (link text, button label, ``value`` of a
submit button, placeholder, selected option) and ``icon`` when it comes from ``aria-labelledby``/``aria-label``/a
``<label>``/an image's ``alt``/``title`` (checked in that order, before the element's own text).

Boxes are screenshot pixels (CSS px at device scale factor 1), inclusive edges:
``x_min = round(left)``, ``x_max = round(right) - 1``, clipped to the image.

Containment (what a page may load). Each page loads from its **folder**: the directory argument it was found in
(subfolders included), or, for a page named as a file, the folder that file is in; ``resource_roots``
(``--resource-root DIR``, repeatable) name the folders every page loads from instead (e.g. the documentation root
when a list of its pages is given, so ``../_static/`` stays loadable; a page must lie inside one of them). Every
request of every frame (``context.route``, which also sees iframes, popups and navigations) is checked: a ``file:``
URL loads only when its path, with ``..`` and symlinks resolved (``os.path.realpath``), lies inside the page's
folder(s); any other ``file:`` URL (``/etc/passwd``,
``../outside.png``, a symlink pointing out, a ``file://host/`` URL) is aborted (``outside_folder``), every network
scheme (http, https, ws, wss, ftp) is aborted (``network``), and so is any other scheme that reaches the router
(``other_scheme``). ``data:``, ``blob:`` and ``about:`` URLs never reach the router (they are not requests: they hold
only bytes the page itself contains) and stay allowed. As a second wall Chromium runs with a dead proxy
(``127.0.0.1:9``, loopback included), so network traffic that routing does not see (WebSockets) fails too. A page
whose own real path is outside its directory argument (a symlink) is skipped (``escapes_folder``), as is a page whose
name is not valid UTF-8 (``bad_name``). Blocked requests are logged and counted per page load and in total (the
result table and ``provenance.json`` ``blocked_requests``).

Each page load (page x viewport) is one unit, with its own browser context and a time limit (``page_timeout``
seconds for load, scrolling, extraction and screenshots together). A unit that fails (``timeout``, ``load_error``,
``extract_error``, ``screenshot_error``, ``bad_extract``: the page's script returned a malformed element list, or
``browser_error``) is logged and counted in the result table and in ``provenance.json`` ``failed_pages`` with its
reason; nothing of it is written, and the other units go on (a crashed browser is relaunched).

Outputs: ``--out`` is checked before anything is read (not an input, a writable folder), locked for one writer
(:class:`groundwork.outputs.OutputLock`), screenshots are written atomically after their unit succeeded,
``train.jsonl``/``test.jsonl`` atomically, and ``provenance.json`` (the summary) last. An earlier run's
``provenance.json`` and the screenshots it lists are removed before rendering, so an interrupted run leaves no
summary.

Needs Playwright (``pip install -e .[collect]``) and a Chromium binary (Debian: ``apt-get install chromium``); no
browser download and no network access. The browser side is in :mod:`gui_grounding.data.collect.browser`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import hashlib
import logging
import os
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, fields, replace

from groundwork.argtypes import add_number_flag, integer, number
from groundwork.outputs import OutputError, OutputLock, check_outputs, write_bytes, write_json, write_lines
from groundwork.records import load_json_file
from groundwork.validate import dumps, is_text
from gui_grounding.data.collect.browser import (
    BLOCK_REASONS,
    DROP_REASONS,
    FAIL_REASONS,
    _finite,
    _first_line,
    _inside,
    _render_all,
)

# The browser side moved to gui_grounding.data.collect.browser; its public names (and the extraction check the
# hostile-input tests call) stay importable from here.
from gui_grounding.data.collect.browser import CHROMIUM_ARGS as CHROMIUM_ARGS
from gui_grounding.data.collect.browser import EXTRACT_JS as EXTRACT_JS
from gui_grounding.data.collect.browser import NETWORK_SCHEMES as NETWORK_SCHEMES
from gui_grounding.data.collect.browser import _check_extracted as _check_extracted
from gui_grounding.data.collect.browser import request_block_reason as request_block_reason

logger = logging.getLogger(__name__)

TOOL = "gui_grounding.data.collect.web"
TOOL_VERSION = "1"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
SKIP_REASONS = ("escapes_folder", "bad_name")

MAX_VIEWPORT_SIDE = 8192  # CSS px per side (a screenshot is side^2 * 4 bytes in memory)
MAX_VIEWPORTS = 32
MAX_SCROLL_OFFSET = 1_000_000  # px
MAX_SCROLL_OFFSETS = 64
MAX_PAGE_TIMEOUT = 86_400.0  # s
DEFAULT_PAGE_TIMEOUT = 30.0  # s
_MAX_SLUG = 80  # characters of a page name in a screenshot file name (longer ones are cut and get a hash)

_TEMPLATES = {
    "link": ['Click the "{n}" link', 'Open the "{n}" link', 'Click "{n}"'],
    "button": ['Click the "{n}" button', 'Press the "{n}" button', 'Click "{n}"'],
    "textbox": ['Click the "{n}" text field', 'Click the "{n}" input box', 'Select the "{n}" field'],
    "searchbox": ['Click the "{n}" search box', 'Click the "{n}" field'],
    "combobox": ['Select the "{n}" dropdown', 'Open the "{n}" dropdown'],
    "checkbox": ['Click the "{n}" checkbox', 'Toggle "{n}"'],
    "radio": ['Select the "{n}" option', 'Click the "{n}" radio button'],
    "tab": ['Click the "{n}" tab', 'Switch to the "{n}" tab'],
    "menuitem": ['Click the "{n}" menu item', 'Choose "{n}" in the menu'],
}
_DEFAULT_TEMPLATES = ['Click "{n}"', 'Click on "{n}"']


def make_instruction(kind: str, name: str, rng: random.Random) -> str:
    """A natural click instruction for an element of ``kind`` named ``name`` (template picked with ``rng``)."""
    safe = name.replace('"', "'")
    return rng.choice(_TEMPLATES.get(kind, _DEFAULT_TEMPLATES)).format(n=safe)


def to_pixel_box(rect: list[float], width: int, height: int) -> dict | None:
    """Viewport rect ``[left, top, right, bottom]`` (CSS px) -> inclusive pixel box, or None when degenerate (or a
    value is not a finite number)."""
    if len(rect) != 4 or not all(_finite(v) for v in rect):
        return None
    x_min, y_min = max(0, round(rect[0])), max(0, round(rect[1]))
    x_max, y_max = min(width - 1, round(rect[2]) - 1), min(height - 1, round(rect[3]) - 1)
    if x_min >= x_max or y_min >= y_max:
        return None
    return {"x_min": x_min, "y_min": y_min, "x_max": x_max, "y_max": y_max}


def _collection_root(paths: list[str]) -> str:
    """The folder that the records' ``page`` names are relative to (as :func:`find_pages` names them)."""
    folders = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    return os.path.commonpath(folders)


def _scan_pages(
    paths: list[str], resource_roots: list[str] | None = None
) -> tuple[list[tuple[str, str, tuple[str, ...]]], list[dict]]:
    """``([(path, name, folders), ...], skipped)``: the pages of ``paths`` with the folder(s) each may load from.

    Names are relative to :func:`_collection_root` (so two inputs never give one name twice). A folder is walked
    with symlinks followed, each real folder once (a symlink loop ends), never into a folder whose real path is outside
    the directory argument; a page whose real path is outside its folder (``escapes_folder``) or whose name is not
    valid UTF-8 (``bad_name``) is skipped and listed in ``skipped``.
    """
    _check_inputs(paths)
    roots = _resource_roots(resource_roots) if resource_roots else None
    scan = _PageScan(_collection_root(paths), roots)
    for p in paths:
        if os.path.isdir(p):
            scan.walk(p)
        else:
            f = os.path.realpath(p)
            scan.add(f, (os.path.dirname(f),))
    for s in scan.skipped:
        logger.warning("skipped %s: %s", s["path"], s["reason"])
    return sorted((path, rel, folder) for rel, (path, folder) in scan.found.items()), scan.skipped


def _check_inputs(paths: list[str]) -> None:
    """FileNotFoundError / ValueError (naming the path) unless every input path is a file or a folder and valid UTF-8
    text, as given and as its real path."""
    for p in paths:
        if not os.path.isdir(p) and not os.path.isfile(p):
            raise FileNotFoundError(f"no such HTML file or directory: {p}")
        if not is_text(p) or not is_text(os.path.realpath(p)):
            raise ValueError(f"input path {p!r} is not valid UTF-8 text; rename it")


def _resource_roots(resource_roots: list[str]) -> tuple[str, ...]:
    """The ``--resource-root`` folders as sorted, distinct real paths; FileNotFoundError when one is not a folder (or
    not text), ValueError when its real path is not valid UTF-8 text."""
    for folder in resource_roots:
        if not isinstance(folder, str) or not is_text(folder) or not os.path.isdir(folder):
            raise FileNotFoundError(f"--resource-root {folder!r} is not a folder")
        if not is_text(os.path.realpath(folder)):
            raise ValueError(f"--resource-root {folder!r} is not valid UTF-8 text")
    return tuple(sorted({os.path.realpath(f) for f in resource_roots}))


class _PageScan:
    """The pages found so far (the steps of :func:`_scan_pages`): ``found`` maps a page name (relative to ``root``)
    to ``(path, folders it may load from)``; ``skipped`` lists ``{"path", "reason"}``. ``roots`` (the real
    ``--resource-root`` folders) replace each page's own folder when given."""

    def __init__(self, root: str, roots: tuple[str, ...] | None):
        self.root, self.roots = root, roots
        self.found: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.skipped: list[dict] = []

    def add(self, path: str, folder: tuple[str, ...]) -> None:
        """Add the page ``path`` found in ``folder``: skipped when its name is not UTF-8 (``bad_name``) or its real
        path is outside its folder(s) (``escapes_folder``); a page found twice keeps the wider folder.

        Raises:
            ValueError: with resource roots, the page is outside every one of them.
        """
        rel = os.path.relpath(path, self.root)
        if not is_text(rel):
            self.skipped.append({"path": os.fsencode(rel).decode("utf-8", "replace"), "reason": "bad_name"})
            return
        if self.roots is not None:
            if not _inside(os.path.realpath(path), self.roots):
                raise ValueError(f"page {path} is outside every --resource-root ({', '.join(self.roots)})")
            folder = self.roots
        if not _inside(os.path.realpath(path), folder):
            self.skipped.append({"path": rel, "reason": "escapes_folder"})
            return
        if rel not in self.found or len(folder[0]) < len(self.found[rel][1][0]):
            self.found[rel] = (path, folder)

    def walk(self, directory: str) -> None:
        """Add the ``.html``/``.htm`` pages under ``directory``, walked as :func:`_scan_pages` says."""
        top = os.path.realpath(directory)
        seen: set[str] = set()
        for d, dirs, names in os.walk(top, followlinks=True):
            real = os.path.realpath(d)
            if real in seen or not _inside(real, top):
                if not _inside(real, top):
                    rel = os.path.relpath(d, self.root)
                    self.skipped.append({"path": rel if is_text(rel) else repr(rel), "reason": "escapes_folder"})
                dirs[:] = []
                continue
            seen.add(real)
            dirs.sort()
            for f in sorted(names):
                if f.endswith((".html", ".htm")):
                    self.add(os.path.join(d, f), (top,))


def find_pages(paths: list[str]) -> list[tuple[str, str]]:
    """``(path, relative name)`` of the HTML pages in ``paths`` (files, or directories searched recursively).

    Pages are named relative to the common folder of the inputs (a directory argument, or the folder of a file
    argument), so ``tutorial/index.html`` and ``library/index.html`` stay distinct. Sorted by name, without
    duplicates; pages that escape their directory through a symlink, or whose names are not UTF-8, are left out.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    return sorted(((path, rel) for path, rel, _ in _scan_pages(paths)[0]), key=lambda x: x[1])


def _slug(rel: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", os.path.splitext(rel)[0]).strip("-").lower() or "page"


def _shot_names(rels: list[str]) -> dict[str, str]:
    """A distinct file-name stem per page name: its slug, or (when two pages share a slug, or the slug is long) the
    slug cut to ``_MAX_SLUG`` characters plus a hash of the name."""
    slugs = {rel: _slug(rel) for rel in rels}
    count = Counter(slugs.values())
    names = {rel: s for rel, s in slugs.items() if count[s] == 1 and len(s) <= _MAX_SLUG}
    taken = set(names.values())
    for rel in sorted(set(rels) - set(names)):
        digest = hashlib.sha256(rel.encode("utf-8")).hexdigest()
        for k in range(8, len(digest) + 1):
            name = f"{slugs[rel][:_MAX_SLUG]}-{digest[:k]}"
            if name not in taken:
                break
        names[rel] = name
        taken.add(name)
    return names


@dataclass
class CollectResult:
    """What :func:`collect_web` wrote: samples per split, screenshots, drop counts, failed page loads, blocked
    requests and skipped pages."""

    train: list[dict] = field(default_factory=list)
    test: list[dict] = field(default_factory=list)
    screenshots: list[dict] = field(default_factory=list)
    drops: Counter = field(default_factory=Counter)
    page_loads: int = 0
    failed: list[dict] = field(default_factory=list)  # {"page", "viewport", "reason", "detail"}
    blocked: Counter = field(default_factory=Counter)  # reason -> requests
    blocked_pages: list[dict] = field(default_factory=list)  # {"page", "viewport", "blocked", "by_reason", "examples"}
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}

    def table(self) -> str:
        """Readable summary of kept samples, failed page loads, blocked requests and dropped elements per reason."""
        lines = [
            f"screenshots: {len(self.screenshots)}   samples: {len(self.train) + len(self.test)} "
            f"(train {len(self.train)}, test {len(self.test)})",
            f"page loads: {self.page_loads}   failed: {len(self.failed)}   skipped pages: {len(self.skipped)}",
        ]
        fails = Counter(f["reason"] for f in self.failed)
        lines += [f"  failed {reason:<16} {fails[reason]:>6}" for reason in FAIL_REASONS if fails[reason]]
        lines += [f"    {f['page']} @ {f['viewport'][0]}x{f['viewport'][1]}: {f['reason']}" for f in self.failed[:20]]
        if len(self.failed) > 20:
            lines.append(f"    ... and {len(self.failed) - 20} more (provenance.json failed_pages)")
        lines.append(f"blocked requests: {sum(self.blocked.values())}")
        lines += [f"  {reason:<16} {self.blocked[reason]:>6}" for reason in BLOCK_REASONS if self.blocked[reason]]
        lines.append("dropped elements:")
        lines += [f"  {reason:<10} {self.drops.get(reason, 0):>6}" for reason in DROP_REASONS]
        return "\n".join(lines)


def _check_int(name: str, value, lo: int, hi: int | None = None, *, none_ok: bool = False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        span = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be an integer {span}{' or None' if none_ok else ''}, got {value!r}")
    return value


_MAX_AREA = 100_000_000
_MAX_NAME_CHARS = 10_000
_DEFAULT_VIEWPORTS = ((1280, 720), (1024, 768))


@dataclass(frozen=True)
class WebSettings:
    """What one collection renders and keeps: :func:`collect_web`'s settings (its keywords) and ``collect-web``'s
    flags of the same names (:meth:`from_args`), passed through as one object. :meth:`checked` refuses a value the
    CLI types would refuse (one line naming the setting)."""

    viewports: tuple = _DEFAULT_VIEWPORTS
    seed: int = 0
    scroll_offsets: tuple = (0,)
    max_pages: int | None = None
    test_fraction: float = 0.2
    min_size: int = 4
    min_area: int = 64
    max_name_chars: int = 60
    max_per_screenshot: int | None = None
    page_timeout: float = DEFAULT_PAGE_TIMEOUT
    resource_roots: list[str] | tuple[str, ...] | str | None = None
    chromium: str = DEFAULT_CHROMIUM

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WebSettings:
        """The settings of a parsed ``collect-web`` command line (each flag's dest is the field's name)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def checked(self) -> WebSettings:
        """These settings with viewports and offsets as tuples of ints.

        Raises:
            ValueError: one line naming the setting, for a value the CLI types would refuse.
        """
        viewports, offsets = self.viewports, self.scroll_offsets
        if (
            not isinstance(viewports, (tuple, list))
            or not 0 < len(viewports) <= MAX_VIEWPORTS
            or any(not isinstance(v, (tuple, list)) or len(v) != 2 for v in viewports)
        ):
            raise ValueError(f"viewports must be 1..{MAX_VIEWPORTS} (width, height) pairs, got {viewports!r}")
        for v in viewports:
            for side in v:
                _check_int("viewports: each side", side, 1, MAX_VIEWPORT_SIDE)
        if len({tuple(v) for v in viewports}) != len(viewports):
            raise ValueError(f"viewports holds one size twice: {viewports!r}")
        if not isinstance(offsets, (tuple, list)) or not 0 < len(offsets) <= MAX_SCROLL_OFFSETS:
            raise ValueError(f"scroll_offsets must be 1..{MAX_SCROLL_OFFSETS} offsets, got {offsets!r}")
        for offset in offsets:
            _check_int("scroll_offsets: each offset", offset, 0, MAX_SCROLL_OFFSET)
        if len(set(offsets)) != len(offsets):
            raise ValueError(f"scroll_offsets holds one offset twice: {offsets!r}")
        self._check_numbers()
        roots = self.resource_roots
        return replace(
            self,
            viewports=tuple((int(w), int(h)) for w, h in viewports),
            scroll_offsets=tuple(int(o) for o in offsets),
            resource_roots=[roots] if isinstance(roots, str) else roots,
        )

    def _check_numbers(self) -> None:
        _check_int("seed", self.seed, 0)
        _check_int("max_pages", self.max_pages, 1, none_ok=True)
        if not _finite(self.test_fraction) or not 0 <= self.test_fraction < 1:
            raise ValueError(f"test_fraction must be in [0, 1), got {self.test_fraction!r}")
        _check_int("min_size", self.min_size, 0, MAX_VIEWPORT_SIDE)
        _check_int("min_area", self.min_area, 0, _MAX_AREA)
        _check_int("max_name_chars", self.max_name_chars, 1, _MAX_NAME_CHARS)
        _check_int("max_per_screenshot", self.max_per_screenshot, 1, none_ok=True)
        if not _finite(self.page_timeout) or not 0 < self.page_timeout <= MAX_PAGE_TIMEOUT:
            raise ValueError(
                f"page_timeout must be a number of seconds in (0, {MAX_PAGE_TIMEOUT:g}], got {self.page_timeout!r}"
            )


def collect_web(
    paths: list[str],
    out_dir: str,
    viewports: tuple[tuple[int, int], ...] = _DEFAULT_VIEWPORTS,
    seed: int = 0,
    **settings,
) -> CollectResult:
    """Render ``paths`` and write ``out_dir/{images/*.png, train.jsonl, test.jsonl, provenance.json}``.

    ``viewports``, ``seed`` and the keyword ``settings`` are the fields of :class:`WebSettings` (defaults there; an
    unknown keyword is a ``TypeError``); :func:`collect_with` takes them as one object.

    Args:
        paths: HTML files or directories (searched recursively).
        out_dir: output folder (created; checked and locked before any input is read). The screenshots listed in an
            existing ``out_dir/provenance.json`` (an earlier run) are deleted first, with that file, so the folder
            always matches the new provenance; nothing else is removed.
        viewports: ``(width, height)`` in CSS px (1..``MAX_VIEWPORT_SIDE``, distinct); screenshots have this size.
        seed: seeds page choice, split, instruction templates and capping.
        scroll_offsets: distinct vertical scroll positions (px) per page; an offset the page cannot reach is skipped.
        max_pages: keep this many pages (seeded choice) when more are found.
        test_fraction: fraction of pages (not samples) in the test split; all screenshots of a page share a split.
        min_size, min_area: smallest element side (px) and area (px^2) kept.
        max_name_chars: longer accessible names are dropped (``long_name``).
        max_per_screenshot: keep at most this many samples per screenshot (seeded choice).
        page_timeout: seconds one page load (page x viewport: load, scrolling, extraction, screenshots) may take;
            a slower one fails with ``timeout`` and the others go on.
        resource_roots: the folders every page may load from (default: each page's folder; see the module doc);
            every page must lie inside one of them.
        chromium: Chromium executable.

    Returns:
        :class:`CollectResult`. Sample records are canonical (``gui_grounding.data.schema``) with ``image_path`` relative
        to ``out_dir`` and boxes in screenshot pixels.

    Raises:
        ImportError: Playwright is not installed.
        FileNotFoundError: an input path or the Chromium binary is missing, or no HTML page was found.
        ValueError: a setting is out of range (a viewport not two ints in range, ``test_fraction`` outside [0, 1),
            ...), or a page is outside every folder of ``resource_roots``.
        OutputError: ``out_dir`` is an input, a file, not writable, or locked by another run; a write failed.
        RuntimeError: Chromium does not start.
    """
    return collect_with(paths, out_dir, WebSettings(viewports=viewports, seed=seed, **settings))


def collect_with(paths: list[str], out_dir: str, settings: WebSettings) -> CollectResult:
    """:func:`collect_web` with its settings as one object (``collect-web`` passes :meth:`WebSettings.from_args`).

    Raises:
        as :func:`collect_web`.
    """
    try:
        from playwright.async_api import async_playwright  # noqa: F401
    except ImportError as err:
        raise ImportError("the web collector needs Playwright: pip install -e .[collect]") from err

    settings = settings.checked()
    if not os.path.exists(settings.chromium):
        raise FileNotFoundError(f"Chromium not found at {settings.chromium} (Debian: apt-get install chromium)")
    if not isinstance(out_dir, str) or not is_text(out_dir):
        raise OutputError(22, f"--out {out_dir!r} is not valid UTF-8 text")
    check_outputs(folders=[out_dir], inputs=list(paths), what="--out")
    with OutputLock(out_dir, folder=True):
        return _collect_locked(list(paths), out_dir, settings)


def _collect_locked(paths: list[str], out_dir: str, s: WebSettings) -> CollectResult:
    roots = s.resource_roots
    found, skipped = _scan_pages(paths, list(roots) if roots else None)
    if not found:
        raise FileNotFoundError(f"no .html/.htm page found in {list(paths)}")
    pages = [(path, rel) for path, rel, _ in found]
    folders = {rel: folder for _, rel, folder in found}
    rng = random.Random(s.seed)
    if s.max_pages is not None and len(pages) > s.max_pages:
        pages = sorted(rng.sample(pages, s.max_pages))
    order = list(range(len(pages)))
    random.Random(s.seed + 1).shuffle(order)
    n_test = round(s.test_fraction * len(pages)) if len(pages) > 1 else 0
    test_pages = {pages[i][1] for i in order[:n_test]}
    shot_names = _shot_names([rel for _, rel in pages])

    images = os.path.join(out_dir, "images")
    if os.path.islink(images) or (os.path.exists(images) and not os.path.isdir(images)):
        raise OutputError(20, f"--out {out_dir}: images is not a plain folder (a file or a symlink); remove it")
    _remove_previous_outputs(out_dir)
    os.makedirs(images, exist_ok=True)

    result = CollectResult(skipped=skipped)
    units = [(path, rel, folders[rel], (vw, vh)) for vw, vh in s.viewports for path, rel in pages]
    opts = {
        "scroll_offsets": s.scroll_offsets,
        "min_size": s.min_size,
        "min_area": s.min_area,
        "page_timeout": float(s.page_timeout),
    }

    def commit(rel: str, viewport: tuple[int, int], shots: list) -> None:
        split = "test" if rel in test_pages else "train"
        for offset, extracted, png in shots:
            shot_id = f"{shot_names[rel]}__{viewport[0]}x{viewport[1]}" + (f"__s{offset}" if offset else "")
            image_rel = f"images/{shot_id}.png"
            write_bytes(os.path.join(out_dir, image_rel), png)
            samples = _samples_for_screenshot(extracted, shot_id, image_rel, rel, viewport, s, result.drops)
            getattr(result, split).extend(samples)
            result.screenshots.append(
                {
                    "file": image_rel,
                    "page": rel,
                    "viewport": list(viewport),
                    "scroll_y": offset,
                    "num_samples": len(samples),
                    "split": split,
                }
            )

    browser_version = asyncio.run(_render_all(units, opts, s.chromium, result, commit))

    for split in ("train", "test"):
        write_lines(
            os.path.join(out_dir, f"{split}.jsonl"), (dumps(r, ensure_ascii=False) for r in getattr(result, split))
        )
    provenance = {
        "tool": TOOL,
        "tool_version": TOOL_VERSION,
        "chromium": browser_version,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": s.seed,
        "viewports": [list(v) for v in s.viewports],
        "scroll_offsets": list(s.scroll_offsets),
        "root": _collection_root(paths),
        "roots": [os.path.realpath(p) for p in paths],
        "resource_roots": sorted({os.path.realpath(f) for f in roots}) if roots else None,
        "test_fraction": s.test_fraction,
        "settings": {
            "min_size": s.min_size,
            "min_area": s.min_area,
            "max_name_chars": s.max_name_chars,
            "max_per_screenshot": s.max_per_screenshot,
            "page_timeout": s.page_timeout,
        },
        "num_samples": {"train": len(result.train), "test": len(result.test)},
        "dropped": {r: result.drops.get(r, 0) for r in DROP_REASONS},
        "page_loads": {"total": result.page_loads, "failed": len(result.failed)},
        "failed_pages": result.failed,
        "blocked_requests": {
            "total": sum(result.blocked.values()),
            "by_reason": {r: result.blocked.get(r, 0) for r in BLOCK_REASONS},
            "by_page": result.blocked_pages,
        },
        "skipped_pages": result.skipped,
        "screenshots": result.screenshots,
    }
    write_json(os.path.join(out_dir, "provenance.json"), provenance, indent=1)  # the summary, last
    logger.debug("collected into %s\n%s", out_dir, result.table())
    return result


def _remove_previous_outputs(out_dir: str) -> None:
    """Delete an earlier run's ``provenance.json`` and the screenshots it lists (and only those), summary first.

    An unreadable or malformed earlier provenance is logged and removes nothing but itself.
    """
    path = os.path.join(out_dir, "provenance.json")
    if not os.path.lexists(path):
        return
    names: list[str] = []
    try:
        old = load_json_file(path, "provenance")  # a regular file of strict JSON
        shots = old.get("screenshots") if isinstance(old, dict) else None
        names = [s["file"] for s in shots if isinstance(s, dict) and isinstance(s.get("file"), str)]
    except (OSError, ValueError, TypeError) as err:
        logger.warning("the earlier %s is unreadable (%s); its screenshots are left in place", path, _first_line(err))
    try:
        os.remove(path)  # first: an interrupted run must not leave a complete-looking summary
    except OSError as err:
        raise OutputError(err.errno, f"cannot remove the earlier {path}: {err.strerror or err}") from None
    for name in names:
        if re.fullmatch(r"images/[^/\\\0]+\.png", name):
            target = os.path.join(out_dir, name)
            if os.path.isfile(target) or os.path.islink(target):
                os.remove(target)


def _samples_for_screenshot(found, shot_id, image_rel, page_rel, viewport, settings: WebSettings, drops):
    """Filter one screenshot's elements (names, ambiguity, ``settings.max_per_screenshot``) and turn them into
    canonical records."""
    seed, max_name_chars, cap = settings.seed, settings.max_name_chars, settings.max_per_screenshot
    for reason, n in found["drops"].items():
        drops[reason] += n
    width, height = viewport
    named = []
    for el in found["elements"]:
        if not re.search(r"\w", el["name"]):
            drops["no_name"] += 1
        elif len(el["name"]) > max_name_chars:
            drops["long_name"] += 1
        else:
            named.append(el)
    name_counts = Counter(el["name"].lower() for el in named)
    unique = []
    for el in named:
        if name_counts[el["name"].lower()] > 1:
            drops["ambiguous"] += 1
        else:
            unique.append(el)
    rng = random.Random(int(hashlib.sha256(f"{seed}:{shot_id}".encode()).hexdigest()[:12], 16))
    if cap is not None and len(unique) > cap:
        keep = set(rng.sample(range(len(unique)), cap))
        drops["over_cap"] += len(unique) - cap
        unique = [el for i, el in enumerate(unique) if i in keep]
    records = []
    for el in unique:
        box = to_pixel_box(el["rect"], width, height)
        if box is None:
            drops["tiny"] += 1
            continue
        records.append(
            {
                "sample_id": f"{shot_id}:{len(records)}",
                "instruction": make_instruction(el["kind"], el["name"], rng),
                "image_path": image_rel,
                "target_bbox": box,
                "image_width": width,
                "image_height": height,
                "source": "web-collector",
                "platform": "web",
                "ui_type": "text" if el["name_is_visible_text"] else "icon",
                "element": {"tag": el["tag"], "role": el["role"], "name": el["name"]},
                "page": page_rel,
                "viewport": [width, height],
            }
        )
    return records


_SIDE = integer(min=1, max=MAX_VIEWPORT_SIDE)
_OFFSET = integer(min=0, max=MAX_SCROLL_OFFSET)


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _distinct_items(text: str, parse_item, max_items: int, usage: str, what: str) -> tuple:
    """The comma-separated items of ``text``, each read by ``parse_item`` (the one rule of collect-web's list flags):
    more than ``max_items`` items or an item ``parse_item`` refuses is the usage error ``usage``; an item given
    twice is ``"<what> is given twice in <text>"``."""
    items = str(text).split(",")
    if len(items) > max_items:
        raise argparse.ArgumentTypeError(usage)
    try:
        values = tuple(parse_item(item) for item in items)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(usage) from None
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{what} is given twice in {_short(str(text))}")
    return values


def _viewport(item: str) -> tuple[int, int]:
    parts = item.strip().lower().split("x")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(item)
    return _SIDE(parts[0]), _SIDE(parts[1])


def _parse_viewports(text: str) -> tuple[tuple[int, int], ...]:
    """``"1280x720,1024x768"`` -> ``((1280, 720), (1024, 768))`` (argparse type; each side an integer
    1..``MAX_VIEWPORT_SIDE``, at most ``MAX_VIEWPORTS`` distinct sizes; anything else is a usage error)."""
    usage = (
        f"expected WxH[,WxH...] like 1280x720,1024x768 (sides 1..{MAX_VIEWPORT_SIDE} px, at most "
        f"{MAX_VIEWPORTS} distinct sizes), got {_short(str(text))}"
    )
    return _distinct_items(text, _viewport, MAX_VIEWPORTS, usage, "a viewport size")


def _parse_offsets(text: str) -> tuple[int, ...]:
    """``"0,600"`` -> ``(0, 600)`` (argparse type; integers 0..``MAX_SCROLL_OFFSET``, at most
    ``MAX_SCROLL_OFFSETS`` distinct; anything else is a usage error)."""
    usage = (
        f"expected distinct integers 0..{MAX_SCROLL_OFFSET} like 0,600 (at most {MAX_SCROLL_OFFSETS}), "
        f"got {_short(str(text))}"
    )
    return _distinct_items(text, _OFFSET, MAX_SCROLL_OFFSETS, usage, "a scroll offset")


def _run_cli(args) -> None:
    result = collect_with(args.paths, args.out, WebSettings.from_args(args))
    print(result.table())
    if result.failed and not result.screenshots:
        first = result.failed[0]
        raise RuntimeError(
            f"all {len(result.failed)} page load(s) failed (first: {first['page']}: {first['reason']}, "
            f"{first['detail']}); see {os.path.join(args.out, 'provenance.json')}"
        )


def register_cli(subparsers) -> None:
    """Add the ``collect-web`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to run the collection and print the summary.
    """
    p = subparsers.add_parser(
        "collect-web",
        help="render local HTML in headless Chromium and write grounding samples",
        description="Render local HTML pages in headless Chromium (Playwright, no network), extract visible "
        "interactable elements with accessible names and boxes, write screenshots + canonical JSONL "
        "(train.jsonl/test.jsonl split by page) + provenance.json. A page loads only files inside its own folder "
        "(the directory argument it was found in, or a file argument's folder; --resource-root replaces it); every "
        "other request is blocked and counted. A page that fails or exceeds --page-timeout is counted and skipped.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="HTML files or directories (searched recursively)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--viewports",
        type=_parse_viewports,
        default=_DEFAULT_VIEWPORTS,
        help=f"comma-separated distinct WxH viewport sizes in CSS px, sides 1..{MAX_VIEWPORT_SIDE}, at most "
        f"{MAX_VIEWPORTS} (default 1280x720,1024x768)",
    )
    p.add_argument(
        "--scroll-offsets",
        type=_parse_offsets,
        default=(0,),
        help="comma-separated distinct vertical scroll offsets in px (0.."
        f"{MAX_SCROLL_OFFSET}, at most {MAX_SCROLL_OFFSETS}); each reachable one gives another screenshot (default 0)",
    )
    flags = [
        ("--max-pages", integer(min=1), None, "keep this many pages (seeded choice; default: all)"),
        (
            "--test-fraction",
            number(min=0, max=1, max_open=True),
            0.2,
            "fraction of PAGES in the test split (default 0.2)",
        ),
        ("--seed", integer(min=0), 0, "seed for page choice, split, templates, capping (default 0)"),
        ("--min-size", integer(min=0, max=MAX_VIEWPORT_SIDE), 4, "smallest element side kept (px, default 4)"),
        ("--min-area", integer(min=0, max=_MAX_AREA), 64, "smallest element area kept (px^2, default 64)"),
        (
            "--max-name-chars",
            integer(min=1, max=_MAX_NAME_CHARS),
            60,
            "drop elements whose accessible name is longer (default 60)",
        ),
        ("--max-per-screenshot", integer(min=1), None, "cap samples per screenshot (seeded choice; default: no cap)"),
        (
            "--page-timeout",
            number(min=0, min_open=True, max=MAX_PAGE_TIMEOUT),
            DEFAULT_PAGE_TIMEOUT,
            f"seconds one page load (load, scrolling, extraction, screenshots) may take; a slower page is counted as "
            f"failed and the run goes on (default {DEFAULT_PAGE_TIMEOUT:g})",
        ),
    ]
    for flag, kind, default, text in flags:
        add_number_flag(p, flag, kind, default, text)
    p.add_argument(
        "--resource-root",
        dest="resource_roots",
        action="append",
        default=None,
        metavar="DIR",
        help="a folder every page may load files from, instead of its own folder (repeatable); e.g. the documentation "
        "root when a list of its pages is given, and /usr/share/javascript for Debian's symlinked jquery.js",
    )
    p.add_argument("--chromium", default=DEFAULT_CHROMIUM, help=f"Chromium executable (default {DEFAULT_CHROMIUM})")
    p.set_defaults(func=_run_cli)


if __name__ == "__main__":  # python -m gui_grounding.data.collect.web PATH... --out DIR (same flags as collect-web)
    _parser = argparse.ArgumentParser(prog="python -m gui_grounding.data.collect.web")
    register_cli(_parser.add_subparsers(dest="command", required=True))
    _args = _parser.parse_args(["collect-web", *sys.argv[1:]])
    try:
        _args.func(_args)
    except Exception as _err:  # noqa: BLE001 - one line, no traceback
        print(f"collect-web: error: {_first_line(_err, 1000)}", file=sys.stderr)
        sys.exit(1)
