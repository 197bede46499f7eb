"""Prediction backends: run a model on samples through an adapter and write one JSONL line per sample.

Backends (``BACKENDS``) and adapters (``gui_grounding.models.adapters``) are separate axes, combined at run time:

* ``hf``     - transformers ``generate`` in this process (:mod:`.hf`; also ``predict_points`` for a loaded model);
* ``openai`` - any OpenAI-compatible chat-completions endpoint, e.g. ``vllm serve`` (:mod:`.openai_api`,
  ``pip install -e .[api]``);
* ``vllm``   - an offline ``vllm.LLM`` engine on this machine's GPUs (:mod:`.vllm_engine`, ``pip install -e .[gpu]``).

The registry (``REGISTRY``) is a :class:`groundwork.registry.Registry`: the built-in backends above (each a lazy
wrapper of its ``module:function`` spec, so importing this package imports neither torch, vLLM nor openai), then those
that installed packages declare under the entry-point group ``gui_grounding.backends`` (name -> ``module:function``,
a function with :func:`predict`'s signature less ``backend``; an entry point replaces a built-in of the same name), and
:func:`predict` also takes a ``"package.module:function"`` spec as ``backend``.

Every backend writes the same line per sample (points in **original-image pixels**)::

    {"sample_id": "...", "point": [x, y] | null, "raw_response": "...", "prompt": "...", "adapter": "gta1"}

plus ``"outside_frame": true`` when a 0-1000 family's answer writes a coordinate above 1000 or below 0 (the point is
still mapped as written and scored: :func:`outside_frame`),

plus ``"error": "..."`` on a request that failed for good (API backends; ``point`` is then null and
``raw_response`` holds the error text), and ``"invalid_point": "..."`` (with a null point) when the adapter's point is
not one the predictions reader reads (two finite numbers within +-1e7 original pixels: a point in range in the model's
frame can leave it when mapped to a larger original), so every line eval writes reads back as it was judged. Files
are resumable: samples already in the file are skipped; a half-written last line (interrupted run) and failed-request
lines are dropped and redone.
"""

from __future__ import annotations

import base64
import errno
import importlib
import io
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from groundwork.outputs import LineAppender, OutputError, write_bytes
from groundwork.records import container_problem, iter_records, strict_loads
from groundwork.registry import Registry
from groundwork.validate import explicit_id, open_image
from gui_grounding.eval.judge import WRONG_FORMAT
from gui_grounding.eval.predictions import parse_point, read_answer_fields
from gui_grounding.models.adapters import default_adapter_for, resolve_adapter
from gui_grounding.models.profile_types import decoding_problem

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "gui_grounding.backends"

#: built-in backend name -> ``module:function`` of its predict function (imported on first use only)
BUILTIN_SPECS = {
    "hf": "gui_grounding.eval.backends.hf:predict_hf",
    "openai": "gui_grounding.eval.backends.openai_api:predict_openai",
    "vllm": "gui_grounding.eval.backends.vllm_engine:predict_vllm",
}

#: the built-in backend names (``--backend`` also accepts names registered by entry points: ``REGISTRY.names()``)
BACKENDS = tuple(BUILTIN_SPECS)


class LazyBackend:
    """A built-in backend's predict function, imported when first called (the module needs torch, vLLM or openai).

    An ``ImportError`` of the module (a missing optional dependency, which names its ``pip install`` extra) is raised
    as is, on call.
    """

    def __init__(self, spec: str):
        self.spec = spec

    def load(self) -> Callable[..., str]:
        module_name, _, attr = self.spec.partition(":")
        return getattr(importlib.import_module(module_name), attr)

    def __call__(self, *args, **kwargs) -> str:
        return self.load()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"LazyBackend({self.spec!r})"


def _builtins() -> dict[str, Callable[..., str]]:
    return {name: LazyBackend(spec) for name, spec in BUILTIN_SPECS.items()}


