"""Console lines that every rank of a launch prints at once (``groundwork.outputs.console_line``).

torchrun's children share one stderr pipe. ``print(..., file=sys.stderr)`` writes the text and its newline in two
``write`` calls (stderr is write-through), and so does Python's report of ``SystemExit("message")``: two ranks'
``PREFLIGHT FAILED: ...`` lines came out as one line followed by a bare newline (CI of stop 37,
``tests/test_preflight.py::test_training_cli_stops_on_a_failed_preflight``). A console line is one ``write`` of at most
``PIPE_BUF`` bytes, which POSIX keeps whole on a pipe; these tests pin that rule, its text transformation, the training
entry points' error path that uses it, and the preflight's bounded rank lists.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundwork.outputs import CONSOLE_LINE_BYTES, console_line, one_line
from vlm_r1.launch import input_errors

#: every character ``str.splitlines`` breaks on (Python docs, "str.splitlines")
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


class _CountingStream(io.StringIO):
    """A text stream that records each ``write`` call and each flush, in order."""

    def __init__(self, encoding: str = "utf-8"):
        super().__init__()
        self.calls: list[str] = []
        self._encoding = encoding

    @property
    def encoding(self):  # StringIO's is None
        return self._encoding

    def write(self, s):
        self.calls.append(s)
        return super().write(s)

    def flush(self):
        self.calls.append("<flush>")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=6000) | st.text(alphabet="ab\n\r\u2028 é", max_size=50))
@example("x" * 10_000)
@example("\ud800 lone surrogate")
@example("é" * 3000)
def test_one_line_is_one_bounded_line(text):
    line = one_line(text)
    assert not any(c in line for c in BREAKS)
    data = line.encode("utf-8")  # never raises: surrogates were escaped
    assert len(data) <= CONSOLE_LINE_BYTES - 1
    flat = "".join(" " if c in BREAKS else c for c in text.replace("\r\n", "\n"))
    if len(flat.encode("utf-8", "backslashreplace")) <= CONSOLE_LINE_BYTES - 1:
        assert line == flat.encode("utf-8", "backslashreplace").decode("utf-8")  # nothing lost but the breaks
    else:
        head, marker = line.rsplit(" ... [", 1)
        cut = int(marker.removesuffix(" more bytes]"))
        whole = flat.encode("utf-8", "backslashreplace")
        assert whole.startswith(head.encode("utf-8")) and cut == len(whole) - len(head.encode("utf-8"))


def test_one_line_exact_values():
    assert one_line("a\nb\r\nc\u2028d") == "a b c d"
    assert one_line("bad \udcff byte") == "bad \\udcff byte"
    assert one_line(ValueError("x\ny")) == "x y"
    # 4095 bytes at most; the marker's room is reserved at the uncut size's digits (" ... [5000 more bytes]": 22)
    assert one_line("y" * 5000) == "y" * 4073 + " ... [927 more bytes]"
    assert one_line("é" * 3000) == "é" * 2036 + " ... [1928 more bytes]"  # cut between characters, not inside one


class _Hostile:
    def __str__(self):
        raise RuntimeError("no")


def test_console_line_is_one_write_after_a_flush():
    stream = _CountingStream()
    assert console_line("PREFLIGHT FAILED: rank 1\n(host b)", stream) == "PREFLIGHT FAILED: rank 1 (host b)"
    assert stream.calls == ["<flush>", "PREFLIGHT FAILED: rank 1 (host b)\n", "<flush>"]
    ascii_stream = _CountingStream("ascii")
    console_line("héllo", ascii_stream)
    assert ascii_stream.calls[1] == "h\\xe9llo\n"
    assert console_line(_Hostile(), stream) == "<unprintable _Hostile: RuntimeError>"
    assert console_line(10**5000, stream) == "<unprintable int: ValueError>"  # str() refuses > 4300 digits
    odd = _CountingStream()
    odd._encoding = 42  # a stream whose encoding is no codec name
    assert console_line("odd é", odd) == "odd é" and odd.calls[1] == "odd é\n"
    closed = io.StringIO()
    closed.close()
    assert console_line("still total", closed) == "still total"  # a closed stream is not a second error


def test_console_line_defaults_to_stderr_at_call_time(capsys):
    console_line("one\ntwo")
    assert capsys.readouterr().err == "one two\n"


_WRITER = """
import os, sys
from groundwork.outputs import console_line
tag, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.read(go, 1)  # both processes start writing together
for i in range(n):
    console_line(f"{tag}:{i}:" + tag * (4000 if i % 50 == 0 else 10 + (i * 397) % 300))
