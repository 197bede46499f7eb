"""``packed_nccl_broadcast_producer`` (vLLM 0.30.0 ``vllm/distributed/weight_transfer/packed_tensor.py:15-16,144-151``):
here it drains the iterator and records each ``(name, shape)`` in ``vllm._fake.RECORD["weights"]``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from vllm import _fake

DEFAULT_PACKED_BUFFER_SIZE_BYTES = 1024 * 1024 * 1024
DEFAULT_PACKED_NUM_BUFFERS = 2


def packed_nccl_broadcast_producer(
    iterator: Iterator[tuple[str, Any]],
    group: Any,
    src: int,
    post_iter_func: Callable[[tuple[str, Any]], Any],
    buffer_size_bytes: int = DEFAULT_PACKED_BUFFER_SIZE_BYTES,
    num_buffers: int = DEFAULT_PACKED_NUM_BUFFERS,
) -> None:
    for item in iterator:
        _fake.RECORD["weights"].append((item[0], tuple(post_iter_func(item).shape)))
