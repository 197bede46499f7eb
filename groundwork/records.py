"""The record framing and side files: reading data files (JSON / JSONL in every framing, record by record, with
``file:line`` references; duplicate keys and non-JSON containers named) and user side files (recipes, DeepSpeed JSON,
calibration, run info) by one rule each.

``iter_records`` is used by every reader of user data (``vlm_r1.tasks``, ``gui_grounding.data.schema``, ``convert``,
the benchmark readers, predictions, ``compare``) so bad lines are reported the same way everywhere; the datasets and
mixtures built from records are :mod:`vlm_r1.data`.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from typing import Any

from groundwork.validate import short_repr

ERROR_TEXT_CHARS = 1 << 20  # a RecordError keeps at most this much of the record's text


class RecordError(ValueError):
    """An unparseable record; ``ref`` names it as ``file:line`` (JSONL, 1-based) or ``file:[index]`` (JSON).

    ``text``: the record's own text as the reader saw it (what the error covers; at most ``ERROR_TEXT_CHARS``
    characters, or None when there is none, e.g. a compressed file), for callers that recover something from it
    (``gui_grounding.eval.predictions`` reads a sample_id out of it). ``reason``: the reject reason callers report
    (``unparseable_record``; ``duplicate_key`` for an object that holds a key twice, see :class:`DuplicateKeyError`)."""

    def __init__(self, ref: str, message: str, text: str | None = None, reason: str = "unparseable_record"):
        self.ref, self.message, self.reason = ref, message, reason
        self.text = text[:ERROR_TEXT_CHARS] if text is not None else None
        super().__init__(f"{ref}: {message}")


class DataFileError(RecordError):
    """A data file that is not JSON text as a whole (compressed, an archive, parquet, UTF-16/32, not a regular file:
    :func:`container_problem`): raised by :func:`iter_records` before anything is read, one error for the file
    (``str``: ``FILE: the file is gzip-compressed (decompress it first: ...), not JSON/JSONL text``), never a record.
    ``ref`` is the path, ``message`` the problem."""


class DuplicateKeyError(ValueError):
    """A JSON object or YAML mapping that holds the same key twice (``key``: the key). Python's ``json`` and PyYAML
    keep the last value without a word (RFC 8259 section 4 leaves it to the reader: "the names within an object
    SHOULD be unique"), so one sample's answer could be scored for another, a record get another box, a mixture
    another sampling strategy; every reader of this module refuses it (``duplicate_key``)."""

    def __init__(self, key: Any, message: str | None = None):
        self.key = key
        super().__init__(message or f"duplicate key {short_repr(key)}")


def unique_object(pairs: list, _dict=dict, _len=len) -> dict:
    """``object_pairs_hook`` of every JSON decoder here: the object of ``pairs``, or :class:`DuplicateKeyError`
    naming the first key given twice (at any depth: the hook sees every object). Called once per JSON object read
    (the hot path of every reader): builtins bound as defaults, no global lookups."""
    obj = _dict(pairs)
    if _len(obj) != _len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


def _reason(err: BaseException) -> str:
    return "duplicate_key" if isinstance(err, DuplicateKeyError) else "unparseable_record"


# bytes that are not UTF-8 come back from errors="surrogateescape" as U+DC80..U+DCFF (valid UTF-8 never decodes to them)
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (NaN and Infinity are not JSON)")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number {token[:40]} is out of range for a float")
    return value


def _loads(text: str, ref: str, decoder: json.JSONDecoder | None = None) -> Any:
    """The JSON value in ``text``, or the :class:`RecordError` saying why there is none (never raises on content).

    Strict JSON by default: ``NaN``/``Infinity`` tokens and floats beyond the float range (``1e999``) are errors,
    like bad syntax (``decoder``: :data:`_LAX_DECODER` reads them as Python's json does, for the caller's value
    checks)."""
    if _UNDECODABLE.search(text):
        return RecordError(ref, "not valid UTF-8", text)
    try:
        return (decoder or _DECODER).decode(text)
    except RecursionError:
        return RecordError(ref, "invalid JSON: nested too deeply", text)
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, a key twice, ints of more than 4300 digits
        return RecordError(ref, f"invalid JSON: {str(err)[:200]}", text, _reason(err))


def _record(value: Any, ref: str, text: str | None = None) -> dict | RecordError:
    """``value`` when it is an object; a value of another type is the error ``not a JSON object``."""
    if isinstance(value, (dict, RecordError)):
        return value
    return RecordError(ref, "not a JSON object", text)


# one token of a JSON text for splitting a list into its elements: a complete string, a bracket or a comma, or a lone
# quote (a string not finished in the text read so far)
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]|"', re.S)
_CLOSER = {"]": "[", "}": "{"}
_WHITESPACE = re.compile(r"[ \t\r\n]*")  # JSON's whitespace (RFC 8259 section 2): raw CRs are whitespace, not breaks
JSON_LIST_CHUNK_CHARS = 1 << 20
MAX_DOCUMENT_CHARS = 1 << 28  # one JSON document or line (not a list element) larger than this is an error
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float, object_pairs_hook=unique_object)
# NaN / Infinity / 1e999 read as floats (Python's json.load); a key twice is still an error
_LAX_DECODER = json.JSONDecoder(object_pairs_hook=unique_object)
_SYNTAX_DECODER = json.JSONDecoder()  # only finds where a document that is valid syntax ends


def strict_loads(text: str) -> Any:
    """One JSON value, strictly (no ``NaN`` / ``Infinity`` tokens, no float beyond the float range, no object
    holding a key twice).

    Raises:
        ValueError: not such JSON (``json.JSONDecodeError`` and :class:`DuplicateKeyError` included);
        RecursionError: nested too deeply.
    """
    return _DECODER.decode(text)


def lax_loads(text: str) -> Any:
    """``json.loads`` (``NaN`` / ``Infinity`` / ``1e999`` as floats, for callers whose value checks reject them with
    their own reason), except that an object holding a key twice is an error: JSON embedded in a record's field
    (a ``solution`` or ``conversations`` string) follows the record's own duplicate-key rule.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``, :class:`DuplicateKeyError`); RecursionError: nested too deeply.
    """
    return _LAX_DECODER.decode(text)


# leading bytes of files that are not JSON text: named, so the reason says what the file is
_CONTAINERS = (
    (b"\x1f\x8b", "gzip-compressed (decompress it first: gunzip -k FILE)"),
    (b"BZh", "bzip2-compressed (decompress it first: bunzip2 -k FILE)"),
    (b"\xfd7zXZ\x00", "xz-compressed (decompress it first: unxz -k FILE)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it first: unzstd FILE)"),
    (b"PK\x03\x04", "a zip archive (extract it first)"),
    (b"PAR1", "a parquet file (give it a .parquet name; `gui-grounding convert` reads parquet)"),
    (b"\xff\xfe\x00\x00", "UTF-32 text (convert it to UTF-8)"),
    (b"\x00\x00\xfe\xff", "UTF-32 text (convert it to UTF-8)"),
    (b"\xff\xfe", "UTF-16 text (convert it to UTF-8: iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", "UTF-16 text (convert it to UTF-8: iconv -f UTF-16 -t UTF-8)"),
)


def container_problem(path: str, expected: str = "JSON/JSONL text") -> str | None:
    """Why ``path`` is not ``expected`` text (not a regular file: a FIFO, ``/dev/zero``, a folder; compressed, an
    archive, parquet, UTF-16/32), or None. Reads 8 bytes; never blocks (the file is opened non-blocking and checked
    again on the open descriptor, so a FIFO put in its place after the first check is refused too)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file (a folder, FIFO, device or socket cannot be read as data)"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "not a regular file (a folder, FIFO, device or socket cannot be read as data)"
            head = f.read(8)
    except (OSError, ValueError) as err:  # ValueError: a path holding a NUL byte
        return f"cannot read: {getattr(err, 'strerror', None) or err}"
    for magic, what in _CONTAINERS:
        if head.startswith(magic):
            return f"the file is {what}, not {expected}"
    return None


def check_data_file(path: str) -> None:
    """The framing rule for a whole file, one error per file: every reader of JSON/JSONL data (through
    :func:`iter_records`: the training loaders, ``convert``, the benchmark readers, predictions) names a file that is
    not JSON text (:func:`container_problem`) in the same words.

    Raises:
        DataFileError: ``FILE: <container_problem(FILE)>``.
    """
    problem = container_problem(path)
    if problem is not None:
        raise DataFileError(path, problem)


SIDE_FILE_BYTES = 64 << 20  # a side file (config, calibration, run info) larger than this is refused unread


def read_side_file(path: str, what: str, *, max_bytes: int = SIDE_FILE_BYTES, expected: str = "JSON text") -> str:
    """The UTF-8 text of a side file named by a user (a recipe or data-config YAML, a DeepSpeed JSON, a calibration
    or run-info file, a checkpoint's config files): the one reader of such files, so none of them reads ``/dev/zero``
    until memory runs out or hangs on a FIFO (the regular-file rule of :func:`container_problem`: a FIFO, device,
    folder, compressed file or UTF-16 text is refused before anything is read), and none holds more than ``max_bytes``
    (checked on the open file, before reading, and again while reading a file that grows). A leading byte-order mark
    is dropped.

    Raises:
        ValueError: one line, ``"{what} {path}: {why}"`` (missing, not a regular file, too large, not UTF-8).
    """
    problem = container_problem(path, expected)
    if problem is not None:
        raise ValueError(f"{what} {path}: {problem}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{what} {path}: not a regular file (a folder, FIFO, device or socket)")
            if st.st_size > max_bytes:
                raise ValueError(f"{what} {path}: {st.st_size:,} bytes, more than the {max_bytes:,}-byte limit")
            data = f.read(max_bytes + 1)
    except OSError as err:
        raise ValueError(f"{what} {path}: cannot read: {err.strerror or err}") from None
    if len(data) > max_bytes:
        raise ValueError(f"{what} {path}: more than the {max_bytes:,}-byte limit (the file grew while read)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {path}: not valid UTF-8 (byte {err.start})") from None


def load_json_file(path: str, what: str, *, max_bytes: int = SIDE_FILE_BYTES, allow_nan: bool = False) -> Any:
    """The one JSON value of a side file (:func:`read_side_file`), strictly: no object holding a key twice (any
    depth), no ``NaN`` / ``Infinity`` unless ``allow_nan`` (a file written by ``json.dump`` with its default
    ``allow_nan=True``, such as transformers' ``trainer_state.json``), nothing after the value.

    Raises:
        ValueError: one line naming ``what``, the file and the problem; :class:`DuplicateKeyError` (a ValueError)
            for a key twice (``duplicate key 'K'``).
    """
    text = read_side_file(path, what, max_bytes=max_bytes)
    try:
        return (_LAX_DECODER if allow_nan else _DECODER).decode(text)
    except RecursionError:
        raise ValueError(f"{what} {path}: invalid JSON: nested too deeply") from None
    except DuplicateKeyError as err:
        raise DuplicateKeyError(err.key, f"{what} {path}: invalid JSON: {err}") from None
    except ValueError as err:
        raise ValueError(f"{what} {path}: invalid JSON: {str(err)[:200]}") from None


_YAML_LOADER = None


def _strict_yaml_loader() -> type:
    """PyYAML's ``SafeLoader`` refusing a mapping that holds a key twice (:class:`DuplicateKeyError`, at any depth;
    keys compared as loaded values, so ``1`` and ``"1"`` differ and ``yes``/``true`` are one key; the error names the key as written). Merge keys
    (``<<: *base``) still override as YAML 1.1 says: only keys written in the mapping itself are compared."""
    global _YAML_LOADER
    if _YAML_LOADER is None:
        import yaml

        class StrictLoader(yaml.SafeLoader):
            def compose_mapping_node(self, anchor):
                node = super().compose_mapping_node(anchor)
                seen = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node)
                    try:
                        fresh = key not in seen
                    except TypeError:  # unhashable: SafeLoader refuses it later
                        continue
                    if not fresh:
                        line = key_node.start_mark.line + 1
                        raise DuplicateKeyError(
                            key, f"duplicate key {short_repr(key_node.value)} (line {line})"
                        )  # as written: `no` is False
                    seen.add(key)
                return node

        _YAML_LOADER = StrictLoader
    return _YAML_LOADER