"""


def test_two_processes_on_one_pipe_never_mix_inside_a_line():
    """Two processes write 5,000 lines each (10 to 310 bytes, every 50th one 4,000+), started together, as fast as they can to one pipe, as
    torchrun's children share one stderr: every line arrives whole. (The same writers with ``print(..., file=
    sys.stderr, flush=True)`` mix lines in most runs.)"""
    n = 5000
    read_end, write_end = os.pipe()
    go_read, go_write = os.pipe()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, tag, str(n), str(go_read)], stderr=write_end, env=env, pass_fds=(go_read,)
        )
        for tag in ("a", "b")
    ]
    os.close(write_end)
    os.close(go_read)
    os.write(go_write, b"go")
    os.close(go_write)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = data.decode("utf-8").split("\n")
    assert lines.pop() == ""
    expected = {f"{tag}:{i}:" + tag * (4000 if i % 50 == 0 else 10 + (i * 397) % 300) for tag in "ab" for i in range(n)}
    assert len(lines) == 2 * n and set(lines) == expected


# ---- the training entry points' error path ---------------------------------------------------------------------------
def test_input_errors_writes_a_system_exit_message_as_one_line(capsys):
    with pytest.raises(SystemExit) as info, input_errors("vlm_r1.grpo_jsonl"):
        raise SystemExit("--preflight 'maybe':\nchoose one of auto, on, off")
    assert info.value.code == 1  # Python's own status for SystemExit("message")
    assert capsys.readouterr().err == "--preflight 'maybe': choose one of auto, on, off\n"


@pytest.mark.parametrize("code", [0, 2, None])
def test_input_errors_keeps_a_numeric_exit(code, capsys):
    with pytest.raises(SystemExit) as info, input_errors("vlm_r1.sft"):
        raise SystemExit(code)
    assert info.value.code == code
    assert capsys.readouterr().err == ""


def test_input_errors_input_error_line(capsys):
    with pytest.raises(SystemExit) as info, input_errors("gui_grounding.train"):
        raise ValueError("data file x.jsonl:\n line 3 is not JSON")
    assert info.value.code == 2
    assert capsys.readouterr().err == "gui_grounding.train: error: ValueError: data file x.jsonl: line 3 is not JSON\n"


# ---- the preflight's messages name at most NAMED_RANKS ranks in full --------------------------------------------------
def test_preflight_names_eight_ranks_then_numbers(monkeypatch):
    from vlm_r1 import preflight as pf

    env = {"RANK": "0", "WORLD_SIZE": "512", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "h0"}
    for key, value in {**env, "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    run = pf._Run(timeout=3.0, backend="gloo")
    run.records = {r: {"host": f"gpu-{r // 8}", "node": r // 8, "local_rank": r % 8} for r in range(4)}
    assert run.names([1, 2]) == "rank 1 (host gpu-0, node 0, local rank 1); rank 2 (host gpu-0, node 0, local rank 2)"
    text = run.names(list(range(3, 512)))
    assert text.startswith("rank 3 (host gpu-0, node 0, local rank 3); rank 4 (host unknown: it never reached")
    assert text.count("; rank ") == pf.NAMED_RANKS - 1
    assert text.endswith("; and 501 more: rank(s) 11-511")
    assert run.names(list(range(3, 512)), lambda r: f"r{r}").startswith("r3; r4; r5; r6; r7; r8; r9; r10; and 501")


# ---- by structure: the code every rank runs writes stderr lines only through console_line (or logging) ---------------
#: the packages whose code runs on every rank of a launch (the core, the GTA1 training entry point)
PER_RANK = ("vlm_r1", "gui_grounding/training")
#: (file, line text) -> why it may print to stderr itself; a stale entry fails the scan too
ALLOWED_STDERR = {
    ("gui_grounding/training/gta1.py", 'print(f"[dry-run] {key:<{width}} {value}", file=sys.stderr)'): (
        "--dry_run prints the resolved objective from one process and exits before any launch"
    ),
}


def stderr_writes(source: str) -> list[tuple[int, str]]:
    """``[(line, text)]`` of each ``print(..., file=sys.stderr)`` and ``sys.stderr.write(...)`` call in ``source``."""
    import ast

    from tests.helpers.ast_scan import dotted

    out = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        to_stderr = name == ("print",) and any(
            k.arg == "file" and dotted(k.value)[-1:] == ("stderr",) for k in node.keywords
        )
        if to_stderr or name[-2:] == ("stderr", "write"):
            out.append((node.lineno, lines[node.lineno - 1].strip()))
    return out


def test_per_rank_code_writes_stderr_lines_through_console_line():
    from tests.helpers.paths import REPO

    found = {}
    for package in PER_RANK:
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, REPO)
                    with open(path, encoding="utf-8") as f:
                        for line, text in stderr_writes(f.read()):
                            found[(rel, text)] = line
    bypasses = [f"{rel}:{line}: {text}" for (rel, text), line in found.items() if (rel, text) not in ALLOWED_STDERR]
    assert not bypasses, "use groundwork.outputs.console_line:\n" + "\n".join(bypasses)
    assert set(ALLOWED_STDERR) <= set(found), "stale ALLOWED_STDERR entries"


def test_the_stderr_scan_sees_both_forms():
    source = 'import sys\nprint("x", file=sys.stderr, flush=True)\nsys.stderr.write("y\\n")\nprint("z")\n'
    assert [line for line, _ in stderr_writes(source)] == [2, 3]
