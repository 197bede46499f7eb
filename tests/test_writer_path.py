"""One writer path (issue 28): every file the library writes goes through ``groundwork.outputs``.

The rule (``groundwork/outputs.py``, ``docs/HOSTILE_INPUT.md`` "Output files"): whole files are written under a unique
temporary name and renamed (``atomic_writer``, ``write_text``, ``write_bytes``, ``write_json``, ``write_lines``);
appended files (resumable outputs, training logs, the ``DEBUG_MODE`` rollout log) through ``LineAppender`` (whole lines,
one ``write`` each, under an ``flock`` on the file); a child's live log through ``live_log``; a shared JSON record
(``vlm_r1_run.json``) read-modified-written under a waiting ``OutputLock`` by its one writer
(``groundwork.pixel_budget.update_run_info``).

Guards: an AST scan of every ``.py`` file under ``groundwork/``, ``vlm_r1/`` and ``gui_grounding/`` (a write-mode ``open``, a
``json.dump`` / ``.savefig`` / ``.save`` into anything but an outputs handle or an in-memory buffer, ``os.replace``,
``Path.write_text`` ... outside ``groundwork/outputs.py`` fails, naming ``file:line``), the scan's own detector checked on
generated snippets, and behaviour: concurrent appenders never interleave inside a line or block, an error mid-write
leaves the previous file whole, concurrent run-info writers lose no key.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwork import outputs
from groundwork.outputs import LineAppender, OutputError, OutputLock
from tests.helpers.ast_scan import dotted as _dotted
from tests.helpers.paths import REPO

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ---- the scan ----------------------------------------------------------------------------------------------------

LIBRARY = ("groundwork", "vlm_r1", "gui_grounding")
#: the one module allowed to write files directly
OUTPUTS_FILE = "groundwork/outputs.py"
OUTPUTS_MODULE = "groundwork.outputs"
#: outputs' handles a sink may write into (``with atomic_writer(...) as f``)
OUTPUT_HANDLES = {"atomic_writer", "live_log"}
#: in-memory buffers a sink may write into (then ``outputs.write_bytes`` / ``write_text``)
BUFFERS = {"BytesIO", "StringIO"}
#: a mode literal holding one of these letters writes
WRITE_LETTERS = set("wax+")
MODE_RE = re.compile(r"^[rwaxbtU+]{1,5}$")
#: ``os.open`` flags that write
OS_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
#: calls that write, move or copy a file whatever their arguments
ALWAYS = {
    ("os", "replace"),
    ("os", "rename"),
    ("os", "renames"),
    ("os", "truncate"),
    ("os", "link"),
    ("os", "symlink"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
    ("shutil", "move"),
    ("tempfile", "mkstemp"),
    ("tempfile", "NamedTemporaryFile"),
}
#: module functions that write a value into a destination: (module, function) -> index of the destination argument
DUMPERS = {
    ("json", "dump"): 1,
    ("pickle", "dump"): 1,
    ("yaml", "dump"): 1,
    ("yaml", "safe_dump"): 1,
    ("torch", "save"): 1,
    ("np", "save"): 0,
    ("np", "savez"): 0,
    ("np", "savetxt"): 0,
    ("numpy", "save"): 0,
}
#: methods that write their object into a destination (first argument): matplotlib, PIL, pandas
METHOD_SINKS = {"savefig", "save", "to_csv", "to_parquet", "to_json"}
#: ``pathlib.Path`` writers
PATH_WRITERS = {"write_text", "write_bytes"}
#: classes and methods that open a file themselves: a logging file handler; Playwright's ``screenshot`` / ``pdf``
#: with a ``path=`` (the collector takes the bytes and writes them through outputs)
SELF_OPENING = {"FileHandler", "RotatingFileHandler", "TimedRotatingFileHandler", "WatchedFileHandler"}
PATH_KEYWORD_WRITERS = {"screenshot", "pdf"}

#: True exceptions: (file, enclosing function, what) -> why. Checkpoint files are written by HF/TRL's own
#: ``save_pretrained`` / ``save_model`` (no ``open`` of ours), so they need no entry. Every entry must still match.
ALLOWED: dict[tuple[str, str, str], str] = {}


def _outputs_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """``(module aliases of groundwork.outputs, {local name: outputs function name})`` imported anywhere in ``tree``."""
    modules, functions = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == OUTPUTS_MODULE:
                functions.update({a.asname or a.name: a.name for a in node.names})
            elif node.module == "groundwork":
                modules.update(a.asname or a.name for a in node.names if a.name == "outputs")
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == OUTPUTS_MODULE and a.asname)
    return modules, functions


def _is_outputs_call(node: ast.AST, names: set[str], modules: set[str], functions: dict[str, str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return functions.get(func.id) in names
    dotted = _dotted(func)
    return (
        len(dotted) >= 2 and dotted[-1] in names and (dotted[-2] in modules or dotted[:-1] == ("groundwork", "outputs"))
    )


def _safe_destinations(scope: ast.AST, modules: set[str], functions: dict[str, str]) -> set[str]:
    """Names bound in ``scope`` to an outputs handle (``with atomic_writer(...) as f``) or an in-memory buffer."""
    safe = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if _is_outputs_call(node.context_expr, OUTPUT_HANDLES, modules, functions):
                safe.add(node.optional_vars.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if (_dotted(node.value.func) or ("",))[-1] in BUFFERS:
                safe.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return safe


def _mode_problem(call: ast.Call, positions: tuple[int, ...]) -> str | None:
    """Why an ``open``-like call writes (its mode), or None when it only reads."""
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    candidates = [mode] if mode is not None else [call.args[i] for i in positions if i < len(call.args)]
    for arg in candidates:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if MODE_RE.match(arg.value) and WRITE_LETTERS & set(arg.value):
                return f"open in mode {arg.value!r}"
        elif mode is not None or positions == (1,):
            return "open with a mode that is not a literal"
    return None


def scan_source(source: str, rel: str) -> list[tuple[int, str, str]]:
    """``[(line, enclosing function, what)]``: every direct write in ``source`` (the file ``rel``)."""
    tree = ast.parse(source)
    modules, functions = _outputs_names(tree)
    parents: dict[ast.AST, ast.AST] = {}

    def scope_of(node: ast.AST) -> tuple[ast.AST, str]:
        if not parents:  # built on first use: most files have no sink
            parents.update({child: n for n in ast.walk(tree) for child in ast.iter_child_nodes(n)})
        names, scope = [], None
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope = scope or node
                names.append(node.name)
        return scope or tree, ".".join(reversed(names)) or "<module>"

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, dotted = node.func, _dotted(node.func)
        name = dotted[-1] if dotted else (func.attr if isinstance(func, ast.Attribute) else "")
        what = None
        if dotted == ("os", "open"):
            flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(node)}
            if flags & OS_WRITE_FLAGS:
                what = "os.open with write flags"
        elif isinstance(func, ast.Name) and func.id == "open":
            what = _mode_problem(node, (1,))
        elif name in ("open", "fdopen") and isinstance(func, ast.Attribute):
            what = _mode_problem(node, (0, 1))  # gzip.open(path, "wt") / Path.open("w") / os.fdopen(fd, "w")
        elif name == "ZipFile":
            what = _mode_problem(node, (1,))
        elif dotted[-2:] in ALWAYS or tuple(dotted) in ALWAYS:
            what = ".".join(dotted)
        elif name in SELF_OPENING:
            what = f"{ast.unparse(func)} (opens its file itself)"
        elif name in PATH_KEYWORD_WRITERS and any(k.arg == "path" for k in node.keywords):
            what = f"{ast.unparse(func)}(path=...) (writes the file itself)"
        elif name in PATH_WRITERS:
            outputs_call = (isinstance(func, ast.Name) and functions.get(func.id) == name) or (
                len(dotted) >= 2 and (dotted[-2] in modules or dotted[:-1] == ("groundwork", "outputs"))
            )
            if not outputs_call:
                what = f"{ast.unparse(func)} (not groundwork.outputs.{name})"
        else:
            index = DUMPERS.get(tuple(dotted[-2:]))
            if index is None and isinstance(func, ast.Attribute) and name in METHOD_SINKS and node.args:
                index = 0
            if index is not None:
                dest = node.args[index] if index < len(node.args) else None
                dest = dest or next(
                    (k.value for k in node.keywords if k.arg in ("fp", "fname", "file", "stream")), None
                )
                scope, _ = scope_of(node)
                safe = _safe_destinations(scope, modules, functions)
                inline_buffer = isinstance(dest, ast.Call) and (_dotted(dest.func) or ("",))[-1] in BUFFERS
                if not (isinstance(dest, ast.Name) and dest.id in safe) and not inline_buffer:
                    what = (
                        f"{'.'.join(dotted) or name} into {ast.unparse(dest) if dest else '?'} (not an outputs handle)"
                    )
        if what:
            found.append((node.lineno, scope_of(node)[1], what))
    return found


def _library_files() -> list[str]:
    files = []
    for pkg in LIBRARY:
        for folder, _, names in os.walk(os.path.join(REPO, pkg)):
            files += [os.path.relpath(os.path.join(folder, n), REPO) for n in names if n.endswith(".py")]
    return sorted(f.replace(os.sep, "/") for f in files)


def test_every_library_write_goes_through_outputs():
    """No ``.py`` file of the library writes a file except ``groundwork/outputs.py`` (or an entry of ``ALLOWED``)."""
    problems, used = [], set()
    files = _library_files()
    assert OUTPUTS_FILE in files and len(files) > 50
    for rel in files:
        if rel == OUTPUTS_FILE:
            continue
        with open(os.path.join(REPO, rel), encoding="utf-8") as f:
            source = f.read()
        for line, scope, what in scan_source(source, rel):
            key = (rel, scope, what)
            if key in ALLOWED:
                used.add(key)
                continue
            problems.append(f"{rel}:{line} in {scope}: {what}")
    assert not problems, "write through groundwork.outputs instead:\n" + "\n".join(problems)
    assert used == set(ALLOWED), f"stale ALLOWED entries: {sorted(set(ALLOWED) - used)}"


def test_outputs_module_itself_is_found_by_the_scan():
    """The scan sees the direct writes of ``groundwork/outputs.py`` (the one file allowed them): it is not blind."""
    with open(os.path.join(REPO, OUTPUTS_FILE), encoding="utf-8") as f:
        found = {what for _, _, what in scan_source(f.read(), OUTPUTS_FILE)}
    assert {"open in mode 'a+b'", "os.replace", "tempfile.mkstemp", "os.open with write flags"} <= found
    assert "open in mode 'w'" in found  # live_log


WRITES = [
    ("open(p, 'w')", "open in mode 'w'"),
    ("open(p, mode='ab')", "open in mode 'ab'"),
    ("open(p, m)", "open with a mode that is not a literal"),
    ("pathlib.Path(p).open('x')", "open in mode 'x'"),
    ("gzip.open(p, 'wt')", "open in mode 'wt'"),
    ("os.fdopen(fd, 'r+')", "open in mode 'r+'"),
    ("os.open(p, os.O_WRONLY | os.O_CREAT)", "os.open with write flags"),
    ("json.dump(v, f)", "json.dump into f (not an outputs handle)"),
    ("fig.savefig(p, dpi=100)", "fig.savefig into p (not an outputs handle)"),
    ("img.save(p, 'PNG')", "img.save into p (not an outputs handle)"),
    ("torch.save(state, p)", "torch.save into p (not an outputs handle)"),
    ("os.replace(a, b)", "os.replace"),
    ("shutil.copy(a, b)", "shutil.copy"),
    ("pathlib.Path(p).write_text(t)", "pathlib.Path(p).write_text (not groundwork.outputs.write_text)"),
    ("q.write_bytes(b)", "q.write_bytes (not groundwork.outputs.write_bytes)"),
    ("logging.FileHandler(p)", "logging.FileHandler (opens its file itself)"),
    ("page.screenshot(path=p)", "page.screenshot(path=...) (writes the file itself)"),
]
READS = [
    "open(p)",
    "open(p, 'rb')",
    "open(p, encoding='utf-8')",
    "Image.open(p)",
    "os.open(p, os.O_RDONLY)",
    "json.dumps(v)",
    "page.screenshot(type='png')",
    "outputs.write_text(p, t)",
    "write_bytes(p, b)",
    "with atomic_writer(p, 'wb') as f:\n        fig.savefig(f, format='png')",
    "with outputs.atomic_writer(p) as g:\n        json.dump(v, g)",
    "buf = io.BytesIO()\n    img.save(buf, format='PNG')",
    "with outputs.live_log(p) as log:\n        subprocess.run(cmd, stdout=log)",
]


@pytest.mark.parametrize(("code", "what"), WRITES)
def test_scan_flags_each_kind_of_write(code, what):
    source = f"from groundwork.outputs import atomic_writer, write_bytes\n\ndef f():\n    {code}\n"
    assert scan_source(source, "x.py") == [(4, "f", what)]


@pytest.mark.parametrize("code", READS)
def test_scan_passes_reads_and_outputs_writes(code):
    source = f"from groundwork import outputs\nfrom groundwork.outputs import atomic_writer, write_bytes\n\ndef f():\n    {code}\n"
    assert scan_source(source, "x.py") == []


@FAST
@given(
    letters=st.lists(st.sampled_from("rwaxbt+"), min_size=1, max_size=3, unique=True),
    opener=st.sampled_from(["open(p, {m})", "open(p, mode={m})", "io.open(p, {m})", "p.open({m})", "bz2.open(p, {m})"]),
)
def test_scan_flags_every_write_mode(letters, opener):
    """Any mode literal holding w, a, x or + is a write, through any opener; the others are reads."""
    mode = "".join(letters)
    found = scan_source("def f():\n    " + opener.format(m=repr(mode)) + "\n", "x.py")
    assert found == ([(2, "f", f"open in mode {mode!r}")] if WRITE_LETTERS & set(mode) else [])


# ---- appenders: whole lines, never interleaved --------------------------------------------------------------------

_APPEND_CHILD = textwrap.dedent(
    """
    import sys
    from groundwork.outputs import LineAppender
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(n):
        with LineAppender(path) as log:  # a fresh appender per entry, as the training logs do
            if i % 2:
                log.write_block("".join(f"{tag} {i} part {k} " + tag * (i % 97 * 40) + "\\n" for k in range(3)))
            else:
                log.write(f"{tag} {i} " + tag * (i % 89 * 300))
    """
)


def _check_entries(text: str, tags: str, n: int) -> None:
    seen = {t: [] for t in tags}
    lines = text.split("\n")
    assert lines[-1] == ""
    for line in lines[:-1]:
        tag, i, *rest = line.split(" ")
        seen[tag].append(int(i))
        filler = line.rsplit(" ", 1)[-1]
        assert set(filler) <= {tag}, f"a line holds another writer's text: {line[:80]!r}"
    for tag in tags:  # each writer's lines in its own order; a block's 3 lines are consecutive in the file
        expect = [i for i in range(n) for _ in range(3 if i % 2 else 1)]
        assert seen[tag] == expect
    block_lines = [line for line in lines[:-1] if " part " in line]
    for k in range(0, len(block_lines), 3):
        assert [line.split(" ")[3] for line in block_lines[k : k + 3]] == ["0", "1", "2"]


def test_two_processes_appending_never_interleave(tmp_path):
    """Two processes append 300 entries each (lines up to 27 KB, 3-line blocks up to 12 KB a line) to one file: every
    line whole, every block's lines together, each writer's entries in order."""
    path = str(tmp_path / "log.txt")
    env = dict(os.environ, PYTHONPATH=REPO)
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPEND_CHILD, path, tag, "300"], env=env, cwd=REPO) for tag in "AB"
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    with open(path, encoding="utf-8") as f:
        _check_entries(f.read(), "AB", 300)


@FAST
@given(
    lines=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=200), max_size=30
    ),
    writers=st.integers(2, 4),
)
def test_threads_appending_keep_every_line_whole(tmp_path_factory, lines, writers):
    """Several threads, each with its own appender, append the same lines: the file is exactly the multiset of the
    written lines (none torn, none merged, none lost)."""
    path = str(tmp_path_factory.mktemp("app") / "out.jsonl")
    payload = [
        json.dumps({"w": w, "i": i, "t": t}, ensure_ascii=False) for w in range(writers) for i, t in enumerate(lines)
    ]

    def run(w: int) -> None:
        with LineAppender(path) as app:
            for line in payload:
                if json.loads(line)["w"] == w:
                    app.write(line)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not payload:
        assert os.path.getsize(path) == 0
        return
    with open(path, encoding="utf-8") as f:
        got = f.read()
    assert got.endswith("\n") and sorted(got[:-1].split("\n")) == sorted(payload)


@FAST
@given(
    kept=st.lists(st.binary(max_size=50).map(lambda b: b.replace(b"\n", b"")), max_size=5),
    torn=st.binary(min_size=1, max_size=200).map(lambda b: b.replace(b"\n", b"") or b"x"),
    cut=st.booleans(),
)
def test_torn_tail_is_ended_or_cut_before_the_next_line(tmp_path_factory, kept, torn, cut):
    """A file ending in a torn line: the next appender ends it with a newline (default) or cuts it
    (``cut_torn_tail``, the clean cache); either way the new line starts on its own and the whole lines stay."""
    path = tmp_path_factory.mktemp("torn") / "cache.jsonl"
    head = b"".join(line + b"\n" for line in kept)
    path.write_bytes(head + torn)
    with LineAppender(str(path), cut_torn_tail=cut) as app:
        app.write("new")
    assert path.read_bytes() == head + (b"" if cut else torn + b"\n") + b"new\n"


def test_appender_rules_on_text():
    """``write`` refuses a line break; ``write_block`` wants whole lines; ``errors`` decides on lone surrogates."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "a.txt")
        with LineAppender(path) as app:
            with pytest.raises(ValueError, match="a line to append holds a line break"):
                app.write("a\rb")
            with pytest.raises(ValueError, match="a block to append does not end with a newline"):
                app.write_block("a\nb")
            with pytest.raises(UnicodeEncodeError):
                app.write("bad \ud800")
            app.write_block("")
        with LineAppender(path, errors="backslashreplace") as app:
            app.write_block("x \ud800\nmulti\r\nline\n")
        with open(path, "rb") as f:
            assert f.read() == b"x \\ud800\nmulti\r\nline\n"


