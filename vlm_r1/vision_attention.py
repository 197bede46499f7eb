"""The vision tower's packed attention in one call per layer, not one per window or image (issue 29, item 2).

transformers 5.23 packs the tokens of every image of a batch into one sequence for the Qwen2-VL, Qwen2.5-VL and
Qwen3-VL vision towers and describes its segments with ``cu_seqlens``: one segment per image (per frame) in Qwen2-VL
and Qwen3-VL, one per 112 x 112-pixel window in Qwen2.5-VL's windowed blocks (every block but
``fullatt_block_indexes``; the windows are built by ``get_vision_window_index``, ``vision_utils.py:130-188``). With a
flash implementation the vision attention makes one variable-length call; with any other (``sdpa``, ``eager``, ``flex``)
it splits q/k/v by segment and calls attention once per segment (``modeling_qwen2_5_vl.py:291-330``,
``modeling_qwen2_vl.py:381-420``, ``modeling_qwen3_vl.py:277-316``). A 1920 x 1080 screenshot (1932 x 1092 after
smart_resize: 10,764 patches, 180 windows) so costs Qwen2.5-VL 180 calls in each of its 28 windowed blocks, 5,040
small SDPA calls per pass: on a GPU these are launch-bound.

This module gives the vision attention the whole packed sequence instead. :func:`vision_attention_forward` is
registered in transformers' ``AttentionInterface`` (``modeling_utils.py:5234``) under :data:`VISION_VARLEN` and set on
the vision sub-config only (``set_attn_implementation({"vision_config": ...})``, ``modeling_utils.py:1960``; the
decoder keeps its own implementation). The name contains "flash" on purpose: the vision attention takes its
variable-length branch, which passes ``cu_seq_lens_q`` and ``max_length_q``, when ``"flash" in
config._attn_implementation`` (``is_flash_attention_requested``, ``utils/generic.py:269-305``). A name that is not
``flash_attention_<n>`` loads no flash package (``get_correct_attn_implementation``, ``modeling_utils.py:1845-1881``).

Backends (:func:`choose_backend`; ``"auto"`` picks the first that applies):

* ``"flash_attn"``: ``flash_attn.flash_attn_varlen_func``, one call (CUDA, fp16/bf16, ``pip install flash-attn``;
  imported on first use);
* ``"torch_varlen"``: PyTorch's own ``torch.nn.attention.varlen.varlen_attn`` (torch >= 2.10, whose signature takes
  ``scale``), one call (CUDA sm80+, fp16/bf16, head_dim a multiple of 8 up to 256: the flash kernels of
  ``aten._flash_attention_forward``);
* ``"padded"``: one SDPA call over the segments padded to the longest, with a key-padding mask (any device and
  dtype; CUDA otherwise). A padded query row still sees its segment's keys and is dropped afterwards. Equal
  segments (one image, or windows all full) need no padding and no mask;
* ``"runs"`` (CPU): one SDPA call per run of consecutive equal-length segments, each a strided view of the packed
  q/k/v (no copy, no mask). Windows come row by row, so a 1080p image is 20 runs (each window row: its full windows,
  then the narrower edge window) instead of 180 calls. Each segment sees exactly the inputs transformers' loop gives
  SDPA, so the result is bitwise equal to it on CPU, forward and backward (``tests/test_vision_attention.py``), and
  it copies nothing. At 1080p on the 7B shape it takes 3.6x less CPU time than the loop for the attention forward and
  2x less forward+backward (``padded``: 2.2x, 1.8x); the qkv/output projections dominate a whole layer on a CPU, so
  there the gain is ~11% (``benchmarks/bench_vision_attention.py``, ``benchmarks/results/vision_attention_cpu.json``).

FlexAttention is not used: on CUDA its compiled kernel would recompile for every new packed length (issue 29, item 3),
and off CUDA its eager fallback builds the full (N, N) score matrix.

Start-up: :func:`enable_vision_varlen` logs the backend the model's device and dtype give, and which kernels are
present; the first call on each device/dtype/backend logs what ran (segments, calls).
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

#: the name registered in transformers' ``AttentionInterface`` (see the module docstring for the "flash" in it)
VISION_VARLEN = "vlm_r1_vision_flash_varlen"
BACKENDS = ("auto", "flash_attn", "torch_varlen", "padded", "runs")
#: the vision implementations replaced: those that loop per segment (transformers' flash ones already make one call;
#: ``eager`` is kept, since it is chosen on purpose, e.g. for attention weights)
REPLACED = (None, "sdpa", "flex_attention")

# Private attributes on the vision config: a deep-copied model (TRL's reference model) keeps them with the config.
_BACKEND_ATTR = "_vlm_r1_vision_varlen_backend"
_BASE_ATTR = "_vlm_r1_vision_varlen_base"
_HALF = (torch.float16, torch.bfloat16)
_announced: set[tuple] = set()
_kernels: dict[str, Any] = {}


# ---- kernels --------------------------------------------------------------------------------------------------------
def flash_attn_varlen() -> Any:
    """``flash_attn.flash_attn_varlen_func``, or None when flash-attn does not import (imported once, lazily)."""
    if "flash_attn" not in _kernels:
        try:
            _kernels["flash_attn"] = importlib.import_module("flash_attn").flash_attn_varlen_func
        except (ImportError, OSError, AttributeError):  # OSError: a wheel built against another torch/CUDA
            _kernels["flash_attn"] = None
    return _kernels["flash_attn"]


def torch_varlen() -> Any:
    """``torch.nn.attention.varlen.varlen_attn`` when this torch has it with a ``scale`` argument (2.10+; 2.9's has
    none: https://docs.pytorch.org/docs/2.10/nn.attention.varlen.html), else None."""
    if "torch_varlen" not in _kernels:
        fn = None
        try:
            fn = importlib.import_module("torch.nn.attention.varlen").varlen_attn
            if "scale" not in inspect.signature(fn).parameters:
                fn = None
        except (ImportError, AttributeError, ValueError, TypeError):
            fn = None
        _kernels["torch_varlen"] = fn
    return _kernels["torch_varlen"]


def _torch_varlen_fits(device: torch.device, head_dim: int | None = None) -> bool:
    """The flash kernels behind ``varlen_attn`` run here: CUDA sm80+, head_dim a multiple of 8 up to 256."""
    if device.type != "cuda" or torch_varlen() is None:
        return False
    if torch.cuda.get_device_capability(device) < (8, 0):
        return False
    return head_dim is None or (head_dim % 8 == 0 and head_dim <= 256)


def choose_backend(device: torch.device | str, dtype: torch.dtype, requested: str = "auto", head_dim=None) -> str:
    """The backend that runs for tensors on ``device`` in ``dtype``: ``requested`` unless ``"auto"``; auto is
    flash_attn, then torch_varlen (both CUDA fp16/bf16), then ``runs`` on CPU and ``padded`` elsewhere.

    Raises:
        ValueError: an unknown backend.
    """
    if requested not in BACKENDS:
        raise ValueError(f"unknown vision attention backend {requested!r}; choose from {', '.join(BACKENDS)}")
    if requested != "auto":
        return requested
    device = torch.device(device)
    if device.type == "cuda" and dtype in _HALF:
        if flash_attn_varlen() is not None:
            return "flash_attn"
        if _torch_varlen_fits(device, head_dim):
            return "torch_varlen"
    return "runs" if device.type == "cpu" else "padded"


# ---- the packed attention -------------------------------------------------------------------------------------------
def _runs(cu_seqlens: torch.Tensor) -> list[tuple[int, int, int]]:
    """``(start token, number of segments, length)`` of each run of consecutive equal-length segments."""
    bounds = cu_seqlens.tolist()
    runs: list[list[int]] = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        length = end - start
        if length <= 0:
            continue
        if runs and runs[-1][2] == length and runs[-1][0] + runs[-1][1] * length == start:
            runs[-1][1] += 1
        else:
            runs.append([start, 1, length])
    return [tuple(r) for r in runs]


def _attend_runs(q, k, v, cu_seqlens, scale, dropout) -> tuple[torch.Tensor, int]:
    """q/k/v (1, H, N, D) -> (N, H, D), one SDPA call per run (:func:`_runs`); also the number of calls.

    The runs are cut with one ``torch.split`` per tensor, as transformers' loop cuts its windows: its backward
    concatenates the pieces' gradients, where a slice per run would make a full-size zero gradient per run."""
    heads, total, head_dim = q.shape[1], q.shape[2], q.shape[3]
    runs = _runs(cu_seqlens)
    sizes = [count * length for _, count, length in runs]
    if sum(sizes) != total:
        raise ValueError(f"vision attention: cu_seqlens covers {sum(sizes)} tokens, the sequence has {total}")
    if not runs:
        return q.new_zeros(0, heads, head_dim), 0
    pieces = [torch.split(t.squeeze(0), sizes, dim=1) for t in (q, k, v)]
    outs = []
    for (_, count, length), qr, kr, vr in zip(runs, *pieces, strict=True):

        def window_batch(t, count=count, length=length):
            # (H, count*length, D) -> (count, H, length, D): a view; each window is the slice the loop would take
            return t.unflatten(1, (count, length)).transpose(0, 1)

        out = F.scaled_dot_product_attention(
            window_batch(qr), window_batch(kr), window_batch(vr), dropout_p=dropout, scale=scale
        )
        outs.append(out.transpose(1, 2).reshape(count * length, heads, head_dim))
    return torch.cat(outs, dim=0), len(runs)


def _attend_padded(q, k, v, cu_seqlens, max_seqlen, scale, dropout) -> torch.Tensor:
    """q/k/v (1, H, N, D) -> (N, H, D): one SDPA call over the S segments padded to ``max_seqlen``."""
    _, heads, total, head_dim = q.shape
    segments = cu_seqlens.numel() - 1
    width = int(max_seqlen)
    if segments * width == total:  # all segments equal: a view, no padding, no mask

        def batch(t):
            return t[0].unflatten(1, (segments, width)).transpose(0, 1)

        out = F.scaled_dot_product_attention(batch(q), batch(k), batch(v), dropout_p=dropout, scale=scale)
        return out.transpose(1, 2).reshape(total, heads, head_dim)
    device = q.device
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    segment = torch.repeat_interleave(torch.arange(segments, device=device), lengths, output_size=total)
    slot = segment * width + torch.arange(total, device=device) - cu_seqlens[:-1].long()[segment]

    def pad(t):  # (1, H, N, D) -> (S, H, width, D), zeros in the padding
        packed = t[0].transpose(0, 1)
        return (
            packed.new_zeros(segments * width, heads, head_dim)
            .index_copy(0, slot, packed)
            .unflatten(0, (segments, width))
            .transpose(1, 2)
        )

    keep = (torch.arange(width, device=device)[None, :] < lengths[:, None])[:, None, None, :]
    out = F.scaled_dot_product_attention(pad(q), pad(k), pad(v), attn_mask=keep, dropout_p=dropout, scale=scale)
    return out.transpose(1, 2).reshape(segments * width, heads, head_dim).index_select(0, slot)


def packed_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int | None = None,
    *,
    scale: float | None = None,
    dropout: float = 0.0,
    backend: str = "auto",
) -> torch.Tensor:
    """Bidirectional attention within each segment of a packed sequence, in one call (``runs``: one per run).

    Args:
        query, key, value: ``(1, H, N, D)``, the layout transformers' vision attention hands its interface.
        cu_seqlens: ``(S + 1,)`` segment bounds (int32, as ``get_vision_cu_seqlens`` / ``get_vision_window_index``).
        max_seqlen: the longest segment (computed when None).
        scale: the softmax scale (None: ``D ** -0.5``).
        backend: one of :data:`BACKENDS`.

    Returns:
        ``(N, H, D)``: what transformers' per-segment loop gives, concatenated.
    """
    if query.shape[1] != key.shape[1]:
        raise ValueError("vision attention: query and key/value head counts differ (no GQA in the vision towers)")
    head_dim = query.shape[-1]
    name = choose_backend(query.device, query.dtype, backend, head_dim)
    if max_seqlen is None:
        max_seqlen = int((cu_seqlens[1:] - cu_seqlens[:-1]).max()) if cu_seqlens.numel() > 1 else 0
    calls = 1
    if name == "flash_attn":
        fn = flash_attn_varlen()
        if fn is None:
            raise ImportError(
                "vision attention backend 'flash_attn': flash-attn does not import (pip install flash-attn)"
            )
        q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))
        cu = cu_seqlens.to(torch.int32)
        out = fn(q, k, v, cu, cu, max_seqlen, max_seqlen, dropout_p=dropout, softmax_scale=scale, causal=False)
    elif name == "torch_varlen" and dropout == 0.0:
        fn = torch_varlen()
        if fn is None:
            raise ImportError("vision attention backend 'torch_varlen': this torch has no varlen_attn with scale")
        q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))
        cu = cu_seqlens.to(torch.int32)
        out = fn(q, k, v, cu, cu, max_seqlen, max_seqlen, scale=scale)
    elif name == "runs":
        out, calls = _attend_runs(query, key, value, cu_seqlens, scale, dropout)
    else:  # padded (also torch_varlen with dropout, which varlen_attn has not)
        name = "padded"
        out = _attend_padded(query, key, value, cu_seqlens, max_seqlen, scale, dropout)
    _announce(name, query, cu_seqlens, calls)
    return out