#: built-ins + the entry-point group ``gui_grounding.backends`` (name -> ``module:function``)
REGISTRY = Registry("backend", ENTRY_POINT_GROUP, _builtins)


def get_backend(backend: str) -> Callable[..., str]:
    """The predict function of ``backend``: a registered name or a ``"package.module:function"`` spec.

    Raises:
        ValueError: unknown name (the message lists the registered ones) or a spec that names nothing loadable.
    """
    return REGISTRY.get_callable(backend)


def predict(backend: str, model: str, samples: list, out_path: str, *, adapter=None, **kwargs) -> str:
    """Write predictions of ``model`` for ``samples`` to ``out_path`` with ``backend``; returns ``out_path``.

    Args:
        backend: a registered name (``BACKENDS`` or an entry point of ``gui_grounding.backends``) or a
            ``"package.module:function"`` spec; the function is called as
            ``fn(model, samples, out_path, adapter=adapter, **kwargs)``.
        model: checkpoint directory / hub id (hf, vllm) or the served model name (openai).
        samples: ``gui_grounding.data.schema.Sample`` list (boxes and sizes in original pixels).
        out_path: predictions JSONL (appended to; resumable).
        adapter: adapter name or instance (prompt + coordinate frame). ``None``: the default for the checkpoint's
            ``config.model_type`` (hf, vllm); required for openai.
        **kwargs: backend options, see :func:`.hf.predict_hf`, :func:`.openai_api.predict_openai`,
            :func:`.vllm_engine.predict_vllm`.

    Raises:
        ValueError: unknown backend (the message lists the registered names) or a bad spec.
        ImportError: the backend's optional dependency is missing (the message names the ``pip install`` extra).
    """
    return get_backend(backend)(model, samples, out_path, adapter=adapter, **kwargs)


# --------------------------------------------------------------------------------------------------------------------
# a profile's published generation settings (``Profile.decoding``) as each backend sends them


def check_decoding(decoding: dict | None, backend: str) -> dict:
    """``decoding`` (a profile's published generation settings, ``gui_grounding.models.profile_types.DECODING_FIELDS``)
    when ``backend`` can send it as published, else ``ValueError`` saying why and which backend can. ``{}`` / ``None``:
    greedy only, every backend.

    * ``openai``: every field is a request field (``frequency_penalty``, ``top_p``); ``temperature: None`` is not
      sent (the server's default temperature, as a published request that names none);
    * ``vllm``: ``SamplingParams(frequency_penalty=..., temperature=..., top_p=...)``; ``temperature: None`` (a
      server's default) has no offline counterpart: refused;
    * ``hf``: transformers ``generate`` decodes greedily here and has no ``frequency_penalty`` (its
      ``repetition_penalty`` divides the logits of every repeated token, a different rule), so any setting other than
      ``temperature: 0`` is refused;
    * another backend (an entry point): refused unless empty (it may not take ``decoding``).

    Raises:
        ValueError: the settings are invalid, or the backend cannot send them as published.
    """

    decoding = dict(decoding or {})
    problem = decoding_problem(decoding)
    if problem is not None:
        raise ValueError(problem)
    if not decoding:
        return decoding
    if backend == "openai":
        return decoding
    if backend == "vllm":
        if "temperature" in decoding and decoding["temperature"] is None:
            raise ValueError(
                "decoding: temperature 'the server default' is an OpenAI-server setting (the published request sends "
                "none); --backend vllm has no such default: use --backend openai against a server"
            )
        return decoding
    if backend == "hf":
        extra = {k: v for k, v in decoding.items() if not (k == "temperature" and v == 0)}
        if extra:
            raise ValueError(
                f"decoding {extra}: the hf backend decodes greedily and transformers' generate has no "
                "frequency_penalty (repetition_penalty is a different, multiplicative penalty): use --backend openai "
                "(or vllm) to send these settings, or a profile without them"
            )
        return decoding
    raise ValueError(f"decoding {decoding}: backend {backend!r} does not take published generation settings")