def test_debug_log_appends_blocks_whole(tmp_path):
    """The ``DEBUG_MODE`` rollout log appends through ``LineAppender.write_block``: a torn last line (an earlier
    crash) is ended first, a lone surrogate in a completion is escaped instead of stopping training, and the text is
    otherwise exactly the rendered blocks."""
    from vlm_r1.upstream.debug_log import RolloutDebugLog

    log_path = tmp_path / "logs" / "debug_log_run.txt"
    log_path.parent.mkdir()
    log_path.write_bytes(b"------------- torn")
    RolloutDebugLog().write("block one\nContent: a\ud800b\n", "fmt\n", str(log_path))
    assert log_path.read_bytes() == b"------------- torn\nblock one\nContent: a\\ud800b\n"
    assert (tmp_path / "logs" / "debug_log_run_format.txt").read_bytes() == b"fmt\n"


# ---- atomic files: an error mid-write leaves the previous file ----------------------------------------------------


@FAST
@given(old=st.binary(max_size=300), new=st.binary(max_size=300), at=st.integers(0, 300))
def test_error_mid_write_leaves_previous_file(tmp_path_factory, old, new, at):
    """An exception after part of the new content is written: the old file is unchanged and no temporary is left."""
    folder = tmp_path_factory.mktemp("atomic")
    path = folder / "out.bin"
    path.write_bytes(old)
    with pytest.raises(RuntimeError, match="mid-write"), outputs.atomic_writer(str(path), "wb") as f:
        f.write(new[:at])
        f.flush()
        raise RuntimeError("mid-write")
    assert path.read_bytes() == old and sorted(os.listdir(folder)) == ["out.bin"]


