"""Reading data files (JSON / JSONL, record by record, with ``file:line`` references) and data mixtures.

``iter_records`` is used by every task (``vlm_r1.tasks``, ``gui_grounding.data.schema``) so bad lines are reported the same
way everywhere. ``load_data_config`` / ``sampling_indices`` implement VLM-R1's ``data_config`` YAML mixtures
(``--data_config``), applied per source by ``vlm_r1.grpo_jsonl``.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from groundwork.argtypes import SEED
from groundwork.argtypes import value as checked_value
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


def unique_object(pairs: list) -> dict:
    """``object_pairs_hook`` of every JSON decoder here: the object of ``pairs``, or :class:`DuplicateKeyError`
    naming the first key given twice (at any depth: the hook sees every object)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
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
    keys compared as loaded values, so ``1`` and ``"1"`` differ and ``yes``/``true`` are one key). Merge keys
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
                        raise DuplicateKeyError(key, f"duplicate key {short_repr(key)} (line {line})")
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


# --------------------------------------------------------------------------------------------------------------------
# pass-through columns: record keys a task does not read reach the reward functions as dataset columns

# Keyword names TRL's GRPOTrainer passes to every reward function itself (trl/trainer/grpo_trainer.py,
# ``_calculate_rewards``: ``prompts``, ``completions``, ``completion_ids`` + ``trainer_state``, ``log_extra``,
# ``log_metric``, ``environments``) or never passes (``prompt``, ``completion``): a column of that name would be
# overwritten or make the reward call fail with "got multiple values for keyword argument".
TRL_REWARD_KWARGS = frozenset(
    {
        "prompt",
        "prompts",
        "completion",
        "completions",
        "completion_ids",
        "trainer_state",
        "log_extra",
        "log_metric",
        "environments",
    }
)
# Columns the lazy image loader (vlm_r1.tasks.load_images_transform) adds to every batch.
IMAGE_COLUMNS = frozenset({"image", "images"})
# At most this many pass-through columns per dataset (first seen first); a file whose records each carry new keys
# would otherwise make rows x keys cells of None.
MAX_EXTRA_COLUMNS = 256
_JSON_TEXT_KEY = "vlm_r1_json_text_columns"  # DatasetInfo.description key listing the columns stored as JSON text


def split_extras(record: dict, consumed, reserved, dropped) -> dict:
    """The pass-through part of ``record``: every key except ``consumed`` (what the task reads: ``image``,
    ``conversations``, ...), the task's own columns ``reserved`` and the names in ``TRL_REWARD_KWARGS`` /
    ``IMAGE_COLUMNS``. A key dropped for being reserved (and not consumed) is counted in the Counter ``dropped``.

    Upstream VLM-R1 kept every record key (``grpo_jsonl.py:955-985`` deletes only ``image``/``conversations`` and
    overwrites ``image_path``/``problem``/``solution``); here the task's own columns win the same way.
    """
    out = {}
    for key, value in record.items():
        if key in consumed:
            continue
        if key in reserved or key in TRL_REWARD_KWARGS or key in IMAGE_COLUMNS:
            dropped[key] += 1
            continue
        out[key] = value
    return out


def warn_dropped(dropped, what: str, logger) -> None:
    """One warning per reserved record key that was dropped (see :func:`split_extras`)."""
    for key, n in sorted(dropped.items()):
        logger.warning(
            "%s: record key %r dropped from %d record(s): the name is reserved (a column the task computes, "
            "an image column, or a keyword TRL passes to rewards itself)",
            what,
            key,
            n,
        )


def json_text_columns(dataset) -> list[str]:
    """Names of ``dataset``'s columns stored as JSON text by :func:`rows_to_dataset` (json.loads each non-None value)."""
    try:
        return list(json.loads(dataset.info.description or "{}").get(_JSON_TEXT_KEY, []))
    except (ValueError, AttributeError):
        return []


def _json_text(values: list) -> list:
    # ensure_ascii: lone surrogates (legal JSON escapes, not encodable as UTF-8) become \udXXX escapes again
    return [None if v is None else json.dumps(v, ensure_ascii=True, allow_nan=False) for v in values]


def _type_names(values: list) -> str:
    return ", ".join(sorted({type(v).__name__ for v in values if v is not None}))


