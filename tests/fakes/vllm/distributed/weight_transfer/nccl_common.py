"""``trainer_init`` (vLLM 0.30.0 ``vllm/distributed/weight_transfer/nccl_common.py:222``): here a communicator that
records the broadcast tensors (no NCCL: no GPU)."""

from __future__ import annotations

from types import SimpleNamespace


def trainer_init(init_info):
    info = dict(init_info) if isinstance(init_info, dict) else vars(init_info)
    return SimpleNamespace(init_info=info, group=SimpleNamespace(store=object(), socket=object()))
