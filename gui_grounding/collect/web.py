"""Web screenshot collector: real pages rendered in headless Chromium -> canonical grounding samples.

For each local HTML page and viewport (and optional scroll offsets) it takes a viewport screenshot, finds the visible
interactable elements (links, buttons, inputs, selects, textareas, ARIA buttons/links/tabs/menu items, summaries,
``onclick`` elements) with their accessible names and boxes, and writes one canonical sample per element with a
natural instruction ("Click the "Library Reference" link").

Dropped, and counted per reason: ``hidden`` (display/visibility/opacity/zero size), ``offscreen`` (box not fully in the
viewport), ``tiny`` (side < ``min_size`` px or area < ``min_area`` px^2), ``wrapped`` (an inline element broken over
several lines: its box would cover text that is not the element), ``occluded`` (``document.elementFromPoint`` at the
centre and at inner points does not hit the element), ``no_name`` (no accessible name with a letter or digit),
``long_name`` (name over ``max_name_chars``), ``ambiguous`` (two or more elements of one screenshot share a name: the
instruction would not identify one element, so all of them go), ``over_cap`` (beyond ``max_per_screenshot``).

``ui_type`` is ``text`` when the name is text shown inside the element (link text, button label, ``value`` of a
submit button, placeholder, selected option) and ``icon`` when it comes from ``aria-labelledby``/``aria-label``/a
``<label>``/an image's ``alt``/``title`` (checked in that order, before the element's own text).

Boxes are screenshot pixels (CSS px at device scale factor 1), inclusive edges:
``x_min = round(left)``, ``x_max = round(right) - 1``, clipped to the image.

Needs Playwright (``pip install -e .[collect]``) and a Chromium binary (Debian: ``apt-get install chromium``); no
browser download and no network access: every non-``file:`` request is aborted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import logging
import os
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

TOOL = "gui_grounding.collect.web"
TOOL_VERSION = "1"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--font-render-hinting=none",
]  # fmt: skip
DROP_REASONS = ("hidden", "offscreen", "tiny", "wrapped", "occluded", "no_name", "long_name", "ambiguous", "over_cap")

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
    """Viewport rect ``[left, top, right, bottom]`` (CSS px) -> inclusive pixel box, or None when degenerate."""
    x_min, y_min = max(0, round(rect[0])), max(0, round(rect[1]))
    x_max, y_max = min(width - 1, round(rect[2]) - 1), min(height - 1, round(rect[3]) - 1)
    if x_min >= x_max or y_min >= y_max:
        return None
    return {"x_min": x_min, "y_min": y_min, "x_max": x_max, "y_max": y_max}


def find_pages(paths: list[str]) -> list[tuple[str, str]]:
    """``(absolute path, relative name)`` of the HTML pages in ``paths`` (files, or directories searched recursively).

    Pages of a directory are named relative to it; explicit files relative to their common parent folder, so that
    ``tutorial/index.html`` and ``library/index.html`` stay distinct. Sorted, without duplicates.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    pages, files = [], []
    for p in paths:
        if os.path.isdir(p):
            root = os.path.realpath(p)
            for d, _, names in sorted(os.walk(root, followlinks=True)):
                pages += [(os.path.join(d, f), os.path.relpath(os.path.join(d, f), root))
                          for f in sorted(names) if f.endswith((".html", ".htm"))]  # fmt: skip
        elif os.path.isfile(p):
            files.append(os.path.realpath(p))
        else:
            raise FileNotFoundError(f"no such HTML file or directory: {p}")
    if files:
        root = os.path.commonpath([os.path.dirname(f) for f in files])
        pages += [(f, os.path.relpath(f, root)) for f in files]
    return sorted(set(pages), key=lambda x: x[1])


