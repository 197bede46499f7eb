"""Device defaults shared by the GRPO and SFT configs."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def apply_device_defaults(args) -> None:
    """Set ``use_cpu`` and ``bf16`` on HF ``TrainingArguments`` ``args`` for the machine we run on (in place).

    * no CUDA device and ``use_cpu`` unset -> ``use_cpu=True``: without it, accelerate on a GPU-less machine ignores
      torchrun's WORLD_SIZE and every process trains alone (world size 1); with it, the processes form one
      MULTI_CPU/gloo group;
    * ``bf16`` unset (None) and not ``fp16`` -> True only where a GPU supports bf16 (fp32 elsewhere).

    Call before ``TrainingArguments.__post_init__``.
    """
    import torch

    if not torch.cuda.is_available() and not args.use_cpu:
        args.use_cpu = True
        logger.info("no CUDA device: use_cpu=True (distributed runs use gloo)")
    if args.bf16 is None and not args.fp16:
        args.bf16 = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        if not args.bf16:
            logger.info("no bf16-capable GPU: training in fp32 (pass --bf16 true to force)")