def _announce(name: str, query: torch.Tensor, cu_seqlens: torch.Tensor, calls: int) -> None:
    """Log once per (backend, device, dtype) what the first call ran."""
    key = (name, str(query.device), query.dtype)
    if key in _announced:
        return
    _announced.add(key)
    segments = cu_seqlens.numel() - 1
    logger.info(
        "vision attention: %s on %s %s: %d window/image segment%s in %d call%s (transformers' loop: %d)",
        name,
        query.device,
        str(query.dtype).removeprefix("torch."),
        segments,
        "" if segments == 1 else "s",
        calls,
        "" if calls == 1 else "s",
        segments,
    )


def vision_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    scaling: float | None = None,
    dropout: float = 0.0,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: int | None = None,
    max_length_k: int | None = None,
    is_causal: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The ``AttentionInterface`` function under :data:`VISION_VARLEN`: transformers' flash calling convention
    (``modeling_qwen2_5_vl.py:294-308``), returning ``((1, N, H, D), None)`` as ``flash_attention_forward`` does.

    Raises:
        ValueError: a call that is not the vision towers' (causal, a mask, no ``cu_seq_lens_q``, other key bounds).
    """
    if is_causal or attention_mask is not None or cu_seq_lens_q is None:
        raise ValueError(
            f"{VISION_VARLEN} serves the vision towers' bidirectional packed attention only "
            "(cu_seq_lens_q given, no mask, not causal)"
        )
    if (
        cu_seq_lens_k is not None
        and cu_seq_lens_k is not cu_seq_lens_q
        and not torch.equal(cu_seq_lens_k, cu_seq_lens_q)
    ):
        raise ValueError(f"{VISION_VARLEN}: key segments differ from query segments")
    backend = getattr(getattr(module, "config", None), _BACKEND_ATTR, "auto")
    out = packed_attention(
        query, key, value, cu_seq_lens_q, max_length_q, scale=scaling, dropout=dropout, backend=backend
    )
    return out.unsqueeze(0), None


# ---- installation ---------------------------------------------------------------------------------------------------
def register_vision_varlen() -> None:
    """Register :func:`vision_attention_forward` under :data:`VISION_VARLEN` (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(VISION_VARLEN, vision_attention_forward)


def _owner(model: Any, sub_config: str) -> Any:
    """The outermost ``PreTrainedModel`` in ``model`` (possibly DDP/DeepSpeed/PEFT-wrapped) whose config has
    ``sub_config``."""
    from transformers import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel) and getattr(module.config, sub_config, None) is not None:
            return module
    raise ValueError(f"{type(model).__name__} has no PreTrainedModel with a {sub_config!r}")