def greedy_settings(decoding: dict | None) -> dict:
    """The generation fields of a greedy request (OpenAI request fields / vLLM ``SamplingParams`` arguments):
    ``temperature`` 0, then ``decoding`` on top (``temperature: None`` removes the field: the server's default).
    Test-time sampling passes keep their own temperature and top_p and add only :func:`sampling_settings`."""
    out = {"temperature": 0.0, **(decoding or {})}
    if out.get("temperature", 0.0) is None:
        del out["temperature"]
    return out


def sampling_settings(decoding: dict | None) -> dict:
    """The published settings a sampled (test-time) request keeps: the penalty alone."""
    return {k: v for k, v in (decoding or {}).items() if k == "frequency_penalty"}


# --------------------------------------------------------------------------------------------------------------------
# helpers shared by the backends


def checkpoint_adapter(model_path: str, adapter=None):
    """``adapter`` resolved to an instance; ``None`` -> the default for ``model_path``'s ``config.model_type``."""

    if adapter is not None:
        return resolve_adapter(adapter)
    from transformers import AutoConfig

    return default_adapter_for(AutoConfig.from_pretrained(model_path).model_type)


def load_image(sample) -> Any:
    """The sample's screenshot as an RGB ``PIL.Image`` in its displayed frame (EXIF orientation applied, the frame
    sizes and boxes are read in: ``groundwork.validate.open_image``), fully loaded (file closed)."""

    return open_image(sample.image_path)


def record(sample, request, text: str, adapter, *, error: str | None = None) -> dict:
    """The predictions line for one answer: ``point`` parsed by ``adapter`` (original pixels) or ``None``, and
    ``"refusal": true`` when the answer is the family's explicit "no target" (``Adapter.is_refusal``). The answer
    parsed and stored as ``raw_response`` is the request's ``assistant_prefix`` followed by the generated ``text``.
    A point the predictions reader would refuse (:func:`gui_grounding.eval.predictions.parse_point`: not two finite
    numbers within +-1e7) is written as ``null`` with ``invalid_point`` (its text): no point, ``wrong_format``, as
    the reader reads the line back (never a malformed line that a resume drops and predicts again)."""
    if error is None:
        text = (getattr(request, "assistant_prefix", "") or "") + text
    refusal = error is None and adapter.is_refusal(text)
    point = None if error is not None or refusal else adapter.parse(text, request)
    rec = {
        "sample_id": sample.sample_id,
        "point": None,
        "raw_response": text,
        "prompt": request.prompt_text,
        "adapter": adapter.name,
    }
    if point is not None:
        ok, rec["point"] = parse_point(list(point))
        if not ok:
            rec["invalid_point"] = _shown_point(point)
        elif outside_frame(adapter, text):
            rec["outside_frame"] = True
    if refusal:
        rec["refusal"] = True
    if error is not None:
        rec["error"] = error
    return rec


#: the extent of the ``norm1000`` answer frame: an answer coordinate outside ``[0, NORM1000_EXTENT]`` is flagged
NORM1000_EXTENT = 1000.0


def outside_frame(adapter, text: str) -> bool:
    """True when ``adapter`` answers on the 0-1000 grid (``answer_frame == "norm1000"``) and the answer ``text``
    writes a coordinate above 1000 or below 0 (any number of the box it wrote, ``Adapter.answer_box``, else of its
    point, ``Adapter.answer_point``).

    Models do answer beyond 1000 (e.g. Qwen3-VL answers that read as pixels of the image), and scoring 0-1000
    answers as pixels, or clipping them silently, is the field's most common grounding bug (open-compass/VLMEvalKit
    #1332; QwenLM/Qwen3-VL #1485, #1741). Nothing here clips: the point is mapped as written
    (``Frame.point_from_norm1000``: ``x / 1000 * W``) and scored; the predictions line carries ``"outside_frame":
    true`` and the predictions summary (``metrics.json`` ``predictions.outside_frame``, ``results.md``) counts it."""
    if getattr(adapter, "answer_frame", None) != "norm1000":
        return False
    values = adapter.answer_box(text) or adapter.answer_point(text)
    return values is not None and any(not 0.0 <= float(v) <= NORM1000_EXTENT for v in values)


