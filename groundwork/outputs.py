"""Safe output files: the one home for how every command writes (GUI-free).

Rules (every ``gui-grounding`` / ``vlm_r1`` command that writes files follows them):

* **checked before any input is read** (:func:`check_outputs`): an ``--out`` that is one of the inputs (the same
  file, through any path or link) is refused; a file output that names an existing folder (or a folder output that
  names an existing file) is refused; the destination folder must exist or be creatable and be writable (probed by
  creating and removing a file there, so a read-only mount or a full quota is found before the work starts);
* **one writer per output** (:class:`OutputLock`): an advisory ``fcntl.flock`` on a lock file beside the output
  (``.NAME.lock``), taken without waiting: a second run writing the same ``--out`` fails at once, naming the holder's
  pid;
* **atomic files** (:func:`atomic_writer`, :func:`write_text`, :func:`write_json`): written under a unique temporary
  name in the destination folder (``tempfile.mkstemp``: two runs never share a temp name), flushed, ``fsync``-ed and
  renamed onto the final name with ``os.replace``; on any error the temporary file is removed, so a reader sees the
  old complete file, the new complete file, or none;
* **resumable outputs and logs** (eval predictions, the ``clean`` detection cache, ``logs.jsonl``, the per-rank batch
  records, the ``DEBUG_MODE`` rollout log) stay appendable (:class:`LineAppender`): each line (or block of whole
  lines) is written with one ``write`` call and flushed while an exclusive ``flock`` on the file itself is held, so
  appenders in several processes or threads never interleave inside a line;
* **live logs** of a child process (:func:`live_log`): the one file written in place while it grows (a reader tails
  it), under the output's lock; whatever marks it complete is written atomically after it;
* **read-modify-write** of a shared JSON record (``vlm_r1_run.json``): under the output's lock taken with ``wait``
  (:class:`OutputLock`), so two writers cannot lose each other's keys;
* **console lines from several processes** (:func:`console_line`): an error or status line that every rank of a
  launch may print at once (torchrun's children share one stderr pipe) is one line written with one ``write`` call of
  at most ``PIPE_BUF`` bytes and flushed, so two ranks' lines never interleave inside a line (``print`` writes the
  text and its newline in two calls, and so does Python's report of ``SystemExit("message")``);
* **summaries last**: callers write their summary (``summary.json``, ``metrics.json``) atomically after every other
  output is in place, so a complete-looking summary never sits beside a truncated output.

Errors are :class:`OutputError` (one line, naming the path); the command-line entry points print it as one line and
exit non-zero.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any


class OutputError(OSError):
    """An output that cannot or must not be written (one line, naming the path)."""


#: POSIX: a write of at most ``PIPE_BUF`` bytes to a pipe is atomic, never interleaved with other writers' data
#: (Linux: 4096; ``pipe(7)``, "PIPE_BUF"). POSIX's minimum, 512, where ``select`` does not say.
CONSOLE_LINE_BYTES = int(getattr(select, "PIPE_BUF", 512))


#: ``str.splitlines``' line boundaries, ``\\r\\n`` counted as one
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: Any, limit_bytes: int = CONSOLE_LINE_BYTES - 1) -> str:
    """``text`` (any object: ``str()`` of it) as one line of at most ``limit_bytes`` UTF-8 bytes: every line break
    (``str.splitlines``' set: ``\\n``, ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028, U+2029)
    becomes one space, an unencodable lone surrogate its ``\\udcXX`` escape, and a longer text is cut at a character
    boundary with a marker naming how many bytes were cut (``... [N more bytes]``). Total: never raises."""
    try:
        raw = text if isinstance(text, str) else str(text)
    except Exception as err:  # noqa: BLE001 - a hostile __str__
        raw = f"<unprintable {type(text).__name__}: {type(err).__name__}>"
    line = _LINE_BREAKS.sub(" ", raw)
    data = line.encode("utf-8", "backslashreplace")
    if len(data) > limit_bytes:
        marker_room = len(f" ... [{len(data)} more bytes]".encode())
        keep = max(0, limit_bytes - marker_room)
        head = data[:keep].decode("utf-8", "ignore")
        cut = len(data) - len(head.encode("utf-8"))
        return f"{head} ... [{cut} more bytes]"
    return data.decode("utf-8")


def console_line(text: Any, stream: IO | None = None) -> str:
    """Write ``text`` as one line (:func:`one_line`: line breaks as spaces, at most ``CONSOLE_LINE_BYTES`` bytes with
    its newline) to ``stream`` (default: ``sys.stderr`` at call time) with one ``write`` call, after flushing what the
    stream held, then flush; returns the line written (without its newline). Lines written so by several processes
    to one pipe or ``O_APPEND`` file never mix inside a line. A stream that cannot be written (closed, a broken pipe)
    is ignored: a console line never turns one error into another."""
    stream = sys.stderr if stream is None else stream
    line = one_line(text)
    if stream is None:  # pythonw, or stderr closed by the embedding process
        return line
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:  # a stream in another encoding (LANG=C: ascii) gets escapes, not an UnicodeEncodeError
        safe = line.encode(encoding, "backslashreplace").decode(encoding)
    except (LookupError, TypeError):  # an unknown codec, or a stream whose encoding is no name
        safe = line
    try:
        stream.flush()
        stream.write(safe + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass
    return line


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


def _probe_writable(folder: str) -> None:
    """Create and remove a file in ``folder`` (``os.access`` is wrong under root, ACLs and read-only mounts)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=folder)
    except OSError as err:
        raise OutputError(err.errno, f"cannot write in {folder}: {err.strerror or err}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _creatable_folder(folder: str, what: str) -> None:
    """``folder`` exists as a folder (created when missing) and is writable."""
    folder = folder or "."
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise OutputError(errno.ENOTDIR, f"{what}: {folder} exists and is not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise OutputError(err.errno, f"{what}: cannot create folder {folder}: {err.strerror or err}") from None
    _probe_writable(folder)


def check_outputs(
    files: Iterable[str] = (), folders: Iterable[str] = (), inputs: Iterable[str] = (), *, what: str = "--out"
) -> None:
    """Refuse outputs that cannot or must not be written, before anything is read.

    Args:
        files: output files (each must not be an existing folder; its folder must be creatable and writable).
        folders: output folders (each must not be an existing file; creatable and writable).
        inputs: input files and folders; no output may be one of them (the same file by ``os.path.samefile``,
            else the same real path). Writing next to the inputs is fine.
        what: the flag named in messages.

    Raises:
        OutputError: the first problem found (one line).
    """
    files, folders, inputs = list(files), list(folders), [i for i in inputs if i]
    for path in [*files, *folders]:
        if not isinstance(path, str) or not path or "\0" in path:
            raise OutputError(errno.EINVAL, f"{what}: {path!r} is not a usable path")
        for source in inputs:
            if os.path.exists(path) and _same_file(path, source) or os.path.realpath(path) == os.path.realpath(source):
                raise OutputError(errno.EEXIST, f"{what} {path} is one of the inputs ({source}); choose another path")
    for path in files:
        if os.path.isdir(path):
            raise OutputError(errno.EISDIR, f"{what} {path} is a folder; name a file")
        _creatable_folder(os.path.dirname(os.path.abspath(path)), what)
        if os.path.exists(path) and not os.access(path, os.W_OK) and os.geteuid() != 0:
            raise OutputError(errno.EACCES, f"{what} {path} exists and is not writable")
    for path in folders:
        if os.path.exists(path) and not os.path.isdir(path):
            raise OutputError(errno.ENOTDIR, f"{what} {path} is a file; name a folder")
        _creatable_folder(path, what)


class OutputLock:
    """An exclusive advisory lock on an output (``fcntl.flock`` on ``.NAME.lock`` beside it, or ``.lock`` inside a
    folder output), taken without waiting.

    Use as a context manager. A second holder fails at once with :class:`OutputError` naming the first holder's pid
    (``wait=0``, for a command's ``--out``: two runs must not share it), or after waiting up to ``wait`` seconds for
    the holder to release (a short read-modify-write such as :func:`groundwork.pixel_budget.update_run_info`, where the
    second writer must go after the first, not fail). The lock file is removed on release (after checking, on
    acquire, that the locked file is still the one at the path, so a release racing an acquire cannot give two
    holders).
    """

    #: seconds between tries while waiting for a holder (``wait`` > 0)
    POLL_S = 0.005

    def __init__(self, output: str, *, folder: bool = False, wait: float = 0.0):
        output = os.path.abspath(output)
        self.output = output
        self.wait = wait
        self.path = (
            os.path.join(output, ".lock")
            if folder
            else os.path.join(os.path.dirname(output), f".{os.path.basename(output)}.lock")
        )
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise OutputError(err.errno, f"cannot create lock file {self.path}: {err.strerror or err}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = ""
                with contextlib.suppress(OSError, ValueError):
                    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(self.POLL_S)
                    continue
                waited = f" for {self.wait:g} s" if self.wait > 0 else ""
                raise OutputError(
                    errno.EBUSY,
                    f"another run is writing {self.output} (lock {self.path} held by pid {holder or '?'}{waited}); "
                    "wait for it to finish or choose another --out",
                ) from None
            try:  # the file we locked must still be the one at the path (a releasing holder unlinks it)
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


@contextlib.contextmanager
def atomic_writer(path: str, mode: str = "w", *, encoding: str | None = "utf-8") -> Iterator[IO]:
    """A file object writing to a unique temporary name beside ``path``; renamed onto ``path`` when the block ends
    without an error, removed otherwise.

    Raises:
        OutputError: the temporary file cannot be created, written, synced or renamed (disk full, read-only).
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise OutputError(err.errno, f"cannot write {path}: {err.strerror or err}") from None
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, **({} if binary else {"encoding": encoding})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and not isinstance(err, OutputError):
            raise OutputError(err.errno, f"cannot write {path}: {err.strerror or err}") from None
        raise


def write_text(path: str, text: str) -> None:
    """``text`` to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path) as f:
        f.write(text)


def write_bytes(path: str, data: bytes) -> None:
    """``data`` to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path, "wb") as f:
        f.write(data)


def write_json(path: str, value: Any, *, indent: int | None = 2) -> None:
    """Strict JSON (no NaN / inf: ``allow_nan=False``) to ``path`` atomically, with a final newline."""
    text = json.dumps(value, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    write_text(path, text)


def write_lines(path: str, lines: Iterable[str]) -> int:
    """Lines (without their newline) to ``path`` atomically; returns the count."""
    n = 0
    with atomic_writer(path) as f:
        for line in lines:
            f.write(line + "\n")
            n += 1
    return n


class LineAppender:
    """An appended output (eval predictions, a detection cache, a training log): whole lines, each :meth:`write` (or
    :meth:`write_block`) one ``write`` call and a flush, made while an exclusive ``fcntl.flock`` on the file itself
    is held (blocking; released right after). So appenders in several processes, or several appenders in one
    process's threads, never interleave inside a line, and a crash or a kill leaves only whole lines (a torn last
    line, from a crash inside ``write``, is what the readers of such files skip). A resumable output also holds its
    :class:`OutputLock` (one run per output); a log shared by several writers (ranks, runs) needs only this.

    A file that does not end with a newline (a torn last line from an earlier crash) gets one first, under the same
    lock (so it is never a writer's line in progress), so the next line starts on its own; with ``cut_torn_tail``
    the torn line is cut off instead (a cache whose unit is then redone).

    Args:
        path: the file (created when missing).
        errors: how text that UTF-8 cannot encode (a lone surrogate) is written: ``"strict"`` (``UnicodeEncodeError``,
            nothing written) or a codec error handler such as ``"backslashreplace"`` (a log that must not stop).
        cut_torn_tail: cut a torn last line (everything after the last newline) instead of ending it.
    """

    #: bytes read per step while looking backwards for the last newline of a torn tail
    TAIL_BLOCK = 65536

    def __init__(self, path: str, *, errors: str = "strict", cut_torn_tail: bool = False):
        import fcntl

        self.path = path
        self.errors = errors
        self._flock = fcntl.flock
        self._lock_ex, self._lock_un = fcntl.LOCK_EX, fcntl.LOCK_UN
        self._thread_lock = threading.Lock()
        try:
            self._f = open(path, "a+b")  # noqa: SIM115 - closed by close()
        except OSError as err:
            raise OutputError(err.errno, f"cannot append to {path}: {err.strerror or err}") from None
        try:
            with self._locked():
                self._f.seek(0, os.SEEK_END)
                if self._f.tell() > 0:
                    self._f.seek(-1, os.SEEK_END)
                    last = self._f.read(1)
                    self._f.seek(0, os.SEEK_END)
                    if last != b"\n" and cut_torn_tail:
                        self._cut_tail()
                    elif last != b"\n":
                        self._f.write(b"\n")
                        self._f.flush()
        except BaseException:
            self._f.close()
            raise

    def _cut_tail(self) -> None:
        """Truncate the file after its last newline (to empty without one), reading backwards in blocks."""
        pos, keep = self._f.seek(0, os.SEEK_END), 0
        while pos > 0:
            start = max(0, pos - self.TAIL_BLOCK)
            self._f.seek(start)
            cut = self._f.read(pos - start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            pos = start
        self._f.truncate(keep)
        self._f.seek(0, os.SEEK_END)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            try:
                self._flock(self._f.fileno(), self._lock_ex)
                try:
                    yield
                finally:
                    self._flock(self._f.fileno(), self._lock_un)
            except OSError as err:
                raise OutputError(err.errno, f"cannot append to {self.path}: {err.strerror or err}") from None

    def _append(self, data: bytes) -> None:
        with self._locked():
            self._f.write(data)
            self._f.flush()

    def write(self, line: str) -> None:
        """One line (no newline inside; it is added)."""
        if "\n" in line or "\r" in line:
            raise ValueError("a line to append holds a line break")
        self._append(line.encode("utf-8", self.errors) + b"\n")

    def write_block(self, text: str) -> None:
        """Several whole lines as one unit (a log entry spanning lines): ``text`` ends with a newline (line breaks
        inside are kept as they are); appended with one ``write``, so no other writer's line lands inside it.
        Empty text writes nothing."""
        if not text:
            return
        if not text.endswith("\n"):
            raise ValueError("a block to append does not end with a newline")
        self._append(text.encode("utf-8", self.errors))

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> LineAppender:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def live_log(path: str) -> Iterator[IO]:
    """A log file written in place while it grows (a child process's ``stdout``, tailed while the child runs): the
    one output not written under a temporary name, because it must be readable before it is complete. Truncated
    when opened, under the path's :class:`OutputLock` (a second writer fails at once, naming the holder). Whatever
    says the work completed (a stamp, a summary) is written atomically after the block ends, so a reader never
    takes a log cut short for a finished one.

    Raises:
        OutputError: the lock is held, or the file cannot be created (one line, naming the path).
    """
    with OutputLock(path):
        try:
            f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as err:
            raise OutputError(err.errno, f"cannot write {path}: {err.strerror or err}") from None
        with f:
            yield f
