"""VLM module registry, keyed by ``config.model_type`` (never by path substrings, unlike upstream VLM-R1)."""

from __future__ import annotations

from groundwork.registry import Registry, by_attribute, discover
from vlm_r1.modules.base import VLMBaseModule
from vlm_r1.modules.qwen import Qwen2VLModule

ENTRY_POINT_GROUP = "vlm_r1.modules"

#: model_type -> module class: the built-in family files of this package (each lists its classes in ``FAMILY``).
MODULES: dict[str, type[VLMBaseModule]] = by_attribute(discover("vlm_r1.modules"), "model_types")

#: built-ins + the entry-point group ``vlm_r1.modules`` (entry-point name = the ``config.model_type`` served).
REGISTRY = Registry("model type", ENTRY_POINT_GROUP, lambda: MODULES)


def available_modules() -> dict[str, type]:
    """``config.model_type`` -> module class: the built-ins, then modules registered by installed packages under the
    entry-point group ``vlm_r1.modules`` (entry-point name = the model type served; a plugin entry replaces a built-in
    one, with a log line)."""
    REGISTRY.refresh()  # entry points may have been installed since (tests install plugins in-process)
    return REGISTRY.available()


def _instantiate(cls: type, model_type: str) -> VLMBaseModule:
    """``cls(model_type)``, or ``cls()`` for modules written for upstream VLM-R1 (``__init__(self)``)."""
    import inspect

    params = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    module = cls(model_type) if params else cls()
    if getattr(module, "model_type", None) is None:
        module.model_type = model_type
    return module


def get_vlm_module(model_type_or_path: str) -> VLMBaseModule:
    """Return the module for a ``config.model_type`` or for a checkpoint directory / hub id (its config is read).

    Raises:
        ValueError: the model type is not supported; the message lists the supported ones.
    """
    modules = available_modules()
    model_type = model_type_or_path
    if model_type not in modules:
        from transformers import AutoConfig

        try:
            model_type = AutoConfig.from_pretrained(model_type_or_path).model_type
        except (OSError, ValueError) as err:
            raise ValueError(
                f"{model_type_or_path!r} is neither a supported model_type ({', '.join(sorted(modules))}) nor a "
                f"loadable checkpoint: {err}"
            ) from err
    if model_type not in modules:
        raise ValueError(
            f"model_type {model_type!r} is not supported; supported model types: {', '.join(sorted(modules))}"
        )
    return _instantiate(modules[model_type], model_type)


def load_processor(path: str, *, min_pixels: int | None = None, max_pixels: int | None = None):
    """The one processor loader: stock AutoProcessor with torchvision, image-only processor without it."""
    return get_vlm_module(path).load_processor(path, min_pixels=min_pixels, max_pixels=max_pixels)


def load_model(path: str, **model_init_kwargs):
    """Load the policy model of checkpoint ``path`` with the class its module names (``from_pretrained`` kwargs)."""
    module = get_vlm_module(path)
    return module.get_model_class(path, model_init_kwargs).from_pretrained(path, **model_init_kwargs)


__all__ = [
    "MODULES",
    "available_modules",
    "VLMBaseModule",
    "Qwen2VLModule",
    "get_vlm_module",
    "load_processor",
    "load_model",
]
