"""Device defaults shared by the GRPO and SFT configs."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def bf16_supported() -> bool:
    """True when a CUDA device that supports bfloat16 is present."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def apply_device_defaults(args) -> None:
    """Fit HF ``TrainingArguments`` ``args`` to the machine we run on (in place); call before ``__post_init__``.

    * no CUDA device and ``use_cpu`` unset -> ``use_cpu=True``: without it, accelerate on a GPU-less machine ignores
      torchrun's WORLD_SIZE and every process trains alone (world size 1); with it, the processes form one
      MULTI_CPU/gloo group;
    * ``bf16`` None (SFT's default) and not ``fp16`` -> True only where a GPU supports bf16;
    * ``bf16`` True where no GPU supports it (e.g. upstream VLM-R1 / GTA1 scripts' bare ``--bf16`` on a CPU machine)
      -> a warning and fp32, instead of transformers' "Your setup doesn't support bf16/gpu" error;
    * ``tf32`` True without CUDA -> a warning and off (TF32 is an Ampere+ GPU mode).
    """
    import torch

    if not torch.cuda.is_available() and not args.use_cpu:
        args.use_cpu = True
        logger.info("no CUDA device: use_cpu=True (distributed runs use gloo)")
    if args.bf16 is None and not args.fp16:
        args.bf16 = bf16_supported()
        if not args.bf16:
            logger.info("no bf16-capable GPU: training in fp32")
    elif args.bf16 and not bf16_supported():
        logger.warning("--bf16 given but this machine has no bf16-capable GPU: training in fp32 instead")
        args.bf16 = False
    if getattr(args, "tf32", None) and not torch.cuda.is_available():
        logger.warning("--tf32 given but this machine has no CUDA device: TF32 stays off")
        args.tf32 = None
