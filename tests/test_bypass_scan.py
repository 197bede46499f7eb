"""The hostile-input rules hold by structure (docs/HOSTILE_INPUT.md, "Adding a rule"): no library module reads JSON or
YAML, opens an image, declares a numeric flag or converts a numeric environment variable except through the rule's
one home. An AST scan of every library module names each bypass as ``file:line``; the writers' scan is
``tests/test_writer_path.py``.

Homes:
* JSON and YAML text: ``groundwork/records.py`` (the record framing, ``strict_loads`` / ``lax_loads``,
  ``load_json_file`` / ``load_yaml_file``: duplicate keys, NaN, side-file limits);
* image files: ``groundwork/validate.py`` (``open_image``, ``image_frame``: EXIF orientation, decode limits);
* numbers from the command line and the environment: ``groundwork/argtypes.py`` (``number``, ``integer``, ``value``,
  ``from_env``, ``distributed_env``).
"""

from __future__ import annotations

import ast
import os
import textwrap

from tests.helpers.ast_scan import dotted as _dotted
from tests.helpers.paths import REPO

LIBRARY = ("groundwork", "vlm_r1", "gui_grounding")
HOMES = {
    "json": "groundwork/records.py",
    "yaml": "groundwork/records.py",
    "image": "groundwork/validate.py",
    "env-number": "groundwork/argtypes.py",
}
#: (file, kind) -> why it is not a bypass; a stale entry fails the scan too
ALLOWED = {
    ("groundwork/pixel_budget.py", "json"): "json.loads(json.dumps(values)): our own values made JSON-safe, no input",
}
_READERS = {
    ("json", "load"): "json",
    ("json", "loads"): "json",
    ("yaml", "load"): "yaml",
    ("yaml", "safe_load"): "yaml",
    ("yaml", "full_load"): "yaml",
    ("yaml", "unsafe_load"): "yaml",
    ("Image", "open"): "image",
}


def _is_environ_read(node: ast.AST) -> bool:
    """``os.environ[...]``, ``os.environ.get(...)``, ``os.getenv(...)`` (or ``environ``/``getenv`` imported)."""
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)[-1:] == ("environ",)
    if isinstance(node, ast.Call):
        return _dotted(node.func)[-2:] == ("environ", "get") or _dotted(node.func)[-1:] == ("getenv",)
    return False


def bypasses(source: str) -> list[tuple[int, str, str]]:
    """``[(line, kind, what)]`` of every read, flag and number conversion in ``source`` that a home should do."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func)
        kind = _READERS.get(dotted[-2:])
        if kind:
            out.append((node.lineno, kind, ".".join(dotted)))
        if dotted[-1:] == ("add_argument",):
            for kw in node.keywords:
                if kw.arg == "type" and isinstance(kw.value, ast.Name) and kw.value.id in ("int", "float"):
                    out.append((node.lineno, "flag", f"add_argument(type={kw.value.id})"))
        if dotted in (("int",), ("float",)) and node.args and _is_environ_read(node.args[0]):
            out.append((node.lineno, "env-number", f"{dotted[0]}(<environment variable>)"))
    return out


def _library_files():
    for pkg in LIBRARY:
        for folder, _, files in os.walk(os.path.join(REPO, pkg)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, REPO).replace(os.sep, "/"), path


def test_no_reader_flag_or_number_bypasses_its_home():
    problems, used = [], set()
    for rel, path in _library_files():
        with open(path, encoding="utf-8") as f:
            found = bypasses(f.read())
        for line, kind, what in found:
            if HOMES.get(kind) == rel:
                continue
            if (rel, kind) in ALLOWED:
                used.add((rel, kind))
                continue
            home = HOMES.get(kind, "groundwork/argtypes.py (number, integer)")
            problems.append(f"{rel}:{line}: {what} (the rule's home is {home})")
    assert problems == []
    assert set(ALLOWED) == used, f"stale ALLOWED entries: {sorted(set(ALLOWED) - used)}"


def test_the_scan_sees_each_kind_of_bypass():
    source = textwrap.dedent(
        """
        import json, os, yaml
        from PIL import Image
        def f(p, parser):
            a = json.load(open(p))
            b = json.loads("{}")
            c = yaml.safe_load(p)
            d = Image.open(p)
            parser.add_argument("--n", type=int)
            parser.add_argument("--x", type=float, default=1.0)
            parser.add_argument("--ok", type=str)
            w = int(os.environ["WORLD_SIZE"])
            r = float(os.environ.get("LR", "1"))
            g = int(os.getenv("RANK", "0"))
            fine = int("3")
        """
    )
    assert bypasses(source) == [
        (5, "json", "json.load"),
        (6, "json", "json.loads"),
        (7, "yaml", "yaml.safe_load"),
        (8, "image", "Image.open"),
        (9, "flag", "add_argument(type=int)"),
        (10, "flag", "add_argument(type=float)"),
        (12, "env-number", "int(<environment variable>)"),
        (13, "env-number", "float(<environment variable>)"),
        (14, "env-number", "int(<environment variable>)"),
    ]