#: what eval makes of an answer with no point and no refusal (``gui_grounding.eval.judge``)
NO_POINT = "no point could be read from the answer"


def _shown_point(point) -> str:
    """A point the reader refuses, as ``invalid_point`` holds it (at most 200 characters)."""
    return repr(list(point) if isinstance(point, (list, tuple)) else point)[:200]


def no_point_reason(rec: dict) -> str:
    """Why a predictions line with no point and no refusal is scored ``wrong_format``: :data:`NO_POINT`, with the
    refused point when the line records one (``invalid_point``)."""
    invalid = rec.get("invalid_point")
    if invalid is None:
        return NO_POINT
    return f"{NO_POINT}: its point {invalid} is not 2 finite numbers within +-1e7 original pixels (written as null)"


def eval_reading(sample, request, text: str, adapter) -> dict:
    """What ``gui-grounding eval`` records and scores for the answer ``text``: the predictions line :func:`record`
    writes, read back by the predictions reader's rule (:func:`gui_grounding.eval.predictions.read_answer_fields`).
    One path, so ``gui-grounding prompt --parse`` (which calls this) shows exactly eval's reading.

    Returns:
        ``{"point": [x, y] original pixels or None, "refusal": bool (the family's explicit "no target":
        correct on refusal items, wrong elsewhere), "format_error": None, or why eval scores the answer
        ``wrong_format`` (the reader's malformed-record message, or :func:`no_point_reason`: nothing parsed, or a
        point beyond +-1e7 written as null), "scored_as": "point" | "refusal" | "wrong_format"}``.
    """
    line = strict_loads(_line(record(sample, request, text, adapter)))  # the line eval writes, as eval reads it
    problem, point = read_answer_fields(line)
    refusal = problem is None and line.get("refusal") is True
    if problem is None and point is None and not refusal:
        problem = no_point_reason(line)
    scored = WRONG_FORMAT if problem is not None else "refusal" if refusal else "point"
    return {"point": point, "refusal": refusal, "format_error": problem, "scored_as": scored}