def rows_to_dataset(rows: list[dict], extras: list[dict], *, what: str, logger):
    """A ``datasets.Dataset`` of the task's ``rows`` (every row has the same keys) plus pass-through ``extras``.

    Column rules:

    * every pass-through key found in ANY record becomes a column (upstream's ``Dataset.from_list`` took the column
      set from the first line, ``grpo_jsonl.py:993``); a record without the key gets None;
    * values keep their JSON types where Arrow can hold the column as-is, with Arrow's own merging: ints and floats
      in one column become floats, objects with different keys become one struct holding every key (None where a
      record lacks it);
    * a column Arrow cannot hold (mixed kinds such as an object in one record and a string in another, or an integer
      beyond 64 bits, or a string with a lone surrogate escape) is stored as JSON text in EVERY row (``json.dumps``
      of the value, None stays None) and a warning names the key and the types; such columns are listed by
      :func:`json_text_columns`;
    * at most ``MAX_EXTRA_COLUMNS`` pass-through columns, first seen first; the rest are dropped with a warning.
    """
    from datasets import Dataset, DatasetInfo

    columns = {key: [row[key] for row in rows] for key in (rows[0] if rows else {})}
    order = list(dict.fromkeys(key for extra in extras for key in extra))
    if len(order) > MAX_EXTRA_COLUMNS:
        logger.warning(
            "%s: %d distinct pass-through record keys; keeping the first %d, dropping %d (first dropped: %s)",
            what,
            len(order),
            MAX_EXTRA_COLUMNS,
            len(order) - MAX_EXTRA_COLUMNS,
            order[MAX_EXTRA_COLUMNS : MAX_EXTRA_COLUMNS + 5],
        )
        order = order[:MAX_EXTRA_COLUMNS]
    as_json = []
    for key in order:
        values = [extra.get(key) for extra in extras]
        try:
            Dataset.from_dict({key: values})
        except Exception as err:  # Arrow raises several types (ArrowInvalid, ArrowTypeError, OverflowError, ...)
            logger.warning(
                "%s: record key %r holds values Arrow cannot keep in one column (%s; %s: %s); the column is "
                "stored as JSON text in every row (json.loads each value)",
                what,
                key,
                _type_names(values),
                type(err).__name__,
                str(err)[:120],
            )
            values = _json_text(values)
            as_json.append(key)
        columns[key] = values
    info = DatasetInfo(description=json.dumps({_JSON_TEXT_KEY: as_json}, allow_nan=False)) if as_json else None
    return Dataset.from_dict(columns, info=info)


def concatenate_record_datasets(parts: list, *, what: str = "data mixture", logger=None):
    """Concatenate per-source datasets of one task (``--data_config`` mixtures) whose pass-through columns may differ.

    The union of the columns is kept (None where a part lacks one) and types merge as in :func:`rows_to_dataset`
    (Arrow's permissive promotion: null -> any, int -> float, structs merged). A pass-through column whose types
    cannot merge across parts (e.g. an object in one file, a string in another) is stored as JSON text in every part
    (parts that already hold it as JSON text are left as they are) with a warning. Formats/transforms of the parts
    are dropped (put the task's transform back on the result, e.g. ``vlm_r1.launch.with_transform_of``).

    Raises:
        ValueError: the tables still cannot be joined (not expected: every conflicting column became JSON text).
    """
    import pyarrow as pa
    from datasets import Dataset, DatasetInfo

    tables = [p.with_format("arrow")[:] for p in parts]
    texts = [set(json_text_columns(p)) for p in parts]
    names = list(dict.fromkeys(name for t in tables for name in t.column_names))
    as_json = set().union(*texts)
    for name in names:
        fields = [t.schema.field(name) for t in tables if name in t.column_names]
        try:
            pa.unify_schemas([pa.schema([f]) for f in fields], promote_options="permissive")
            conflict = False
        except (pa.ArrowInvalid, pa.ArrowTypeError, NotImplementedError):
            conflict = True
        mixed = name in as_json and any(
            name in t.column_names and name not in j and not pa.types.is_null(t.schema.field(name).type)
            for t, j in zip(tables, texts, strict=True)
        )
        if not (conflict or mixed):
            continue
        if logger is not None:
            logger.warning(
                "%s: column %r has types %s across sources; stored as JSON text in every row (json.loads each value)",
                what,
                name,
                sorted({str(f.type) for f in fields}),
            )
        for i, (t, j) in enumerate(zip(tables, texts, strict=True)):
            if name in t.column_names and name not in j:
                col = t.column_names.index(name)
                tables[i] = t.set_column(col, name, pa.array(_json_text(t.column(name).to_pylist()), pa.string()))
        as_json.add(name)
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise ValueError(f"{what}: the sources' columns cannot be joined: {err}") from err
    info = DatasetInfo(description=json.dumps({_JSON_TEXT_KEY: sorted(as_json)}, allow_nan=False)) if as_json else None
    return Dataset(table, info=info)


# --------------------------------------------------------------------------------------------------------------------
# data mixtures (VLM-R1's data_config YAML)


@dataclass
class DataSource:
    """One ``datasets:`` entry of a data_config YAML.

    ``json_path`` and ``image_folder`` are resolved relative to the YAML file's folder when relative;
    ``sampling_strategy`` is one of ``all``, ``first:N``, ``end:N``, ``random:N``, N a count or ``P%``
    (:func:`sampling_indices`).
    """

    json_path: str
    image_folder: str | None = None
    sampling_strategy: str = "all"
    name: str | None = None


