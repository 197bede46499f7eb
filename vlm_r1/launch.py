"""What the training entry points (``vlm_r1.grpo_jsonl``, ``vlm_r1.sft``) share: logging, policy loading, the final
save, and keeping a dataset's lazy image transform across ``map``/``concatenate``."""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger("vlm_r1")


def setup_logging() -> None:
    """INFO on rank 0, WARNING elsewhere; every line names its rank (``RANK`` from torchrun)."""
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s [rank{rank}] %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")  # fmt: skip


def with_transform_of(source: Any, dataset: Any) -> Any:
    """``dataset`` with ``source``'s custom ``with_transform`` function put back (``datasets`` drops it on ``map`` of
    an unformatted copy and on ``concatenate_datasets`` of differing formats); ``dataset`` itself when there is none."""
    fmt = source.format
    if fmt["type"] == "custom":
        return dataset.with_transform(fmt["format_kwargs"]["transform"])
    return dataset


def load_policy_model(model_args: Any, training_args: Any, vlm_module: Any):
    """The policy model from ``--model_name_or_path`` with every ``ModelConfig`` loading flag applied.

    ``--model_revision``, ``--trust_remote_code``, ``--dtype`` (``auto``/None: the checkpoint's; bfloat16 without a bf16-capable GPU: float32 with a warning), quantisation
    (``--load_in_4bit/8bit``), ``--attn_implementation`` (``flash_attention_2`` falls back to sdpa with a warning when
    flash-attn is missing). With ``--deepspeed`` on a GPU-less machine the gloo process group is created first (with
    ``use_cpu`` accelerate skips DeepSpeed's own setup, and ZeRO-3 loading would otherwise see world size 1).
    """
    from trl import get_quantization_config

    init_kwargs = dict(revision=model_args.model_revision, attn_implementation=model_args.attn_implementation,
                       trust_remote_code=training_args.trust_remote_code)  # fmt: skip
    if model_args.dtype not in (None, "auto"):
        import torch

        from vlm_r1.devices import bf16_supported

        dtype = model_args.dtype
        if dtype == "bfloat16" and not bf16_supported():
            logger.warning("dtype bfloat16 but this machine has no bf16-capable GPU: loading the model in float32")
            dtype = "float32"
        init_kwargs["dtype"] = getattr(torch, dtype)
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        init_kwargs["quantization_config"] = quantization_config
    if model_args.attn_implementation == "flash_attention_2":
        try:
            import flash_attn  # noqa: F401
        except ImportError:
            logger.warning("flash-attn is not installed: using sdpa instead (pip install -e .[gpu] on GPU nodes)")
            init_kwargs["attn_implementation"] = "sdpa"
    if training_args.deepspeed:
        import torch

        if not torch.cuda.is_available():
            import deepspeed

            deepspeed.init_distributed(dist_backend="gloo")
    path = model_args.model_name_or_path
    model_cls = vlm_module.get_model_class(path, init_kwargs)
    return model_cls.from_pretrained(path, **{k: v for k, v in init_kwargs.items() if v is not None})


def save_final(trainer: Any, processor: Any, vlm_module: Any, output_dir: str, title: str) -> None:
    """Save model, processor (tidied by the module), ``trainer_state.json`` and ``training_curves.png``."""
    from vlm_r1.plots import plot_training_curves

    trainer.save_model(output_dir)
    if not trainer.accelerator.is_main_process:
        return
    trainer.save_state()  # trainer_state.json with the per-step log history
    try:
        png = plot_training_curves(os.path.join(output_dir, "trainer_state.json"),
                                   os.path.join(output_dir, "training_curves.png"), title=title)  # fmt: skip
        logger.info("training curves: %s", png)
    except ValueError as err:  # e.g. fewer steps than --logging_steps: nothing to draw, the run itself is fine
        logger.warning("no training curves: %s (log more often with --logging_steps)", err)
    processor.save_pretrained(output_dir)
    if hasattr(vlm_module, "tidy_saved_processor"):
        vlm_module.tidy_saved_processor(output_dir)
    logger.info("saved model and processor to %s", output_dir)