def prepare_resume(path: str) -> set[str]:
    """sample_ids already predicted in ``path`` (empty if there is no file), with the file made safe to append to.

    The file is our own output (:class:`groundwork.outputs.LineAppender`: whole LF-terminated lines) but is read as any
    JSON input is, by the one record reader (``groundwork.records.iter_records``: LF, CRLF and CR-only lines, a key twice
    is an unreadable line), up to its last line break: the text after it is a half-written last line (the run was
    interrupted while writing it) and is dropped. Records that are not prediction records (not JSON, not an object,
    no usable ``sample_id``, a ``point`` that is neither null nor two finite numbers), and records of requests that
    failed for good (``"error"`` key) are removed, so those samples are predicted again; a warning counts each kind.
    When anything was dropped, or the line breaks are not LF, the kept records are rewritten one per LF-terminated
    line (the bytes :func:`write_records` writes) atomically (:func:`groundwork.outputs.atomic_writer`: a unique
    temporary name in its folder, then a rename), so an interruption leaves the old file or the new one. Callers
    hold the output's lock (``run_eval`` locks ``--out``).

    Raises:
        OutputError: the file cannot be read (not a regular file: a FIFO, a device, a folder) or rewritten (one
            line, naming it).
    """

    if not os.path.lexists(path):
        return set()
    problem = container_problem(path)
    if problem is not None:
        raise OutputError(errno.EINVAL, f"cannot read {path} to resume: {problem}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise OutputError(err.errno, f"cannot read {path} to resume: {err.strerror or err}") from None
    whole = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1  # the whole lines; the rest was being written
    kept, done, dropped = [], set(), {"half-written last line": int(bool(data[whole:].strip()))}
    for _, _, rec in iter_records(path, end=whole):
        sid = explicit_id(rec.get("sample_id")) if isinstance(rec, dict) else None
        if sid is None or "point" not in rec or not parse_point(rec["point"])[0]:
            dropped["unreadable line"] = dropped.get("unreadable line", 0) + 1
            continue
        if rec.get("error") is not None:
            dropped["failed request"] = dropped.get("failed request", 0) + 1
            continue
        kept.append(rec)
        done.add(sid)
    if any(dropped.values()) or b"\r" in data:
        write_bytes(path, "".join(_line(rec) + "\n" for rec in kept).encode("utf-8"))
        what = ", ".join(f"{n} {k}" for k, n in dropped.items() if n)
        if what:
            logger.warning("%s: dropped %s; those samples are predicted again", path, what)
    return done


def open_predictions(path: str, samples: list) -> tuple[Any, list]:
    """``(appender, samples still to predict)`` for a resumable run on ``path``: a
    :class:`groundwork.outputs.LineAppender` (a context manager; pass it to :func:`write_records`).

    Raises:
        OutputError: the file cannot be read, rewritten or opened for appending.
    """

    done = prepare_resume(path)
    todo = [s for s in samples if s.sample_id not in done]
    if done:
        logger.info("resuming: %d of %d samples already predicted in %s", len(samples) - len(todo), len(samples), path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return LineAppender(path), todo


def _line(rec: dict) -> str:
    """One predictions line: strict JSON (a point the reader refuses, :func:`parse_point`, becomes null with
    ``invalid_point``, as :func:`record` writes it), UTF-8 text where possible, ASCII escapes where a string holds a
    lone surrogate (so every line is valid UTF-8 and JSON)."""
    point = rec.get("point")
    if point is not None and not parse_point(point)[0]:
        rec = {**rec, "point": None, "invalid_point": _shown_point(point)}
    try:
        line = json.dumps(rec, ensure_ascii=False, allow_nan=False)
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(rec, allow_nan=False)
    return line


def write_records(out, records: list[dict]) -> None:
    """Append ``records`` as whole JSON lines, each written and flushed by ``out.write`` (a
    :class:`groundwork.outputs.LineAppender` from :func:`open_predictions`), so a crash loses at most the line being
    written, which the next resume drops.

    Raises:
        OutputError: the disk is full or the file cannot be written (one line).
        ValueError: a record that is not JSON-serialisable (a bug in the backend).
    """
    for rec in records:
        out.write(_line(rec))


def image_data_url(image) -> str:
    """``data:image/png;base64,...`` URL of a PIL image (lossless, so the model sees exactly the frame's pixels)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def openai_messages(request) -> list[dict]:
    """``request.messages`` in OpenAI chat format: each image placeholder becomes an ``image_url`` part holding the
    request's next image (``Request.images``, in message order: the screenshot, then a zoom-tool turn's crops) as a
    base64 PNG data URL; text-only contents become plain strings. A request with an ``assistant_prefix`` ends with an
    assistant message holding it (the caller asks the server to continue it: vLLM's ``continue_final_message``).

    Raises:
        ValueError: the messages hold more image parts than the request has images.
    """
    images = iter(getattr(request, "images", None) or [request.image])
    out = []
    for m in request.messages:
        content = m["content"]
        if isinstance(content, str) or all(p.get("type") == "text" for p in content):
            text = content if isinstance(content, str) else "".join(p["text"] for p in content)
            out.append({"role": m["role"], "content": text})
            continue
        parts = []
        for p in content:
            if p.get("type") == "image":
                image = next(images, None)
                if image is None:
                    raise ValueError("the request's messages hold more image parts than it has images")
                parts.append({"type": "image_url", "image_url": {"url": image_data_url(image)}})
            else:
                parts.append({"type": "text", "text": p["text"]})
        out.append({"role": m["role"], "content": parts})
    if getattr(request, "assistant_prefix", ""):
        out.append({"role": "assistant", "content": request.assistant_prefix})
    return out