def load_data_config(path: str) -> tuple[list[DataSource], int | None]:
    """Read a VLM-R1-style data_config YAML: ``{"datasets": [{json_path, image_folder?, sampling_strategy?}], seed?}``.

    Returns:
        ``(sources, seed)``; ``seed`` is the file's top-level ``seed`` or None.

    Raises:
        ValueError: not a mapping with a non-empty ``datasets`` list, an entry without ``json_path``, an unknown key,
            or an invalid sampling strategy (each message names the entry); a file that is not a regular file, over
            :data:`SIDE_FILE_BYTES`, not YAML or holding a key twice (:func:`load_yaml_file`).
        FileNotFoundError: the YAML file, or a ``json_path``, does not exist.
    """
    if not os.path.lexists(path):
        raise FileNotFoundError(f"data_config {path} not found")
    cfg = load_yaml_file(path, "data_config")
    if not isinstance(cfg, dict) or not isinstance(cfg.get("datasets"), list) or not cfg["datasets"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty 'datasets:' list")
    unknown_top = set(cfg) - {"datasets", "seed"}
    if unknown_top:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown_top)} (allowed: datasets, seed)")
    base = os.path.dirname(os.path.abspath(path))
    sources = []
    for i, entry in enumerate(cfg["datasets"]):
        where = f"{path}: datasets[{i}]"
        if not isinstance(entry, dict) or "json_path" not in entry:
            raise ValueError(f"{where}: each entry needs a json_path")
        unknown = set(entry) - {"json_path", "image_folder", "sampling_strategy", "name"}
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {sorted(unknown)} (allowed: json_path, image_folder, sampling_strategy, name)"
            )
        json_path = os.path.normpath(os.path.join(base, str(entry["json_path"])))
        if not os.path.isfile(json_path):
            raise FileNotFoundError(f"{where}: json_path {json_path} not found")
        folder = entry.get("image_folder")
        strategy = str(entry.get("sampling_strategy", "all"))
        sampling_indices(1, strategy, 0, where=where)  # validate the syntax early
        sources.append(
            DataSource(
                json_path,
                os.path.normpath(os.path.join(base, str(folder))) if folder else None,
                strategy,
                entry.get("name"),
            )
        )
    seed = cfg.get("seed")  # the flags' rule (groundwork.argtypes): an integer, not 'abc', 1.5, true or a list
    return sources, checked_value(SEED, seed, f"{path}: seed") if seed is not None else None


def sampling_indices(n: int, strategy: str, seed: int, *, where: str = "") -> list[int]:
    """Indices of the ``n`` records that ``strategy`` keeps, in record order (random ones are sorted).

    Upstream VLM-R1's data-config rule (om-ai-lab/VLM-R1 ``src/open-r1-multimodal/src/open_r1/grpo_rec.py:128-143`` at
    90052f4): ``all``; ``first:N`` (the first N); ``end:N`` (the last N; ``end:0`` keeps **all** records, as upstream's
    ``records[-0:]`` does); ``random:N`` (N chosen with ``random.Random(seed)``: upstream shuffles unseeded, so only
    the count can match); a count may be a percentage for every kind, ``first:P%`` / ``end:P%`` / ``random:P%``, an
    integer ``P`` giving ``ceil(P * n / 100)`` records (upstream's ``math.ceil(int(P) * n / 100)``). A count above ``n``
    keeps all ``n`` (the caller reports it), as upstream's slicing does.

    Refused where upstream would crash or do something no config means: an unknown kind, a negative or non-integer
    count or percentage (upstream: ``int()`` raises, or a negative slice drops records from the other end).

    Raises:
        ValueError: an unknown strategy or a malformed count (naming ``where``).
    """
    import random

    kind, _, arg = strategy.partition(":")
    if kind == "all" and not arg:
        return list(range(n))
    if kind not in ("first", "end", "random") or not arg:
        raise ValueError(
            f"{where}: unknown sampling_strategy {strategy!r} (all, first:N, end:N, random:N, with N a "
            "count or an integer percentage P%)"
        )
    digits = arg[:-1] if arg.endswith("%") else arg
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{where}: malformed sampling_strategy {strategy!r} (a count or an integer percentage P%)")
    k = -(-int(digits) * n // 100) if arg.endswith("%") else int(digits)  # ceil, in integers
    if kind == "end" and k == 0:
        return list(range(n))  # upstream: records[-0:] is every record
    k = min(k, n)
    if kind == "first":
        return list(range(k))
    if kind == "end":
        return list(range(n - k, n))
    return sorted(random.Random(seed).sample(range(n), k))


def requested_count(strategy: str) -> int | None:
    """The record count a ``first:N`` / ``end:N`` / ``random:N`` strategy asks for; None for ``all`` and ``P%``."""
    kind, _, arg = strategy.partition(":")
    if kind in ("first", "end", "random") and arg.isdigit():
        return int(arg)
    return None