def test_training_curves_png_is_atomic(tmp_path, monkeypatch):
    """``plot_training_curves`` (called by the final save): a savefig that fails half way leaves the previous PNG."""
    import matplotlib.figure

    from vlm_r1.plots import plot_training_curves

    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5, "reward": 0.1}, {"step": 2, "loss": 0.4}]}))
    png = tmp_path / "training_curves.png"
    good = b"\x89PNG the previous run's curves"
    png.write_bytes(good)

    def broken(self, fname, **kwargs):
        fname.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken)
    with pytest.raises(OutputError, match="cannot write .*training_curves.png: No space left on device"):
        plot_training_curves(str(state), str(png))
    assert png.read_bytes() == good and sorted(os.listdir(tmp_path)) == ["trainer_state.json", "training_curves.png"]


def test_tidied_tokenizer_config_is_written_whole(tmp_path):
    """A tidied tokenizer config (``restore_stock_processor_class``): exact content, written through outputs. (The
    checkpoint-complete marker's content is checked by tests/test_checkpoint_retention.py; its module imports
    transformers, too slow to load here.)"""
    from vlm_r1.modules.base import restore_stock_processor_class

    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"processor_class": "ImageOnlyX", "name": "é"}))
    restore_stock_processor_class(str(tmp_path), "Qwen2_5_VLProcessor")
    assert (tmp_path / "tokenizer_config.json").read_text(encoding="utf-8") == (
        '{\n  "processor_class": "Qwen2_5_VLProcessor",\n  "name": "é"\n}\n'
    )