def load_yaml_file(path: str, what: str, *, max_bytes: int = SIDE_FILE_BYTES) -> Any:
    """The YAML document of a side file (:func:`read_side_file`), loaded safely (``yaml.SafeLoader``) and strictly:
    a mapping holding a key twice is an error naming the key and its line (PyYAML keeps the last value silently).

    Raises:
        ValueError: one line naming ``what``, the file and the problem; :class:`DuplicateKeyError` (a ValueError)
            for a key twice (``duplicate key 'K' (line N)``).
    """
    import yaml

    text = read_side_file(path, what, max_bytes=max_bytes, expected="YAML text")
    try:
        return yaml.load(text, Loader=_strict_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
    except DuplicateKeyError as err:
        raise DuplicateKeyError(err.key, f"{what} {path}: {err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{what} {path}: invalid YAML: {' '.join(str(err).split())[:300]}") from None
    except RecursionError:
        raise ValueError(f"{what} {path}: invalid YAML: nested too deeply") from None


class _Text:
    """A text read in chunks, with line numbers. Lines are counted by ``\n`` (a CRLF ending counts once; a raw CR
    inside a line is JSON whitespace and counts for nothing), or by ``\r`` in a file whose first chunk holds CRs and
    no ``\n`` (a classic Mac text file: its lines end in CR). ``line_at(pos)`` is the 1-based line of ``buf[pos]``
    (positions only move forward). ``undecodable``: some text read holds bytes that were not UTF-8 (checked once per
    chunk, so readers look for them per record only then)."""

    def __init__(self, chunks: Iterable[str]):
        self.it, self.buf, self.eof = iter(chunks), "", False
        self.nl, self.line, self.counted = None, 1, 0
        self.cut_in_line = 0  # characters of buf's first line dropped by compact() (a line longer than a chunk)
        self.undecodable = False

    def more(self, at_least: int = 0) -> bool:
        """Append chunks (at least ``at_least`` characters when available); False at the end of the text."""
        got = 0
        while True:
            piece = next(self.it, None)
            if piece is None:
                self.eof = True
                return got > 0
            if self.nl is None:
                self.nl = "\r" if "\r" in piece and "\n" not in piece else "\n"
            self.buf += piece
            self.undecodable = self.undecodable or _UNDECODABLE.search(piece) is not None
            got += len(piece)
            if got >= at_least:
                return True

    def line_at(self, pos: int) -> int:
        if pos > self.counted:
            self.line += self.buf.count(self.nl or "\n", self.counted, pos)
            self.counted = pos
        return self.line

    def column(self, pos: int) -> int:
        start = self.buf.rfind(self.nl or "\n", 0, pos)
        return pos - start + (self.cut_in_line if start < 0 else 0)

    def compact(self, pos: int) -> int:
        """Drop the text before the line holding ``pos`` (once it is large), or before ``pos`` itself when that line
        is longer than a chunk (a JSON list written on one line, as ``json.dump`` writes it: memory stays one chunk
        plus the current element); returns ``pos`` in the new buffer."""
        if pos < JSON_LIST_CHUNK_CHARS:
            return pos
        cut = self.buf.rfind(self.nl or "\n", 0, pos) + 1
        if cut <= 0:
            cut = pos
            self.cut_in_line += cut
        else:
            self.cut_in_line = 0
        self.line_at(cut)
        self.buf = self.buf[cut:]
        self.counted -= cut
        return pos - cut

    def line_end(self, pos: int) -> int:
        """The position of the line break after ``pos`` (reading on as needed), the end of the text, or -1 when the
        line is longer than ``MAX_DOCUMENT_CHARS`` (see :meth:`skip_line`)."""
        while True:
            end = self.buf.find(self.nl or "\n", pos)
            if (end if end >= 0 else len(self.buf)) - pos > MAX_DOCUMENT_CHARS:
                return -1
            if end >= 0 or self.eof:
                return end if end >= 0 else len(self.buf)
            if not self.more():
                return len(self.buf)

    def skip_line(self, pos: int) -> int:
        """Discard the text from ``pos`` to the next line break without keeping it (a line too long to hold);
        returns the position of the break (or the end of the text)."""
        nl = self.nl or "\n"
        while True:
            end = self.buf.find(nl, pos)
            if end >= 0 or (self.eof and not self.more()):
                return end if end >= 0 else len(self.buf)
            self.buf, pos, self.counted = self.buf[:pos], pos, min(self.counted, pos)  # drop the unfinished line
            if not self.more():
                return len(self.buf)

    def skip_whitespace(self, pos: int) -> int:
        """The first non-whitespace position at or after ``pos`` (reading on as needed); ``len(buf)`` at the end."""
        while True:
            pos = _WHITESPACE.match(self.buf, pos).end()
            if pos < len(self.buf) or not self.more():
                return pos


_UNREAD = object()  # an element of _list_elements that was split, not decoded
_JSON_SPACES = frozenset({" ", "\t", "\r", "\n", ""})  # "" : the end of the text read so far (the slow path reads on)
_NOT_SPACE_AFTER_ONE = frozenset({"{", "[", '"', " "})  # starts the fast check of _list_elements skips regex for
_SEPARATORS = frozenset({",", "]"})


def _list_elements(text: _Text, pos: int, decoder: json.JSONDecoder | None = None) -> Iterator[tuple[str, Any]]:
    """The text of each element of the JSON list whose ``[`` is at ``text.buf[pos]``, read incrementally: a lexical
    scan (strings, brackets, commas), so an element that does not parse (NaN, a huge integer, bad syntax, nesting
    100k levels deep, a key twice) is one piece of text and the elements after it are still found. A closing bracket
    that does not match the innermost open one closes up to the nearest matching one within the element
    (``{"a": [1}`` ends at its ``}``), else it stays inside the element as a stray. An unterminated list makes the
    rest one element. Yields ``(element text, value)`` (the text is None for a decoded object); after the last element ``text.end`` is set to the position
    just past the list (the caller goes on reading documents from there). Memory: the current element.

    ``value`` is :data:`_UNREAD` unless ``decoder`` is given: then each element is first decoded where it starts (one
    C call: the fast path for good elements); an element that the decoder refuses, that is not followed by ``,`` or
    ``]`` within the text read so far, or that holds bytes that are not UTF-8, is split lexically as above (value
    :data:`_UNREAD`; the caller decodes the text and reports its error), so both paths give the same records.

    Each element is one step: the fast path (inline: it is the hot path of every JSON file's list; tried once per
    element, never per chunk read), else :func:`_split_element` (the lexical scan); ``text.end`` is set before each
    yield."""
    scan = decoder.scan_once if decoder is not None else None
    start, first = pos + 1, True
    while True:
        if scan is not None:  # the fast path, inline (the hot path of every JSON file's list)
            buf = text.buf
            c = buf[start : start + 1]  # most elements start at once or after one space (json.dump's ", ")
            if c in _NOT_SPACE_AFTER_ONE:
                p = start + 1 if c == " " and buf[start + 1 : start + 2] not in _JSON_SPACES else start
            else:
                p = _WHITESPACE.match(buf, start).end()
            try:
                value, end = scan(buf, p)  # raw_decode without its Python frame
            except (StopIteration, ValueError, RecursionError):
                end = -1
            if end >= 0:
                q = end if buf[end : end + 1] in _SEPARATORS else _WHITESPACE.match(buf, end).end()
                sep = buf[q : q + 1]
                if sep in _SEPARATORS and not (text.undecodable and _UNDECODABLE.search(buf, p, end)):
                    text.end = start = q + 1
                    yield (None if type(value) is dict else buf[p:end]), value
                    if sep == "]":
                        return
                    first = False
                    continue
        piece, end, closed = _split_element(text, start, first)
        text.end = end
        if piece is not None:
            yield piece, _UNREAD
        if closed:
            return
        start, first = end, False


def _split_element(text: _Text, start: int, first: bool) -> tuple[str | None, int, bool]:
    """The lexical scan of :func:`_list_elements` for the element at ``text.buf[start]``, reading on as needed:
    ``(its text, position past its separator, whether the list ended there)``. The text is None for the empty
    "element" of an empty list (``[]``, ``[ ]``: ``first`` and nothing before the ``]`` or the end of the text); an
    unterminated list makes the rest of the text the element. Positions are in ``text.buf`` as it is on return (it
    may have been compacted). At an element's start only the list's ``[`` is open (a comma ends an element only
    there)."""
    stack, pos = ["["], start
    while True:
        m = _TOKEN.search(text.buf, pos)
        if m is None or m.group() == '"':
            if not text.eof:  # need more text: keep the element, read on
                cut = start if start < len(text.buf) else pos
                shift = cut - text.compact(cut)
                pos, start = pos - shift, start - shift
                text.more()
                continue
            piece = text.buf[start:]  # unterminated list: the rest is one (bad) element
            return (piece if piece.strip() or not first else None), len(text.buf), True
        tok = m.group()
        pos = m.end()
        if tok[0] == '"':
            continue
        if tok in "[{":
            stack.append(tok)
        elif tok in _CLOSER:
            if len(stack) > 1:  # inside an element: close up to the innermost matching opener, if any
                _close_to(stack, _CLOSER[tok])
            elif tok == "]":  # the list is closed
                piece = text.buf[start : m.start()]
                return (piece if piece.strip() or not first else None), pos, True
        elif len(stack) == 1:  # a comma between top-level elements
            return text.buf[start : m.start()], pos, False


def _close_to(stack: list[str], opener: str) -> None:
    """Close the brackets of ``stack`` (an element's, above the list's ``[``) up to the innermost ``opener`` among
    the last 1000; a closer with no such opener is a stray and changes nothing (it stays part of the broken element)."""
    inner = next((i for i in range(len(stack) - 1, max(len(stack) - 1000, 0), -1) if stack[i] == opener), None)
    if inner is not None:
        del stack[inner:]


def split_json_list(chunks: Iterable[str]) -> Iterator[str]:
    """The text of each top-level element of a JSON list given as consecutive pieces of text, read incrementally
    (the lexical split of :func:`iter_records`; text after the list's closing bracket is not looked at).

    Raises:
        ValueError: the text does not start with ``[`` (not a JSON list).
    """
    text = _Text(chunks)
    pos = text.skip_whitespace(0)
    if pos >= len(text.buf) or text.buf[pos] != "[":
        raise ValueError("not a JSON list (the text does not start with '[')")
    for piece, _ in _list_elements(text, pos):
        yield piece


def _read_chunks(f, size: int | None = None) -> Iterator[str]:
    while True:
        piece = f.read(size or JSON_LIST_CHUNK_CHARS)
        if not piece:
            return
        yield piece


def _documents(
    path: str, text: _Text, start: int, stream_first_list: bool, decoder: json.JSONDecoder
) -> Iterator[tuple[str, int, dict | RecordError]]:
    """Every record of a JSON text (see :func:`iter_records`), document after document: a list that opens the text
    streamed element by element (:func:`_list_elements`, :func:`_element_record`), a line longer than ``MAX_DOCUMENT_CHARS`` one error read
    past, any other document decoded whole (:func:`_decode_document`), a list of records split into its elements."""
    index, doc, pos, last_line, wasted, read = 0, 0, 0, 0, 0, 0
    while True:
        pos = text.skip_whitespace(pos)
        if pos >= len(text.buf):
            return
        size = len(text.buf)
        pos = text.compact(pos)
        read += size - len(text.buf)
        line = text.line_at(pos)
        here = f"{path}:{line}" if line != last_line else f"{path}:{line}:{text.column(pos)}"
        last_line = line
        if text.buf[pos] == "[" and doc == 0 and stream_first_list:  # a JSON file's list, streamed element by element
            for k, (piece, value) in enumerate(_list_elements(text, pos, decoder)):
                if index >= start:
                    ref = f"{path}:[{k}]"
                    yield ref, index, value if type(value) is dict else _element_record(piece, value, ref, decoder)
                index += 1
            pos = text.end
            last_line = text.line_at(pos)
            doc += 1
            continue
        eol = text.line_end(pos)
        if eol < 0:  # a line longer than any record: one error, read past without holding it
            if index >= start:
                yield here, index, RecordError(here, f"a line of more than {MAX_DOCUMENT_CHARS:,} characters")
            index += 1
            doc += 1
            pos = text.skip_line(pos)
            continue
        value, end, waste = _decode_document(text, pos, eol, here, decoder, wasted, read)
        wasted += waste
        if isinstance(value, list) and any(isinstance(item, dict) for item in value):  # a list of records
            for k, item in enumerate(value):
                if index >= start:
                    ref = f"{here}[{k}]"
                    yield ref, index, _record(item, ref)
                index += 1
        else:
            if index >= start:
                yield here, index, _record(value, here, text.buf[pos:end])
            index += 1
        doc += 1
        pos = end


def _element_record(piece: str, value: Any, ref: str, decoder: json.JSONDecoder) -> dict | RecordError:
    """The record of a streamed list's element that is not a decoded object (:func:`_list_elements`): an element
    split but not decoded (:data:`_UNREAD`) is decoded here (an empty one is the error ``invalid JSON: empty list
    element``); a value that is not an object is the error ``not a JSON object``."""
    if value is _UNREAD:
        value = (
            _loads(piece, ref, decoder)
            if piece.strip()
            else RecordError(ref, "invalid JSON: empty list element", piece)
        )
    return _record(value, ref, piece)


def _decode_document(
    text: _Text, pos: int, eol: int, here: str, decoder: json.JSONDecoder, wasted: int, read: int
) -> tuple[Any, int, int]:
    """The document at ``text.buf[pos]`` (its line ends at ``eol``) as ``(value or RecordError, end, wasted)``.

    A document that fails at the end of the text read so far is read on (it may span several lines, up to
    ``MAX_DOCUMENT_CHARS``); one that does not parse is an error covering the rest of its line (or, when it is valid
    syntax refused for its values, all of it: :func:`_syntax_end`). ``wasted``: the text parsed past its line by a
    document that failed; the caller sums it (``wasted`` so far, ``read``: the characters dropped from the buffer
    so far), and once the sum is past its budget (four times the text read plus 16 Mi characters) a document is
    decoded from its line alone, so lines that each open a document to the end of the file cannot make reading
    quadratic."""
    while True:
        buf = text.buf
        try:
            if wasted > 4 * (read + len(buf)) + (16 << 20):  # past the budget: one line per document
                value, end = decoder.raw_decode(buf[pos:eol], 0)
                end += pos
            else:
                value, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError as err:
            at = err.pos if err.pos >= pos else err.pos + pos
            more = not text.eof and not buf[at:].strip() and len(buf) - pos < MAX_DOCUMENT_CHARS
            if more and text.more(at_least=len(buf) - pos):  # a document over several lines: read on
                continue
            end = max(eol, pos + 1)
            value = RecordError(here, f"invalid JSON: {err.msg[:200]}", buf[pos:end])
            if _UNDECODABLE.search(buf, pos, end):
                value = RecordError(here, "not valid UTF-8", buf[pos:end])
            return value, end, max(at - eol, 0)
        except RecursionError:
            end = max(eol, pos + 1)
            return RecordError(here, "invalid JSON: nested too deeply", buf[pos:end]), end, 0
        except ValueError as err:  # NaN/Infinity, a float out of range, an int of too many digits, a key twice
            end = _syntax_end(buf, pos, eol)
            return RecordError(here, f"invalid JSON: {str(err)[:200]}", buf[pos:end], _reason(err)), end, 0
        if _UNDECODABLE.search(buf, pos, end):
            value = RecordError(here, "not valid UTF-8", buf[pos:end])
        return value, end, 0


def _syntax_end(buf: str, pos: int, eol: int) -> int:
    """Where the document at ``buf[pos]`` ends when it is valid syntax refused for its values (a key twice, NaN, a
    float beyond the float range), so the one error covers all of a pretty-printed object; else the end of its line."""
    try:
        return max(_SYNTAX_DECODER.raw_decode(buf, pos)[1], eol)
    except (ValueError, RecursionError):
        return max(eol, pos + 1)


_JSONL_SUFFIXES = (".jsonl", ".ndjson")


def _byte_chunks(f, end: int) -> Iterator[str]:
    """The text of the first ``end`` bytes of the binary file ``f``, in chunks (UTF-8, a leading BOM dropped, bytes
    that are not UTF-8 as surrogate escapes: what the text-mode reader of :func:`iter_records` reads)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="surrogateescape")
    while end > 0:
        piece = f.read(min(end, JSON_LIST_CHUNK_CHARS))
        if not piece:
            break
        end -= len(piece)
        text = decoder.decode(piece)
        if text:
            yield text
    text = decoder.decode(b"", final=True)
    if text:
        yield text


def iter_records(
    path: str, *, start: int = 0, allow_nan: bool = False, end: int | None = None
) -> Iterator[tuple[str, int, dict | RecordError]]:
    """Yield ``(ref, index, record_or_error)`` for every record of a JSON or JSONL file: the one record reader.

    The whole file is read, whatever its name says: it is a sequence of JSON documents separated by JSON whitespace
    (one record per line, a JSON list of records, one object, concatenated lists, a list followed by JSONL lines,
    pretty-printed objects); each object is a record and each element of a list is a record. Line endings: LF, CRLF
    or CR-only; a raw CR inside a line is whitespace and never splits a record.

    Nothing is dropped without a word: a document that does not parse (bad syntax, ``NaN`` / ``Infinity``, a float
    beyond the float range, bytes that are not UTF-8, nesting too deep, an integer of more than 4300 digits) is one
    :class:`RecordError` covering the rest of its line (the next line is read as usual); a value that is not an
    object is an error. A list that opens a file not named ``.jsonl``/``.ndjson`` (a JSON file's list, possibly
    gigabytes) is streamed element by element: an element that does not parse is one error and the elements after
    it are read (:func:`_list_elements`); an unterminated list makes the rest of the file its last element. Any other
    list is parsed whole: its elements are records when one of them is an object, else it is one error (a list
    that does not parse is one error, like an object). A compressed file, an archive, parquet, UTF-16/32 text or
    anything but a regular file is not read at all: :class:`DataFileError` naming what it is (:func:`check_data_file`;
    one error for the file, raised at the first ``next()``, never a record). A leading UTF-8 byte-order mark is
    ignored.

    ``ref``: ``file:[i]`` for the elements of a file that starts with a list, ``file:LINE`` (1-based) for other
    documents (``file:LINE:COL`` when several start on one line), ``file:LINE[i]`` for elements of a later list.
    ``index`` is the 0-based position among all records. Records before ``start`` are skipped. ``allow_nan``: read
    ``NaN`` / ``Infinity`` / ``1e999`` as float values (Python's ``json.load``), so the caller's value checks reject
    them with their own reason (the benchmark readers: ``bad_box``, as the published harnesses see a number there).
    ``end``: read only the file's first ``end`` bytes (a resumable output's whole lines, without the line its writer
    was writing when it stopped).

    An object holding a key twice, at any depth, is an error with ``reason`` ``duplicate_key`` naming the key
    (:func:`unique_object`), its neighbours read as usual.
    """
    check_data_file(path)
    decoder = _LAX_DECODER if allow_nan else _DECODER
    if end is not None:
        with open(path, "rb") as f:
            yield from _documents(path, _Text(_byte_chunks(f, end)), start, not path.endswith(_JSONL_SUFFIXES), decoder)
        return
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        yield from _documents(path, _Text(_read_chunks(f)), start, not path.endswith(_JSONL_SUFFIXES), decoder)


def iter_json_list(path: str, *, start: int = 0) -> Iterator[tuple[str, int, dict | RecordError]]:
    """:func:`iter_records` (the name is kept for callers that read a file known to start with a JSON list)."""
    yield from iter_records(path, start=start)
