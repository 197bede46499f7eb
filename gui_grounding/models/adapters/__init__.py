"""Model-family adapters (one file per family): prompt, answer frame, parser, SFT target and resize rule.

Registered adapters (``get_adapter(name)``; the frames are those of ``gui_grounding.models.frames``, and each family module
cites the public source of its convention):

==================  =======================  ==========================================  ================================
name                family file              frame of the answer                         prompt
==================  =======================  ==========================================  ================================
``gta1``            ``qwen2_5_vl.py``        resized pixels (smart_resize frame)         GTA1 system prompt (resized H/W)
``gta1-thinking``   ``qwen2_5_vl.py``        same                                        our thinking variant
``gta1-box``        ``qwen2_5_vl.py``        same (answers a box; its centre is scored)  our box variant
``ui-tars-1.5``     ``qwen2_5_vl.py``        resized pixels (UI-TARS pixel bounds)       UI-TARS grounding prompt
``qwen2-vl``        ``qwen2_vl.py``          0-1000 relative (also OS-Atlas, UGround)    OS-Atlas "(with point)" question
``qwen3-vl``        ``qwen3_vl.py``          0-1000 relative                             Qwen3-VL cookbook, JSON point_2d
``internvl``        ``internvl.py``          0-1000 relative box, its centre scored      InternVL ``<ref>`` box request
==================  =======================  ==========================================  ================================

Choosing: ``default_adapter_for(model_type)`` follows each adapter's ``model_types`` (qwen2_5_vl -> gta1, qwen2_vl ->
qwen2-vl, qwen3_vl -> qwen3-vl, internvl -> internvl); training picks the GTA1 prompt variant of ``--prompt_mode`` for the gta1 family
(:func:`training_adapter`); ``--adapter NAME`` overrides both. Third-party adapters register under the entry-point
group ``gui_grounding.models.adapters`` (name -> ``module:Class``).

Pixel budgets: every adapter names its family's published inference budget in ``default_budget`` (a
:class:`groundwork.pixel_budget.PixelBudget`: smart_resize factor, min and max pixels of the resized image or InternVL's
max tiles, each value citing its source). Evaluation resolves one budget per run (``gui_grounding.eval.budget``: the
flag, else ``--profile``, else the budget recorded with the checkpoint, else ``default_budget``) and hands it to
:meth:`Adapter.build_request`, which resizes the screenshot with :func:`groundwork.pixel_budget.resize_for_model`; the
processor (hf, vllm) is set to the same budget, so its own smart_resize is the identity and the frame the prompt states
is the frame the model sees.
"""

from __future__ import annotations

from groundwork.pixel_budget import PixelBudget
from groundwork.registry import Registry, discover
from gui_grounding.models.adapters import qwen2_5_vl
from gui_grounding.models.adapters.base import ANSWER_FRAMES, Adapter, Request, messages_to_text
from gui_grounding.models.adapters.qwen2_5_vl import (
    GTA1_BUDGET,
    GTA1_MAX_PIXELS,
    GTA1_MIN_PIXELS,
    QWEN_FACTOR,
    QWEN_PROCESSOR_MAX_PIXELS,
    QWEN_PROCESSOR_MIN_PIXELS,
    UI_TARS_BUDGET,
    UI_TARS_GROUNDING_PROMPT,
    UI_TARS_MAX_PIXELS,
    UI_TARS_MIN_PIXELS,
    GTA1Adapter,
    GTA1BoxAdapter,
    GTA1ThinkingAdapter,
    UITars15Adapter,
)
from gui_grounding.models.adapters.qwen2_vl import (
    OS_ATLAS_POINT_PROMPT,
    QWEN2_VL_BUDGET,
    Norm1000Adapter,
    Qwen2VLAdapter,
)

ENTRY_POINT_GROUP = "gui_grounding.models.adapters"


def _builtins() -> dict[str, type[Adapter]]:
    """The adapters of this package's family files (each lists its classes in ``ADAPTERS``), GTA1's family first."""

    found = {cls.name: cls for cls in discover("gui_grounding.models.adapters", "ADAPTERS")}
    first = {cls.name: cls for cls in qwen2_5_vl.ADAPTERS}
    return {**first, **{k: v for k, v in found.items() if k not in first}}


#: built-ins + the entry-point group ``gui_grounding.models.adapters`` (name -> ``module:Class``)
REGISTRY = Registry("adapter", ENTRY_POINT_GROUP, _builtins)
ADAPTERS: dict[str, type[Adapter]] = REGISTRY.available()

# --prompt_mode of a GTA1-style training run -> the adapter that trains/evaluates it with the same prompt and parser.
PROMPT_MODE_ADAPTERS = {cls.prompt_mode: cls.name for cls in (GTA1Adapter, GTA1ThinkingAdapter, GTA1BoxAdapter)}