# ---- vlm_r1_run.json: one writer, no lost keys --------------------------------------------------------------------


def test_run_info_both_moments_through_one_writer(tmp_path):
    """The run's start (``new_run``: an earlier run's keys dropped) then the final save (``record``: the budget
    merged): the file's keys and text are exactly what they were (indent 2, a final newline, ``str`` for values JSON
    cannot hold), and ``recorded_budget`` reads the budget back."""
    from groundwork.pixel_budget import PixelBudget, record, recorded_budget, update_run_info

    path = tmp_path / "vlm_r1_run.json"
    path.write_text(json.dumps({"stale_task_key": 1, "world_size": 8}))
    budget = PixelBudget(factor=28, min_pixels=3136, max_pixels=12845056, sources={"max_pixels": "flag"})
    assert update_run_info(
        str(tmp_path), {"world_size": 2, "distributed_type": object, "lr": 1e-6}, new_run=True
    ) == str(path)
    assert json.loads(path.read_text()) == {"world_size": 2, "distributed_type": "<class 'object'>", "lr": 1e-6}
    record(str(tmp_path), budget)
    info = json.loads(path.read_text())
    assert list(info) == ["world_size", "distributed_type", "lr", "pixel_budget"]
    assert path.read_text() == json.dumps(info, indent=2, ensure_ascii=False) + "\n"
    assert recorded_budget(str(tmp_path)) == budget
    assert sorted(os.listdir(tmp_path)) == ["vlm_r1_run.json"]  # no lock or temporary file left
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        update_run_info(str(tmp_path), {"lr": float("nan")})
    assert json.loads(path.read_text()) == info  # a refused update leaves the file as it was