def _slug(rel: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", os.path.splitext(rel)[0]).strip("-").lower() or "page"


@dataclass
class CollectResult:
    """What :func:`collect_web` wrote: samples per split, screenshots and drop counts."""

    train: list[dict] = field(default_factory=list)
    test: list[dict] = field(default_factory=list)
    screenshots: list[dict] = field(default_factory=list)
    drops: Counter = field(default_factory=Counter)

    def table(self) -> str:
        """Readable summary of kept samples and dropped elements per reason."""
        lines = [f"screenshots: {len(self.screenshots)}   samples: {len(self.train) + len(self.test)} "
                 f"(train {len(self.train)}, test {len(self.test)})", "dropped elements:"]  # fmt: skip
        lines += [f"  {reason:<10} {self.drops.get(reason, 0):>6}" for reason in DROP_REASONS]
        return "\n".join(lines)


def collect_web(
    paths: list[str],
    out_dir: str,
    viewports: tuple[tuple[int, int], ...] = ((1280, 720), (1024, 768)),
    seed: int = 0,
    *,
    scroll_offsets: tuple[int, ...] = (0,),
    max_pages: int | None = None,
    test_fraction: float = 0.2,
    min_size: int = 4,
    min_area: int = 64,
    max_name_chars: int = 60,
    max_per_screenshot: int | None = None,
    chromium: str = DEFAULT_CHROMIUM,
) -> CollectResult:
    """Render ``paths`` and write ``out_dir/{images/*.png, train.jsonl, test.jsonl, provenance.json}``.

    Args:
        paths: HTML files or directories (searched recursively).
        out_dir: output folder (created). Screenshots listed in an existing ``out_dir/provenance.json`` (an earlier
            run) are deleted first, so the folder always matches the new provenance; nothing else is removed.
        viewports: ``(width, height)`` in CSS px; screenshots have exactly this size.
        seed: seeds page choice, split, instruction templates and capping.
        scroll_offsets: vertical scroll positions (px) per page; an offset the page cannot reach is skipped.
        max_pages: keep this many pages (seeded choice) when more are found.
        test_fraction: fraction of pages (not samples) in the test split; all screenshots of a page share a split.
        min_size, min_area: smallest element side (px) and area (px^2) kept.
        max_name_chars: longer accessible names are dropped (``long_name``).
        max_per_screenshot: keep at most this many samples per screenshot (seeded choice).
        chromium: Chromium executable.

    Returns:
        :class:`CollectResult`. Sample records are canonical (``gui_grounding.schema``) with ``image_path`` relative
        to ``out_dir`` and boxes in screenshot pixels.

    Raises:
        ImportError: Playwright is not installed.
        FileNotFoundError: an input path or the Chromium binary is missing, or no HTML page was found.
        ValueError: a viewport is not two positive ints, or ``test_fraction`` is outside [0, 1).
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        raise ImportError("the web collector needs Playwright: pip install -e .[collect]") from err
    from tqdm.auto import tqdm

    if not os.path.exists(chromium):
        raise FileNotFoundError(f"Chromium not found at {chromium} (Debian: apt-get install chromium)")
    if not viewports or any(len(v) != 2 or int(v[0]) <= 0 or int(v[1]) <= 0 for v in viewports):
        raise ValueError(f"viewports must be (width, height) pairs of positive ints, got {viewports!r}")
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    pages = find_pages(paths)
    if not pages:
        raise FileNotFoundError(f"no .html/.htm page found in {list(paths)}")
    rng = random.Random(seed)
    if max_pages is not None and len(pages) > max_pages:
        pages = sorted(rng.sample(pages, max_pages))
    order = list(range(len(pages)))
    random.Random(seed + 1).shuffle(order)
    n_test = round(test_fraction * len(pages)) if len(pages) > 1 else 0
    test_pages = {pages[i][1] for i in order[:n_test]}

    _remove_previous_screenshots(out_dir)
    os.makedirs(os.path.join(out_dir, "images"), exist_ok=True)
    result = CollectResult()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        browser_version = browser.version
        for vw, vh in viewports:
            context = browser.new_context(viewport={"width": vw, "height": vh}, device_scale_factor=1)
            page = context.new_page()
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else route.abort())  # fmt: skip
            for abs_path, rel in tqdm(pages, desc=f"pages @ {vw}x{vh}", unit="page"):
                page.goto(Path(abs_path).as_uri(), wait_until="load")
                for offset in scroll_offsets:
                    page.evaluate("y => window.scrollTo({left: 0, top: y, behavior: 'instant'})", offset)
                    found = page.evaluate(EXTRACT_JS, {"minSize": min_size, "minArea": min_area})
                    if offset and round(found["scroll_y"]) != offset:
                        continue  # the page is too short for this offset: it would repeat a screenshot
                    shot_id = f"{_slug(rel)}__{vw}x{vh}" + (f"__s{offset}" if offset else "")
                    image_rel = f"images/{shot_id}.png"
                    page.screenshot(path=os.path.join(out_dir, image_rel), full_page=False)
                    samples = _samples_for_screenshot(found, shot_id, image_rel, rel, (vw, vh), seed,
                                                      max_name_chars, max_per_screenshot, result.drops)  # fmt: skip
                    (result.test if rel in test_pages else result.train).extend(samples)
                    result.screenshots.append({"file": image_rel, "page": rel, "viewport": [vw, vh],
                                               "scroll_y": offset, "num_samples": len(samples),
                                               "split": "test" if rel in test_pages else "train"})  # fmt: skip
            context.close()
        browser.close()

    for split in ("train", "test"):
        with open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in getattr(result, split))
    provenance = {
        "tool": TOOL, "tool_version": TOOL_VERSION, "chromium": browser_version,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "seed": seed,
        "viewports": [list(v) for v in viewports], "scroll_offsets": list(scroll_offsets),
        "root": _collection_root(paths), "roots": [os.path.realpath(p) for p in paths],
        "test_fraction": test_fraction,
        "settings": {"min_size": min_size, "min_area": min_area, "max_name_chars": max_name_chars,
                     "max_per_screenshot": max_per_screenshot},
        "num_samples": {"train": len(result.train), "test": len(result.test)},
        "dropped": {r: result.drops.get(r, 0) for r in DROP_REASONS},
        "screenshots": result.screenshots,
    }  # fmt: skip
    with open(os.path.join(out_dir, "provenance.json"), "w", encoding="utf-8") as f:
        json.dump(provenance, f, indent=1, ensure_ascii=False)
    logger.debug("collected into %s\n%s", out_dir, result.table())
    return result


def _collection_root(paths: list[str]) -> str:
    """The folder that the records' ``page`` names are relative to (as :func:`find_pages` names them)."""
    folders = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    return os.path.commonpath(folders)


def _remove_previous_screenshots(out_dir: str) -> None:
    """Delete the screenshots an earlier run listed in ``out_dir/provenance.json`` (and only those)."""
    path = os.path.join(out_dir, "provenance.json")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        old = json.load(f)
    for shot in old.get("screenshots", []):
        name = shot.get("file", "")
        if name.startswith("images/") and "/" not in name[len("images/") :] and name.endswith(".png"):
            target = os.path.join(out_dir, name)
            if os.path.isfile(target):
                os.remove(target)


def _samples_for_screenshot(found, shot_id, image_rel, page_rel, viewport, seed, max_name_chars, cap, drops):
    """Filter one screenshot's elements (names, ambiguity, cap) and turn them into canonical records."""
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
        records.append({
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
        })  # fmt: skip
    return records


def _parse_viewports(text: str) -> tuple[tuple[int, int], ...]:
    """``"1280x720,1024x768"`` -> ``((1280, 720), (1024, 768))`` (argparse type; bad text is a usage error)."""
    try:
        sizes = tuple(tuple(int(v) for v in item.strip().lower().split("x")) for item in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(len(s) != 2 or min(s) <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"expected WxH[,WxH...] like 1280x720,1024x768, got {text!r}")
    return sizes  # type: ignore[return-value]


def _parse_offsets(text: str) -> tuple[int, ...]:
    """``"0,600"`` -> ``(0, 600)`` (argparse type; negative or non-integer offsets are a usage error)."""
    try:
        offsets = tuple(int(v) for v in text.split(","))
    except ValueError:
        offsets = ()
    if not offsets or min(offsets) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative ints like 0,600, got {text!r}")
    return offsets


def _run_cli(args) -> None:
    result = collect_web(
        args.paths, args.out, viewports=args.viewports,
        scroll_offsets=args.scroll_offsets, max_pages=args.max_pages,
        test_fraction=args.test_fraction, seed=args.seed, min_size=args.min_size, min_area=args.min_area,
        max_name_chars=args.max_name_chars, max_per_screenshot=args.max_per_screenshot, chromium=args.chromium,
    )  # fmt: skip
    print(result.table())


def register_cli(subparsers) -> None:
    """Add the ``collect-web`` subcommand to an argparse ``subparsers`` object (from ``add_subparsers()``).

    The parsed namespace carries ``func``: call ``args.func(args)`` to run the collection and print the summary.
    """
    p = subparsers.add_parser(
        "collect-web", help="render local HTML in headless Chromium and write grounding samples",
        description="Render local HTML pages in headless Chromium (Playwright, no network), extract visible "
        "interactable elements with accessible names and boxes, write screenshots + canonical JSONL "
        "(train.jsonl/test.jsonl split by page) + provenance.json.",
    )  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH", help="HTML files or directories (searched recursively)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--viewports",
        type=_parse_viewports,
        default=((1280, 720), (1024, 768)),
        help="comma-separated WxH viewport sizes in CSS px (default 1280x720,1024x768)",
    )
    p.add_argument(
        "--scroll-offsets",
        type=_parse_offsets,
        default=(0,),
        help="comma-separated vertical scroll offsets in px; each reachable one gives another screenshot (default 0)",
    )
    p.add_argument("--max-pages", type=int, default=None, help="keep this many pages (seeded choice)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="fraction of PAGES in the test split")
    p.add_argument("--seed", type=int, default=0, help="seed for page choice, split, templates, capping")
    p.add_argument("--min-size", type=int, default=4, help="smallest element side kept (px, default 4)")
    p.add_argument("--min-area", type=int, default=64, help="smallest element area kept (px^2, default 64)")
    p.add_argument(
        "--max-name-chars", type=int, default=60, help="drop elements whose accessible name is longer (default 60)"
    )
    p.add_argument(
        "--max-per-screenshot",
        type=int,
        default=None,
        help="cap samples per screenshot (seeded choice; default: no cap)",
    )
    p.add_argument("--chromium", default=DEFAULT_CHROMIUM, help=f"Chromium executable (default {DEFAULT_CHROMIUM})")
    p.set_defaults(func=_run_cli)


if __name__ == "__main__":  # python -m gui_grounding.collect.web PATH... --out DIR (same flags as collect-web)
    _parser = argparse.ArgumentParser(prog="python -m gui_grounding.collect.web")
    register_cli(_parser.add_subparsers(dest="command", required=True))
    _args = _parser.parse_args(["collect-web", *sys.argv[1:]])
    _args.func(_args)