# config.model_type -> adapter name (the family's native convention), from each adapter's ``model_types``.
DEFAULT_ADAPTER_FOR_MODEL_TYPE = {mt: cls.name for cls in ADAPTERS.values() for mt in cls.model_types}


def get_adapter(name: str) -> Adapter:
    """A new adapter instance by registry name.

    Raises:
        ValueError: unknown name; the message lists the registered names.
    """
    if name not in ADAPTERS:
        raise ValueError(f"unknown adapter {name!r}; registered adapters: {', '.join(ADAPTERS)}")
    return ADAPTERS[name]()


def resolve_adapter(adapter: str | Adapter) -> Adapter:
    """``adapter`` itself when it is an :class:`Adapter`, else ``get_adapter(adapter)``."""
    return adapter if isinstance(adapter, Adapter) else get_adapter(adapter)


def default_adapter_for(model_type: str) -> Adapter:
    """The adapter of a checkpoint's ``config.model_type`` (each adapter's ``model_types``): qwen2_5_vl -> gta1
    (Qwen2.5-VL, UI-TARS-1.5, GTA1 and OpenCUA share the architecture; use ``ui-tars-1.5`` explicitly for UI-TARS),
    qwen2_vl -> qwen2-vl, qwen3_vl / qwen3_vl_moe -> qwen3-vl.

    Raises:
        ValueError: no default for ``model_type``; the message lists the known model types and adapter names.
    """
    if model_type not in DEFAULT_ADAPTER_FOR_MODEL_TYPE:
        known = ", ".join(f"{k} -> {v}" for k, v in DEFAULT_ADAPTER_FOR_MODEL_TYPE.items())
        raise ValueError(
            f"no default adapter for model_type {model_type!r} (known: {known}); pick one explicitly "
            f"from: {', '.join(ADAPTERS)}"
        )
    return get_adapter(DEFAULT_ADAPTER_FOR_MODEL_TYPE[model_type])


def training_adapter(model_type: str | None, prompt_mode: str = "non_thinking", name: str | None = None) -> Adapter:
    """The adapter a training run uses: ``name`` (``--adapter``) when given; else the model type's default, where
    the gta1 family follows ``--prompt_mode`` (non_thinking -> gta1, thinking -> gta1-thinking, box -> gta1-box).

    Raises:
        ValueError: unknown adapter or model type; a ``--prompt_mode`` other than non_thinking for a family that has
            no such variant (or that contradicts ``--adapter``).
    """
    if name:
        adapter = get_adapter(name)
        if prompt_mode not in (None, "non_thinking", adapter.prompt_mode):
            raise ValueError(
                f"--prompt_mode {prompt_mode} contradicts --adapter {name} (prompt mode {adapter.prompt_mode})"
            )
        return adapter
    adapter = default_adapter_for(model_type) if model_type else get_adapter("gta1")
    if isinstance(adapter, GTA1Adapter):
        if prompt_mode not in PROMPT_MODE_ADAPTERS:
            raise ValueError(f"--prompt_mode {prompt_mode!r}: choose one of {', '.join(PROMPT_MODE_ADAPTERS)}")
        return get_adapter(PROMPT_MODE_ADAPTERS[prompt_mode])
    if prompt_mode not in (None, "non_thinking"):
        raise ValueError(
            f"--prompt_mode {prompt_mode} exists for the gta1 adapter family only; the {adapter.name} "
            f"adapter ({model_type}) has its own prompt (use --adapter gta1-{prompt_mode} to train this "
            "model with GTA1's prompt)"
        )
    return adapter


__all__ = [
    "ADAPTERS",
    "ANSWER_FRAMES",
    "Adapter",
    "DEFAULT_ADAPTER_FOR_MODEL_TYPE",
    "GTA1Adapter",
    "GTA1BoxAdapter",
    "GTA1ThinkingAdapter",
    "GTA1_BUDGET",
    "GTA1_MAX_PIXELS",
    "GTA1_MIN_PIXELS",
    "Norm1000Adapter",
    "OS_ATLAS_POINT_PROMPT",
    "PROMPT_MODE_ADAPTERS",
    "PixelBudget",
    "QWEN2_VL_BUDGET",
    "QWEN_FACTOR",
    "QWEN_PROCESSOR_MAX_PIXELS",
    "QWEN_PROCESSOR_MIN_PIXELS",
    "Qwen2VLAdapter",
    "Request",
    "UITars15Adapter",
    "UI_TARS_BUDGET",
    "UI_TARS_GROUNDING_PROMPT",
    "UI_TARS_MAX_PIXELS",
    "UI_TARS_MIN_PIXELS",
    "default_adapter_for",
    "get_adapter",
    "messages_to_text",
    "resolve_adapter",
    "training_adapter",
]
