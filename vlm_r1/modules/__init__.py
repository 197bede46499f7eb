"""VLM module registry, keyed by ``config.model_type`` (never by path substrings, unlike upstream VLM-R1)."""

from __future__ import annotations

from vlm_r1.modules.base import VLMBaseModule
from vlm_r1.modules.qwen import Qwen2VLModule

# model_type -> module class. Add a family by subclassing VLMBaseModule and listing its model types here.
MODULES: dict[str, type[VLMBaseModule]] = {mt: Qwen2VLModule for mt in Qwen2VLModule.model_types}


def get_vlm_module(model_type_or_path: str) -> VLMBaseModule:
    """Return the module for a ``config.model_type`` or for a checkpoint directory / hub id (its config is read).

    Raises:
        ValueError: the model type is not supported; the message lists the supported ones.
    """
    model_type = model_type_or_path
    if model_type not in MODULES:
        from transformers import AutoConfig

        try:
            model_type = AutoConfig.from_pretrained(model_type_or_path).model_type
        except (OSError, ValueError) as err:
            raise ValueError(
                f"{model_type_or_path!r} is neither a supported model_type ({', '.join(sorted(MODULES))}) nor a "
                f"loadable checkpoint: {err}"
            ) from err
    if model_type not in MODULES:
        raise ValueError(
            f"model_type {model_type!r} is not supported; supported model types: {', '.join(sorted(MODULES))}"
        )
    return MODULES[model_type](model_type)


def load_processor(path: str, *, min_pixels: int | None = None, max_pixels: int | None = None):
    """The one processor loader: stock AutoProcessor with torchvision, image-only processor without it."""
    return get_vlm_module(path).load_processor(path, min_pixels=min_pixels, max_pixels=max_pixels)


def load_model(path: str, **model_init_kwargs):
    """Load the policy model of checkpoint ``path`` with the class its module names (``from_pretrained`` kwargs)."""
    module = get_vlm_module(path)
    return module.get_model_class(path, model_init_kwargs).from_pretrained(path, **model_init_kwargs)


__all__ = ["MODULES", "VLMBaseModule", "Qwen2VLModule", "get_vlm_module", "load_processor", "load_model"]