def _calls_in(rel: str, function: str, callee: str) -> list[ast.Call]:
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(callee)]


def test_run_info_writer_is_the_only_one():
    """``grpo_jsonl.write_run_info`` (a new run's record) and ``pixel_budget.record`` (the final save) both end in
    ``update_run_info``; no other library file names ``vlm_r1_run.json`` as a string (the constant's one home).
    Checked on the sources (importing ``grpo_jsonl`` loads TRL)."""
    (start,) = _calls_in("vlm_r1/grpo.py", "write_run_info", "update_run_info")
    assert [ast.unparse(k) for k in start.keywords] == ["new_run=True"]
    (final,) = _calls_in("groundwork/pixel_budget.py", "record", "update_run_info")
    assert final.keywords == []
    named = []
    for rel in _library_files():
        with open(os.path.join(REPO, rel), encoding="utf-8") as f:
            if '"vlm_r1_run.json"' in f.read():
                named.append(rel)
    assert named == ["groundwork/pixel_budget.py"]


@FAST
@given(
    keys=st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=6, unique=True),
    writers=st.integers(2, 4),
)
def test_concurrent_run_info_writers_lose_no_key(tmp_path_factory, monkeypatch, keys, writers):
    """Several threads merge disjoint keys into one ``vlm_r1_run.json`` at once: every key of every writer is there.
    (``fsync`` is skipped here: the lock is under test, not the disk.)"""
    from groundwork.pixel_budget import update_run_info

    monkeypatch.setattr(os, "fsync", lambda fd: None)
    folder = str(tmp_path_factory.mktemp("run"))

    def run(w: int) -> None:
        for k in keys:
            update_run_info(folder, {f"{w}:{k}": [w, k]})

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(folder, "vlm_r1_run.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info == {f"{w}:{k}": [w, k] for w in range(writers) for k in keys}
    assert os.listdir(folder) == ["vlm_r1_run.json"]


def test_output_lock_wait(tmp_path):
    """``wait=0`` fails at once naming the holder; ``wait`` > 0 goes on once the holder releases, or fails naming
    the holder and the seconds waited."""
    out = str(tmp_path / "vlm_r1_run.json")
    holder = OutputLock(out).acquire()
    with pytest.raises(OutputError, match=rf"held by pid {os.getpid()}\); wait for it"):
        OutputLock(out).acquire()
    with pytest.raises(OutputError, match=rf"held by pid {os.getpid()} for 0.05 s\)"):
        OutputLock(out, wait=0.05).acquire()
    got, started = [], threading.Event()

    def waiter() -> None:
        started.set()
        with OutputLock(out, wait=30):
            got.append(True)

    t = threading.Thread(target=waiter)
    t.start()
    started.wait()
    holder.release()
    t.join()
    assert got == [True] and os.listdir(tmp_path) == []


# ---- gui-grounding toy: stamps and results ------------------------------------------------------------------------


@FAST
@given(data=st.binary(max_size=60))
def test_toy_stamp_reader_never_raises(tmp_path_factory, data):
    """A stamp file of any bytes is a JSON object or None (redo), never a crash."""
    from gui_grounding.ops.toy import _read_stamp

    path = tmp_path_factory.mktemp("stamp") / "s.done.json"
    path.write_bytes(data)
    got = _read_stamp(str(path))
    assert got is None or isinstance(got, dict)
    assert _read_stamp(str(path) + ".missing") is None


def test_toy_run_stamp_and_results(tmp_path):
    """``_run`` with a malformed stamp reruns the command and writes the stamp; the next call reuses it;
    ``_write_results`` writes results.json / results.md through outputs."""
    from gui_grounding.ops.toy import ToyExperiments, _run

    log = tmp_path / "stage" / "train.log"
    log.parent.mkdir()
    (tmp_path / "stage" / "train.log.done.json").write_bytes(b'{"cmd": ["x"')  # torn stamp
    cmd = [sys.executable, "-c", "print('trained')"]
    seconds = _run(cmd, str(log))
    assert log.read_text() == "trained\n"
    stamp = json.loads((tmp_path / "stage" / "train.log.done.json").read_text())
    assert stamp == {"cmd": cmd, "inputs": None, "seconds": seconds}
    assert _run(["other-python", *cmd[1:]], str(log)) == seconds  # reused: the same command after argv[0]
    exp = ToyExperiments.__new__(ToyExperiments)
    exp.out = str(tmp_path)
    out = exp._write_results("demo", {"accuracy": 12.5, "name": "é"}, "intro", ["| a |", "|---|"])
    saved = json.loads((tmp_path / "demo" / "results.json").read_text(encoding="utf-8"))
    assert saved == {"accuracy": 12.5, "name": "é", "environment": saved["environment"]}
    assert {"code", "torch", "cpu_capability"} <= set(saved["environment"])  # what the bits depend on
    assert (tmp_path / "demo" / "results.md").read_text() == "# toy experiment: demo\n\nintro\n\n| a |\n|---|\n"
    assert sorted(os.listdir(out)) == ["results.json", "results.md"]
