"""VLM module registry, keyed by ``config.model_type`` (never by path substrings, unlike upstream VLM-R1)."""

from __future__ import annotations

from vlm_r1.modules.base import VLMBaseModule
from vlm_r1.modules.qwen import Qwen2VLModule

# model_type -> module class. Add a family by subclassing VLMBaseModule and listing its model types here.
MODULES: dict[str, type[VLMBaseModule]] = {mt: Qwen2VLModule for mt in Qwen2VLModule.model_types}
from vlm_r1.modules.qwen3_vl import Qwen3VLModule  # noqa: E402

MODULES.update(dict.fromkeys(Qwen3VLModule.model_types, Qwen3VLModule))
from vlm_r1.modules.internvl import InternVLModule  # noqa: E402

MODULES.update(dict.fromkeys(InternVLModule.model_types, InternVLModule))


ENTRY_POINT_GROUP = "vlm_r1.modules"


def available_modules() -> dict[str, type]:
    """``config.model_type`` -> module class: the built-ins, then modules registered by installed packages under the
    entry-point group ``vlm_r1.modules`` (entry-point name = the model type served; a plugin entry replaces a built-in
    one, with a log line)."""
    import logging
    from importlib.metadata import entry_points

    modules = dict(MODULES)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in modules:
            logging.getLogger(__name__).info("model_type %s: module %s (entry point) replaces %s", ep.name, ep.value,
                                             modules[ep.name].__name__)  # fmt: skip
        modules[ep.name] = ep.load()
    return modules


def _instantiate(cls: type, model_type: str) -> VLMBaseModule:
    """``cls(model_type)``, or ``cls()`` for modules written for upstream VLM-R1 (``__init__(self)``)."""
    import inspect

    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
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


__all__ = ["MODULES", "available_modules", "VLMBaseModule", "Qwen2VLModule", "get_vlm_module", "load_processor", "load_model"]
