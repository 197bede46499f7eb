"""The pixel budget: one object from the ``--max_pixels`` flag to the resize, in training and in evaluation.

A :class:`PixelBudget` holds everything that decides the image a model is sent, and where each value came from:

* ``factor``: the smart_resize factor in pixels (vision patch x spatial merge: 28 for Qwen2/2.5-VL, 32 for Qwen3-VL),
  read from the checkpoint's image processor (``VLMBaseModule.get_image_resize_params``), or given by an adapter or
  profile when no processor is loaded (API backends). ``None`` for families without a smart_resize frame (InternVL:
  448-px tiles; the image is sent as it is and the processor tiles it);
* ``min_pixels`` / ``max_pixels``: the bounds of the resized image's ``H' * W'`` (transformers' ``smart_resize``);
* ``max_tiles``: InternVL's tile bound (upstream's ``--max_anyres_num``; ``image_processor.max_patches``);
* ``limits``: the images the family can take at all (:class:`groundwork.validate.ImageLimits`: aspect ratio, side);
* ``sources``: for each of the fields above, where its value came from (``"flag --max_pixels"``, ``"recipe
  recipes/gta1/7b.yaml"``, ``"default of vlm_r1.grpo_jsonl (upstream VLM-R1 grpo_jsonl.py GRPOScriptArguments)"``,
  ``"checkpoint runs/x (vlm_r1_run.json)"``, ``"profile gta1-7b"``, ...).

It is resolved once per run (:func:`resolve`: the first layer that sets a value wins), printed with its sources
(:meth:`PixelBudget.describe`), written into the processor once (:meth:`PixelBudget.apply`, so the processor's own
smart_resize of an image this object resized is the identity), saved with every checkpoint (``vlm_r1_run.json``
``pixel_budget``: :meth:`PixelBudget.to_dict`; :func:`recorded_budget` reads it back), and it is the only thing that
resizes: :func:`resize_for_model` (training rows, the image transform, every eval backend, the training-time eval and
``gui-grounding prompt`` call it or :meth:`PixelBudget.size_sent`).

This is not the 64 Mpx decode guard (``groundwork.validate.DECODE_PIXEL_LIMIT``), which bounds the *original* image a
reader may decode.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from groundwork.geometry import Frame, smart_resize
from groundwork.outputs import OutputError, OutputLock, write_json
from groundwork.records import load_json_file
from groundwork.validate import ImageLimits

logger = logging.getLogger(__name__)

#: the budget fields that carry a source (``PixelBudget.sources`` keys)
BUDGET_FIELDS = ("factor", "min_pixels", "max_pixels", "max_tiles")
#: the optional field of a harness whose processor shrinks the stated image again
#: (:attr:`PixelBudget.processor_max_pixels`); resolved, recorded and described like the fields above, but only where
#: set (records without it read as before)
RESHRINK_FIELD = "processor_max_pixels"
#: every field :func:`resolve` takes from its layers
RESOLVED_FIELDS = (*BUDGET_FIELDS, RESHRINK_FIELD)
#: the key of the budget in ``vlm_r1_run.json``
RUN_INFO_KEY = "pixel_budget"
RUN_INFO_FILE = "vlm_r1_run.json"
#: seconds a writer of ``vlm_r1_run.json`` waits for another one (a read-modify-write takes milliseconds)
RUN_INFO_LOCK_WAIT_S = 30.0


@dataclass(frozen=True, eq=True)
class PixelBudget:
    """The resize rule of one run (see the module docstring). Sizes are pixels of the resized image (``H' * W'``).

    Build with :func:`resolve` (or the constructor, for a fixed published budget). Frozen: a change is a new object
    (:meth:`with_values`), which records the new sources.

    ``processor_max_pixels`` (``None`` for every budget but one harness's): the ``max_pixels`` of a processor that
    resizes the image **again** after the frame was stated. The ScreenSpot-Pro harness's Qwen2.5-VL request states the
    smart_resize size under ``max_pixels=99999999`` in its prompt and divides answers by it
    (likaixin2000/ScreenSpot-Pro-GUI-Grounding ``models/qwen2_5vl.py:143-154,208`` at bd8bbbb), then hands that image to
    ``self.processor(images=[resized_image])`` (:164-169), loaded at its defaults (:121), whose max_pixels 12,845,056
    shrinks any image above it once more. With it set, :meth:`frame` (the size the prompt states, the frame answers
    map back from) stays the ``max_pixels`` frame, and :meth:`size_sent` is that frame smart_resized again under
    ``(min_pixels, processor_max_pixels)``: the image the model actually sees.
    """

    factor: int | None
    min_pixels: int | None
    max_pixels: int | None
    max_tiles: int | None = None
    limits: ImageLimits = ImageLimits()
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    processor_max_pixels: int | None = None

    def __post_init__(self) -> None:
        for name in RESOLVED_FIELDS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"pixel budget: {name} must be a positive integer or None, got {value!r}")
        if self.factor is not None and (self.min_pixels is None or self.max_pixels is None):
            raise ValueError("pixel budget: a smart_resize factor needs min_pixels and max_pixels")
        if self.min_pixels is not None and self.max_pixels is not None and self.min_pixels > self.max_pixels:
            raise ValueError(f"pixel budget: min_pixels {self.min_pixels:,} exceeds max_pixels {self.max_pixels:,}")
        object.__setattr__(self, "sources", dict(self.sources))

    @classmethod
    def published(
        cls,
        source: str,
        *,
        factor: int | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        max_tiles: int | None = None,
        processor_max_pixels: int | None = None,
    ) -> PixelBudget:
        """A fixed, published budget (an adapter's or a profile's), every value set citing ``source``."""
        values = {
            "factor": factor,
            "min_pixels": min_pixels,
            "max_pixels": max_pixels,
            "max_tiles": max_tiles,
            RESHRINK_FIELD: processor_max_pixels,
        }
        return cls(**values, sources={k: source for k, v in values.items() if v is not None})

    # ---- the resize rule ----------------------------------------------------------------------------------------------
    @property
    def resizes(self) -> bool:
        """True when the family has a smart_resize frame (a ``factor``); False for tiling families (InternVL)."""
        return self.factor is not None

    @property
    def reshrinks(self) -> bool:
        """True when a processor shrinks the stated frame again (``processor_max_pixels`` below ``max_pixels``)."""
        return self.resizes and self.processor_max_pixels is not None and self.processor_max_pixels < self.max_pixels

    def size_sent(self, width: int, height: int) -> tuple[int, int]:
        """``(W'', H'')`` of the image the model is sent for an original ``width x height`` image: the stated frame
        (:meth:`stated_size`), smart_resized again under ``(min_pixels, processor_max_pixels)`` when the budget
        :attr:`reshrinks` (the class docstring: a harness's processor at its defaults), else the stated frame itself.
        Both sizes are checked to be fixed points of the resize that makes them.

        Raises:
            ValueError: as :meth:`stated_size`, for either resize.
        """
        stated = self.stated_size(width, height)
        if not self.reshrinks:
            return stated
        return self._fixed_point(*stated, self.processor_max_pixels)

    def stated_size(self, width: int, height: int) -> tuple[int, int]:
        """``(W', H')`` of the frame the prompt states and answers map back from, for an original ``width x height``
        image: transformers' ``smart_resize`` under this budget (:func:`groundwork.geometry.smart_resize`), or the
        original size for a family without a smart_resize frame. The image sent is this frame, unless a processor
        shrinks it again (:meth:`size_sent`).

        The result is checked to be a fixed point (smart_resize of ``(W', H')`` is ``(W', H')``), so the processor, set
        to the same budget, leaves the image as it is and the frame the prompt states is the one the model sees. A very
        thin image breaks that: its short side is forced up to one ``factor`` (its long side may then exceed the
        budget, and the processor would shrink it again) or rounded so that the sent image's aspect ratio passes
        smart_resize's 200 (the processor would refuse it). Such an image cannot be sent faithfully under this budget
        and is refused here (readers count it as ``image_unsupported``).

        Raises:
            ValueError: an aspect ratio smart_resize refuses (over 200), or an image whose sent size is not a fixed
                point (the message names both sizes).
        """
        if not self.resizes:
            return int(width), int(height)
        return self._fixed_point(int(width), int(height), self.max_pixels)

    def _fixed_point(self, width: int, height: int, max_pixels: int) -> tuple[int, int]:
        """smart_resize of ``width x height`` under ``(min_pixels, max_pixels)``, checked to be a fixed point."""
        h, w = smart_resize(
            int(height), int(width), factor=self.factor, min_pixels=self.min_pixels, max_pixels=max_pixels
        )
        try:
            again = smart_resize(h, w, factor=self.factor, min_pixels=self.min_pixels, max_pixels=max_pixels)
        except ValueError as err:
            again = err
        if again != (h, w):
            raise ValueError(
                f"a {int(width)}x{int(height)} image cannot be sent under this pixel budget: smart_resize "
                f"gives {w}x{h}, which the processor would not keep ({again if isinstance(again, ValueError) else f'{again[1]}x{again[0]}'}); "
                "the image is too thin for the budget"
            )
        return w, h

    def frame(self, width: int, height: int) -> Frame:
        """The :class:`groundwork.geometry.Frame` of an original ``width x height`` image: the original size and the
        stated frame (:meth:`stated_size`: the size the prompt states and answers map back from; the size sent too,
        unless the budget :attr:`reshrinks`)."""
        return Frame(int(width), int(height), *self.stated_size(width, height))

    def processor_bounds(self) -> tuple[int | None, int | None]:
        """``(min_pixels, max_pixels)`` the processor is set to: this budget's, with ``max_pixels`` lowered to
        ``processor_max_pixels`` when the budget :attr:`reshrinks` (so the processor leaves the image
        :func:`resize_for_model` sent as it is, as the harness's processor did after its own resize)."""
        return self.min_pixels, (self.processor_max_pixels if self.reshrinks else self.max_pixels)

    def apply(self, processor: Any, vlm_module: Any) -> None:
        """Write this budget into ``processor`` (once per run): ``vlm_module.apply_pixel_budget`` (Qwen: the image
        processor's ``size`` bounds, :meth:`processor_bounds`; InternVL: ``max_patches``). An image resized by
        :func:`resize_for_model` is then left as it is by the processor's own smart_resize."""
        lo, hi = self.processor_bounds()
        vlm_module.apply_pixel_budget(processor, replace(self, max_pixels=hi) if hi != self.max_pixels else self)

    # ---- records --------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON form (``vlm_r1_run.json`` ``pixel_budget``; eval's ``metrics.json`` ``meta.pixel_budget``);
        ``processor_max_pixels`` only when set."""
        return {
            "factor": self.factor,
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            "max_tiles": self.max_tiles,
            **({RESHRINK_FIELD: self.processor_max_pixels} if self.processor_max_pixels is not None else {}),
            "sources": dict(self.sources),
            "limits": {"max_aspect_ratio": self.limits.max_aspect_ratio, "min_side": self.limits.min_side},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> PixelBudget:
        """The budget a :meth:`to_dict` record holds, every value's source set to ``source`` (where it was read).

        Raises:
            ValueError: ``data`` is not such a record (one line naming ``source``).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: pixel budget record must be an object, got {type(data).__name__}")
        values = {}
        for name in RESOLVED_FIELDS:
            value = data.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{source}: pixel budget {name} must be an integer or null, got {value!r}")
            values[name] = value
        try:
            return cls(**values, sources={k: source for k, v in values.items() if v is not None})
        except ValueError as err:
            raise ValueError(f"{source}: {err}") from None

    def with_values(self, source: str, **values: int | None) -> PixelBudget:
        """A copy with ``values`` (the ``None`` ones ignored) replaced and their source set to ``source``."""
        given = {k: v for k, v in values.items() if v is not None}
        unknown = set(given) - set(RESOLVED_FIELDS)
        if unknown:
            raise TypeError(f"not pixel budget fields: {sorted(unknown)}")
        return replace(self, **given, sources={**self.sources, **dict.fromkeys(given, source)})

    def values(self) -> dict:
        """``{factor, min_pixels, max_pixels, max_tiles}`` (what decides the image; no sources), and
        ``processor_max_pixels`` when set."""
        out = {name: getattr(self, name) for name in BUDGET_FIELDS}
        if self.processor_max_pixels is not None:
            out[RESHRINK_FIELD] = self.processor_max_pixels
        return out

    def differences(self, other: PixelBudget) -> list[str]:
        """Readable differences of the values that decide the image (``["max_pixels 200,704 vs 8,847,360"]``);
        fields either side leaves unset are not compared."""
        out = []
        for name in RESOLVED_FIELDS:
            a, b = getattr(self, name), getattr(other, name)
            if a is not None and b is not None and a != b:
                out.append(f"{name} {a:,} vs {b:,}")
        return out

    def describe(self) -> str:
        """Multi-line text: each value with its source (printed by every run)."""
        lines = ["pixel budget:"]
        for name in BUDGET_FIELDS:
            value = getattr(self, name)
            shown = f"{value:,}" if value is not None else "-"
            source = self.sources.get(name, "not used by this family" if value is None else "unknown")
            lines.append(f"  {name:<10} {shown:>12}   <- {source}")
        if self.processor_max_pixels is not None:
            effect = "" if self.reshrinks else " (no effect: not below max_pixels)"
            lines.append(
                f"  processor max_pixels {self.processor_max_pixels:,}{effect}: the stated frame is shrunk again to "
                f"this before it is sent   <- {self.sources.get(RESHRINK_FIELD, 'unknown')}"
            )
        if self.limits.max_aspect_ratio or self.limits.min_side > 1:
            lines.append(
                f"  image limits: aspect ratio <= {self.limits.max_aspect_ratio}, side >= "
                f"{self.limits.min_side} px ({self.limits.source or self.limits.family or 'family'})"
            )
        return "\n".join(lines)


def resize_for_model(image: Any, budget: PixelBudget) -> Any:
    """``image`` (PIL, original pixels, displayed frame) as the model is sent it: resized, bicubic (as GTA1 and the
    Qwen image processor resample), to the stated frame (:meth:`PixelBudget.stated_size`), then, when the budget
    :attr:`~PixelBudget.reshrinks`, once more to :meth:`PixelBudget.size_sent` (two resizes, as the harness's PIL
    resize and then its processor's); returned unchanged when the size already matches (and for families without a
    smart_resize frame). The one resize of the project.

    Raises:
        ValueError: an aspect ratio smart_resize refuses (over 200).
    """
    from PIL import Image

    stated, sent = budget.stated_size(*image.size), budget.size_sent(*image.size)
    if tuple(image.size) != stated:
        image = image.resize(stated, Image.Resampling.BICUBIC)
    if tuple(image.size) != sent:
        image = image.resize(sent, Image.Resampling.BICUBIC)
    return image


def resolve(layers: list[tuple[str, Mapping[str, Any]]], *, limits: ImageLimits | None = None) -> PixelBudget:
    """The budget from ``layers`` ``[(source, {field: value or None}), ...]``, highest priority first: each field takes
    the first non-``None`` value, with that layer's ``source``.

    Example: ``resolve([("flag --max_pixels", {"max_pixels": 200704}), ("default of vlm_r1.grpo_jsonl",
    {"min_pixels": 3136, "max_pixels": 12845056}), ("checkpoint preprocessor_config.json", {"factor": 28})])``.

    Raises:
        ValueError: the resolved values are inconsistent (``min_pixels > max_pixels``, a non-positive value).
    """
    values: dict[str, int | None] = dict.fromkeys(RESOLVED_FIELDS)
    sources: dict[str, str] = {}
    for source, layer in layers:
        for name in RESOLVED_FIELDS:
            value = layer.get(name)
            if values[name] is None and value is not None:
                values[name], sources[name] = int(value), source
    if values["factor"] is None:  # a tiling family: the smart_resize bounds do not apply
        for name in ("min_pixels", "max_pixels", RESHRINK_FIELD):
            if values[name] is not None:
                sources[name] = f"{sources[name]} (no effect: this family has no smart_resize frame)"
    elif values["max_tiles"] is not None:  # a smart_resize family: the tile bound does not apply
        sources["max_tiles"] = f"{sources['max_tiles']} (no effect: this family is not tiled)"
    return PixelBudget(**values, limits=limits or ImageLimits(), sources=sources)


def from_processor(vlm_module: Any, processing_class: Any, source: str = "the processor's own settings") -> PixelBudget:
    """The budget ``processing_class`` holds (``vlm_module.processor_budget``), every value from ``source``: what a
    task uses when the entry point bound no budget (a task built directly, e.g. in a notebook or test)."""
    return resolve([(source, vlm_module.processor_budget(processing_class))], limits=vlm_module.image_limits())


def recorded_budget(model_path: str) -> PixelBudget | None:
    """The budget a checkpoint of ours was trained at: ``pixel_budget`` of ``vlm_r1_run.json`` in ``model_path`` or,
    for a ``checkpoint-N`` folder, in its parent (the run's output folder). ``None`` for a checkpoint without one (a
    published checkpoint, or a hub id).

    Raises:
        ValueError: the file exists but its budget record is malformed (one line naming the file).
    """
    if not os.path.isdir(model_path):
        return None
    folders = [model_path]
    if os.path.basename(os.path.abspath(model_path)).startswith("checkpoint-"):
        folders.append(os.path.dirname(os.path.abspath(model_path)))
    for folder in folders:
        path = os.path.join(folder, RUN_INFO_FILE)
        if not os.path.isfile(path):
            continue
        try:
            info = load_json_file(path, "run info")  # a regular file of strict JSON, no key twice
        except ValueError as err:
            raise ValueError(f"{path}: cannot read the recorded pixel budget: {err}") from None
        if isinstance(info, dict) and RUN_INFO_KEY in info:
            return PixelBudget.from_dict(info[RUN_INFO_KEY], f"checkpoint {path}")
    return None


def update_run_info(output_dir: str, values: Mapping[str, Any], *, new_run: bool = False) -> str:
    """The one writer of ``output_dir/vlm_r1_run.json`` (the run's record: what the run resolved to, and its pixel
    budget, which :func:`recorded_budget` reads back); returns the file's path.

    Both moments that write it call this: the start of a GRPO run (``vlm_r1.grpo.write_run_info``, with
    ``new_run=True``: the record starts afresh, so keys of an earlier run in the same folder are not carried over)
    and the final save (:func:`record`: ``pixel_budget`` merged into the keys already there). The file is read,
    updated and written back while its :class:`groundwork.outputs.OutputLock` is held (waiting up to
    :data:`RUN_INFO_LOCK_WAIT_S` for another writer), so two writers cannot lose each other's keys; it is written
    atomically (``groundwork.outputs.write_json``: strict JSON, indent 2, a final newline), so a reader sees a whole
    file. Values JSON cannot hold are written as ``str(value)``; NaN / inf are refused (``ValueError``, the old file
    left as it was). A file there that is not a JSON object is replaced, with a warning. Call it on the main process
    only (rank 0): the callers do.

    Raises:
        OutputError: the folder or the file cannot be written, or the lock stays held.
        ValueError: a value is NaN or infinite.
    """
    fresh = json.loads(json.dumps(dict(values), default=str, allow_nan=False))
    path = os.path.join(output_dir, RUN_INFO_FILE)
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as err:
        raise OutputError(err.errno, f"cannot create folder {output_dir}: {err.strerror or err}") from None
    with OutputLock(path, wait=RUN_INFO_LOCK_WAIT_S):
        info: dict = {}
        if not new_run and os.path.exists(path):
            try:
                loaded = load_json_file(path, "run info")  # a regular file of strict JSON, no key twice
            except ValueError as err:
                loaded = err
            if isinstance(loaded, dict):
                info = loaded
            else:
                what = loaded if isinstance(loaded, Exception) else f"a JSON {type(loaded).__name__}, not an object"
                logger.warning("%s: replacing an unreadable run record (%s)", path, what)
        info.update(fresh)
        write_json(path, info)
    return path


def record(output_dir: str, budget: PixelBudget) -> str:
    """Write ``budget`` as ``pixel_budget`` into ``output_dir/vlm_r1_run.json`` (the file's other keys kept; created
    when absent; :func:`update_run_info`), so :func:`recorded_budget` finds it. Returns the file's path.

    Raises:
        OutputError: the file cannot be written.
    """
    return update_run_info(output_dir, {RUN_INFO_KEY: budget.to_dict()})
