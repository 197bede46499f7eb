"""References a reader can open: every citation in the repository points at something a reader can find.

Rules (the checked files are the tracked ones, plus untracked files git does not ignore, so a new file is checked
before its first commit):

(a) **no private material**: no file mentions one of the development notes that once lived beside the repository (their
    names are assembled in ``_NOTE_NAMES``), their folder, or an absolute path under the work or home roots of a
    development machine. Public facts cite their public source (``owner/repo path:lines at <commit>``, an arXiv id, a
    URL); facts we measured cite ``docs/REFERENCES.md#<section>``.
(b) **our own files exist**: in the scanned texts (Markdown files; comments and docstrings of Python files; YAML, shell,
    sbatch, txt, toml and ini files; ``.ci/``), every path that starts with one of our folders and names a file of ours
    (``docs/<name>.md``, ``tests/<path>.py``, ``gui_grounding/<path>.py``, ``vlm_r1/<path>.py``,
    ``benchmarks/<path>.py``, ``recipes/<path>.yaml``, ``data_config/<path>.yaml``, ``run_scripts/<path>.sh`` or
    ``.sbatch``) must exist; a glob (``*``) must match a file; a ``#anchor`` after a Markdown path must be one of its
    headings (GitHub's anchor rule).
    Not checked: a path glued to a longer one (``omm/run_scripts/<x>``, ``src/open-r1-multimodal/<x>``), a template
    (``<size>``, ``{a,b}``), and a path written right after an upstream repository name, ``owner/repo path`` or
    ``owner/repo at <sha>: path`` (the repository name must not be one of our own folders), which is how an upstream
    file whose path looks like ours (VLM-R1's root ``run_scripts/``) is cited.
(c) **named tests exist**: a test file named bare or under ``tests/`` (``test_<module>.py``) exists in ``tests/``, and
    a node id ``test_<module>.py::<name>`` names a function or class defined in it.
(d) **Markdown links resolve**: a relative link ``[text](path#anchor)`` of a Markdown file points at an existing file
    (relative to that Markdown file) and, with an anchor into a Markdown file, at one of its headings.

Fast: reads text files only, no imports of the project.
"""

from __future__ import annotations

import ast
import functools
import glob
import io
import os
import re
import subprocess
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The private notes, assembled from parts so that this file does not mention them itself.
_NOTE_NAMES = tuple(
    "_".join(parts)
    for parts in (
        ("gta1", "and", "peers"),
        ("cpu", "stack"),
        ("seed", "summary"),
        ("vlm", "r1", "upstream"),
        ("shared", "prompt", "grpo"),
    )
)
_NOTES_DIR = "shared" + "/" + "reference"
_FORBIDDEN = re.compile(
    "|".join([*(re.escape(name) for name in _NOTE_NAMES), re.escape(_NOTES_DIR), r"(?<![\w.~-])/(?:work|home)/"])
)

# Paths of ours, by folder and extension. The look-behind refuses a path glued to a longer one (``omm/run_scripts/``).
_OUR_PATH = re.compile(
    r"(?<![\w./-])"
    r"(?P<path>docs/[\w.*-]+\.md"
    r"|(?:tests|gui_grounding|vlm_r1|benchmarks)/[\w./*-]*\.py"
    r"|(?:recipes|data_config)/[\w./*-]*\.ya?ml"
    r"|run_scripts/[\w./*-]*\.(?:sh|sbatch))"
    r"(?P<anchor>#[\w-]+)?"
    r"(?![\w/])"
)
# A test file named bare or under tests/, optionally with a node id.
_TEST_NAME = re.compile(r"(?<![\w./-])(?:tests/)?(?P<file>test_\w+\.py)(?:::(?P<node>\w+))?")
# What may stand right before an upstream path: ``owner/repo``, optionally ``@sha`` or `` at sha``, then ``:``.
_UPSTREAM_BEFORE = re.compile(
    r"(?:^|[\s(\[`'\"])(?P<owner>[A-Za-z0-9][\w.-]*)/[A-Za-z0-9][\w.-]*"
    r"(?:@[0-9a-f]{7,40}|\s+at\s+`?[0-9a-f]{7,40}`?)?:?[\s`'\"]*$"
)
_MD_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")