def kernels_present() -> str:
    """Which one-call kernels this process has, for the start-up line."""
    flash = "installed" if flash_attn_varlen() is not None else "not installed"
    varlen = "available" if torch_varlen() is not None else "not in this torch"
    return f"flash-attn {flash}; torch varlen_attn {varlen}; CUDA {'yes' if torch.cuda.is_available() else 'no'}"


def enable_vision_varlen(model: Any, *, sub_config: str = "vision_config", backend: str = "auto", family: str = ""):
    """Give the vision tower of ``model`` one attention call per layer (:func:`vision_attention_forward`).

    Only a vision implementation in :data:`REPLACED` is replaced (the default ``sdpa``); transformers' flash
    implementations, ``eager`` and custom ones are kept, with a log line. Idempotent; a second call updates the
    backend.

    Args:
        model: a loaded transformers model, possibly wrapped; None does nothing.
        sub_config: the attribute of the model's config holding the vision config (the family says which).
        backend: one of :data:`BACKENDS` (``"auto"``: :func:`choose_backend` at each call).
        family: the model type, for the log line.

    Returns:
        The backend the model's current device and dtype give, or None when the vision tower was left alone.
    """
    if model is None:
        return None
    choose_backend("cpu", torch.float32, backend)  # validates
    register_vision_varlen()
    owner = _owner(model, sub_config)
    vision = getattr(owner.config, sub_config)
    current = vision._attn_implementation
    label = family or type(owner).__name__
    if current != VISION_VARLEN:
        if current not in REPLACED:
            logger.info(
                "vision attention (%s): kept %s (flash: already one varlen call per layer; eager or custom: chosen)",
                label,
                current,
            )
            return None
        setattr(vision, _BASE_ATTR, current or "sdpa")
        owner.set_attn_implementation({sub_config: VISION_VARLEN})
        if vision._attn_implementation != VISION_VARLEN:
            raise RuntimeError(
                f"{type(owner).__name__} did not take {sub_config} attn_implementation={VISION_VARLEN!r}"
            )
    setattr(vision, _BACKEND_ATTR, backend)
    tower = next((m for m in owner.modules() if m is not owner and getattr(m, "config", None) is vision), owner)
    param = next(tower.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None else torch.float32
    planned = choose_backend(device, dtype, backend, _vision_head_dim(vision))
    logger.info(
        "vision attention (%s): packed, one call per layer instead of one per window/image (runs: one per run of "
        "equal windows), replacing %s; on %s %s: %s (auto: flash_attn, then torch_varlen on CUDA fp16/bf16, else runs "
        "on CPU, padded elsewhere; %s)",
        label,
        getattr(vision, _BASE_ATTR),
        device,
        str(dtype).removeprefix("torch."),
        planned,
        kernels_present(),
    )
    return planned


def _vision_head_dim(vision: Any) -> int | None:
    """hidden / heads of a vision config (Qwen2-VL's width is ``embed_dim``)."""
    width = getattr(vision, "embed_dim", None) or getattr(vision, "hidden_size", None)
    heads = getattr(vision, "num_heads", None)
    return int(width) // int(heads) if width and heads else None


def disable_vision_varlen(model: Any, *, sub_config: str = "vision_config") -> None:
    """Give the vision tower back the implementation :func:`enable_vision_varlen` replaced (benchmarks, tests)."""
    owner = _owner(model, sub_config)
    vision = getattr(owner.config, sub_config)
    if vision._attn_implementation == VISION_VARLEN:
        owner.set_attn_implementation({sub_config: getattr(vision, _BASE_ATTR, None) or "sdpa"})