_FULL_TEXT_EXTENSIONS = (".md", ".yaml", ".yml", ".sh", ".sbatch", ".txt", ".toml", ".ini", ".cfg")


@functools.lru_cache(maxsize=1)
def project_files() -> tuple[str, ...]:
    """Tracked files plus untracked, non-ignored ones (relative paths), that exist on disk."""
    try:
        out = subprocess.run(
            ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the file list comes from git ls-files")
    names = sorted({p for p in out.decode("utf-8").split("\0") if p})
    return tuple(p for p in names if os.path.isfile(os.path.join(ROOT, p)))


def read_text(rel: str) -> str | None:
    """The file's text, or None for a binary file."""
    with open(os.path.join(ROOT, rel), "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def line_of(text: str, pos: int, first_line: int = 1) -> int:
    return first_line + text.count("\n", 0, pos)


def python_prose(source: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every comment and every bare string statement (docstrings) of a Python source."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):
        return [(1, source)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.append((node.lineno, node.value.value))
    return out


def scanned_texts(files: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """``(file, first line, text)`` of the prose rule (b) reads: Markdown and config/script files whole, Python
    comments and docstrings. Test fixtures (hostile data on purpose) are left out."""
    out = []
    for rel in files:
        if rel.startswith("tests/fixtures/"):
            continue
        if rel.endswith(".py"):
            text = read_text(rel)
            if text is not None:
                out.extend((rel, line, chunk) for line, chunk in python_prose(text))
        elif rel.endswith(_FULL_TEXT_EXTENSIONS) or rel.startswith(".ci/"):
            text = read_text(rel)
            if text is not None:
                out.append((rel, 1, text))
    return out


def our_top_folders(files: tuple[str, ...]) -> frozenset[str]:
    return frozenset(p.split("/", 1)[0] for p in files if "/" in p)


def after_upstream_repo(text: str, start: int, ours: frozenset[str]) -> bool:
    """True when the path at ``start`` is written right after an upstream ``owner/repo`` (not one of our folders)."""
    m = _UPSTREAM_BEFORE.search(text[max(0, start - 160) : start])
    return m is not None and m.group("owner") not in ours


def github_anchors(markdown: str) -> frozenset[str]:
    """The anchors GitHub gives the headings of ``markdown``: lower case, characters other than letters, digits,
    ``_``, ``-`` and spaces dropped, spaces to ``-``; a repeated anchor gets ``-1``, ``-2``... Fenced code is skipped."""
    anchors, seen, fence = set(), {}, None
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.+?)\s*$", line)
        if not m:
            continue
        base = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
    return frozenset(anchors)


@functools.cache
def anchors_of(rel: str) -> frozenset[str]:
    text = read_text(rel)
    return github_anchors(text or "")


def path_problem(path: str, anchor: str | None) -> str | None:
    """Why ``path`` (relative to the root, maybe a glob) with ``anchor`` does not resolve, or None."""
    if "*" in path:
        if not glob.glob(os.path.join(ROOT, path)):
            return "matches no file"
        return None
    if not os.path.isfile(os.path.join(ROOT, path)):
        return "does not exist"
    if anchor and path.endswith(".md") and anchor.lstrip("#") not in anchors_of(path):
        return f"has no heading with anchor {anchor}"
    return None


def missing_citations(rel: str, first_line: int, text: str, ours: frozenset[str]) -> list[str]:
    """Rule (b) on one text: ``file:line: path problem`` for each path of ours that does not resolve."""
    problems = []
    for m in _OUR_PATH.finditer(text):
        if after_upstream_repo(text, m.start(), ours):
            continue
        why = path_problem(m.group("path"), m.group("anchor"))
        if why:
            problems.append(f"{rel}:{line_of(text, m.start(), first_line)}: {m.group(0)} {why}")
    return problems


def missing_tests(rel: str, first_line: int, text: str, ours: frozenset[str]) -> list[str]:
    """Rule (c) on one text."""
    problems = []
    for m in _TEST_NAME.finditer(text):
        if after_upstream_repo(text, m.start(), ours):
            continue
        path = os.path.join(ROOT, "tests", m.group("file"))
        where = f"{rel}:{line_of(text, m.start(), first_line)}: {m.group(0)}"
        if not os.path.isfile(path):
            problems.append(f"{where}: no tests/{m.group('file')}")
            continue
        node = m.group("node")
        if node:
            with open(path, encoding="utf-8") as f:
                source = f.read()
            if not re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(node)}\b", source, re.MULTILINE):
                problems.append(f"{where}: tests/{m.group('file')} defines no {node}")
    return problems


def forbidden_mentions(rel: str, text: str) -> list[str]:
    """Rule (a) on one file."""
    return [f"{rel}:{line_of(text, m.start())}: {m.group(0)!r}" for m in _FORBIDDEN.finditer(text)]


def broken_markdown_links(rel: str, text: str) -> list[str]:
    """Rule (d) on one Markdown file."""
    problems = []
    base = os.path.dirname(rel)
    for m in _MD_LINK.finditer(text):
        target = m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(base, path)) if path else rel
        where = f"{rel}:{line_of(text, m.start())}: ({target})"
        if dest.startswith(".."):
            problems.append(f"{where} points outside the repository")
        elif not os.path.exists(os.path.join(ROOT, dest)):
            problems.append(f"{where} does not exist")
        elif anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
            problems.append(f"{where} has no heading with anchor #{anchor}")
    return problems


def _report(problems: list[str], what: str) -> str:
    return f"{len(problems)} {what}:\n" + "\n".join(problems)


# ---- the repository -----------------------------------------------------------------------------------------------


def test_no_private_notes_or_machine_paths():
    problems = []
    for rel in project_files():
        text = read_text(rel)
        if text is not None:
            problems.extend(forbidden_mentions(rel, text))
    assert not problems, _report(
        problems,
        "mention(s) of private notes or machine paths; cite the public source, or docs/REFERENCES.md for "
        "what we measured",
    )


def test_cited_files_of_ours_exist():
    files = project_files()
    ours = our_top_folders(files)
    problems = []
    for rel, first_line, text in scanned_texts(files):
        problems.extend(missing_citations(rel, first_line, text, ours))
    assert not problems, _report(problems, "citation(s) of a file of ours that is missing")


def test_named_tests_exist():
    files = project_files()
    ours = our_top_folders(files)
    problems = []
    for rel, first_line, text in scanned_texts(files):
        problems.extend(missing_tests(rel, first_line, text, ours))
    assert not problems, _report(problems, "named test(s) that do not exist")


def test_markdown_links_resolve():
    problems = []
    for rel in project_files():
        if rel.endswith(".md") and not rel.startswith("tests/fixtures/"):
            problems.extend(broken_markdown_links(rel, read_text(rel) or ""))
    assert not problems, _report(problems, "broken Markdown link(s)")


def test_references_page_has_its_sections():
    """The sections other files cite as ``docs/REFERENCES.md#...`` (rule (b) checks each citation; this pins the page)."""
    anchors = anchors_of("docs/REFERENCES.md")
    for section in (
        "pinned-public-sources",
        "cpu-install",
        "torchvision-on-cpu",
        "image-only-processor",
        "tiny-checkpoint",
        "smart-resize-reference-value",
        "trl-grpo-on-cpu",
        "several-processes-on-cpu",
        "shared-prompt-grpo-exactness-and-cost",
    ):
        assert section in anchors, section


# ---- the rules themselves -----------------------------------------------------------------------------------------


def test_rule_a_flags_notes_and_machine_paths_only():
    note = _NOTE_NAMES[0] + ".md"
    assert forbidden_mentions("x.md", f"see {note} section 4") == [f"x.md:1: {note[:-3]!r}"]
    assert forbidden_mentions("x.md", "a\n(../" + _NOTES_DIR + "/x.md)") == [f"x.md:2: {_NOTES_DIR!r}"]
    root_dirs = ("work", "home")
    for d in root_dirs:
        assert forbidden_mentions("x.py", f"open('/{d}/u/a.txt')"), d
        assert forbidden_mentions("x.py", f"file:///{d}/u/a.txt"), d
    for fine in ("https://example.org/home/a", "~/.cache/x", "runs/home/a", "data/work/a", "homework/"):
        assert not forbidden_mentions("x.py", fine), fine


def test_rule_b_paths_of_ours_and_upstream_paths():
    ours = frozenset(
        {"docs", "tests", "gui_grounding", "vlm_r1", "recipes", "run_scripts", "data_config", "benchmarks"}
    )

    def flagged(text: str) -> list[str]:
        return [p.split(": ", 1)[1] for p in missing_citations("x.md", 1, text, ours)]

    assert flagged("see docs/NO_SUCH_PAGE.md.") == ["docs/NO_SUCH_PAGE.md does not exist"]
    assert flagged("(`vlm_r1/no_such_module.py:12`)") == ["vlm_r1/no_such_module.py does not exist"]
    assert flagged("gui_grounding/models/frames.py, tests/test_references.py, recipes/gta1/7b.yaml") == []
    assert flagged("tests/test_*.py") == []
    assert flagged("tests/test_no_such_*.py") == ["tests/test_no_such_*.py matches no file"]
    assert flagged("docs/REFERENCES.md#cpu-install") == []
    assert flagged("docs/REFERENCES.md#no-such-section") == [
        "docs/REFERENCES.md#no-such-section has no heading with anchor #no-such-section"
    ]
    # upstream files: glued to a longer path, or written right after the upstream repository's name
    assert flagged("omm/run_scripts/no_such.sh and src/open-r1-multimodal/run_scripts/no_such.sh") == []
    assert flagged("om-ai-lab/VLM-R1 run_scripts/no_such.sh") == []
    assert flagged("om-ai-lab/VLM-R1 ``run_scripts/no_such.sh:21``") == []
    assert flagged("(om-ai-lab/VLM-R1 at\n90052f4: run_scripts/no_such.sh, b.sh)") == []
    assert flagged("Yan98/GTA1@81f0c4c: tests/no_such.py") == []
    # ... but one of our own paths is not a repository name, and a bare upstream path is not exempt
    assert flagged("vlm_r1/configs.py run_scripts/no_such.sh") == ["run_scripts/no_such.sh does not exist"]
    assert flagged("upstream's run_scripts/no_such.sh") == ["run_scripts/no_such.sh does not exist"]
    # templates are not citations
    assert flagged("recipes/gta1/<size>.yaml, run_scripts/gta1_{7b,32b}.sh, docs/<name>.md") == []


def test_rule_c_test_names():
    ours = frozenset({"tests", "vlm_r1"})

    def flagged(text: str) -> list[str]:
        return [p.split(": ", 2)[2] for p in missing_tests("x.md", 1, text, ours)]

    assert flagged("`test_references.py::test_rule_c_test_names`, tests/test_references.py") == []
    assert flagged("test_no_such_module.py") == ["no tests/test_no_such_module.py"]
    assert flagged("test_references.py::no_such_test") == ["tests/test_references.py defines no no_such_test"]
    assert flagged("src/eval/test_rec_r1.py (upstream), test_<module>.py::<name>") == []


def test_rule_d_markdown_links_and_github_anchors():
    heading = "## 9. Test-time grounding: `--tts consensus | zoom | zoom+consensus`"
    assert github_anchors(heading) == {"9-test-time-grounding---tts-consensus--zoom--zoomconsensus"}
    assert github_anchors("# A\n## A\n```\n# not a heading\n```\n### Smart-resize value") == {
        "a",
        "a-1",
        "smart-resize-value",
    }
    assert broken_markdown_links("docs/x.md", "[r](REFERENCES.md#cpu-install) [w](https://e.org/a.md)") == []
    assert broken_markdown_links("README.md", "[r](docs/REFERENCES.md#no-such)") == [
        "README.md:1: (docs/REFERENCES.md#no-such) has no heading with anchor #no-such"
    ]
    assert broken_markdown_links("README.md", "[r](docs/NO_SUCH.md)") == [
        "README.md:1: (docs/NO_SUCH.md) does not exist"
    ]
