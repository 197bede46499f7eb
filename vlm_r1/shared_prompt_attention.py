"""Split attention for packed shared-prompt rows: no dense L x L mask (Prefix Grouper, arXiv 2506.05433).

A packed row from :func:`vlm_r1.shared_prompt.pack_groups` is ``[prefix | suffix_1 | ... | suffix_G | padding]``.
Its attention pattern (the one :func:`vlm_r1.shared_prompt.dense_mask` writes out as an (L, L) mask) splits in two:

* the prefix attends causally to itself: one causal attention over ``P`` tokens;
* every suffix attends to the whole prefix and causally to its own tokens: with keys/values ``[prefix | suffix g]``
  that is a causal mask aligned to the *bottom right* (query j of ``n`` sees keys ``< P + j + 1``);
* padding tokens get a zero output (nobody reads them and no query attends to them).

So no L x L tensor is ever built: memory per row is O(P*d) for the prefix and O(S*(P+S)) for the suffix mask,
S = sum of the suffix lengths (a few hundred tokens in GUI grounding, against thousands of prompt tokens).

The function is registered in transformers' ``AttentionInterface`` under :data:`SPLIT_ATTENTION`
(transformers 5.23 ``modeling_utils.py:5234``); every decoder layer looks its function up by
``config._attn_implementation`` at call time (``modeling_qwen2_5_vl.py:654-668``) and forwards the model's extra
keyword arguments to it, so :func:`vlm_r1.shared_prompt.per_token_logps_and_entropies` (``attention="split"``) passes
the layout as the keyword ``shared_prompt_segments`` (a :class:`~vlm_r1.shared_prompt.SegmentInfo`). Without that
keyword (generation, naive log-probs, any other forward) the call goes to the implementation the model had before
(:func:`enable_split_attention` remembers it), so the same model object still generates normally.

Backends:

* ``"reference"``: :func:`torch.nn.functional.scaled_dot_product_attention` per packed row (any device, any dtype);
* ``"flash"``: one ``flash_attn.flash_attn_varlen_func`` call for all prefixes and suffixes of the batch (CUDA,
  fp16/bf16, ``pip install flash-attn`` >= 2.1, whose causal mask is bottom-right aligned when a sequence has more
  keys than queries). Each suffix's key sequence is ``[prefix K/V | suffix K/V]``, so the prefix K/V are gathered
  once per suffix: G extra copies of ``P x Hkv x d`` per layer (saved for backward unless gradient checkpointing is on).
* ``"flex"``: one :func:`torch.nn.attention.flex_attention.flex_attention` call per layer over the packed rows, with a
  block mask built from the layout (torch's own kernel, no extra package; compiled with ``torch.compile`` on CUDA
  with dynamic shapes, so once for every packed length; the eager reference implementation elsewhere, which builds
  the (L, L) scores and is for tests only). Nothing is gathered:
  the mask keeps each suffix to the prefix and its own past, so memory is the packed row's alone.
* ``"auto"`` (default): flash when the query is on CUDA in fp16/bf16 and ``flash_attn`` imports; else flex on CUDA;
  else reference.

Measured on a GPU: ``benchmarks/gpu_check.py`` (part a) compares the backend that ran with the naive dense path in
bf16 on a Qwen2.5-VL-7B-shaped layer stack; results under ``benchmarks/results/``.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

#: name registered in transformers' ``AttentionInterface`` and ``AttentionMaskInterface``.
SPLIT_ATTENTION = "shared_prompt_split"
#: keyword the packed forward passes down to every attention call (:class:`vlm_r1.shared_prompt.SegmentInfo`).
SEGMENTS_KWARG = "shared_prompt_segments"
BACKENDS = ("auto", "reference", "flash", "flex")

# Private attributes on the text config: the implementation to delegate to and the requested backend. Attributes
# rather than a side table so that a deep-copied model (TRL's reference model) keeps them.
_BASE_ATTR = "_shared_prompt_base_attn_implementation"
_BACKEND_ATTR = "_shared_prompt_split_backend"
_HOOKED_ATTR = "_shared_prompt_split_hooked"


# ---- backends ------------------------------------------------------------------------------------------------------
def _import_flash_attn() -> Any:
    """The ``flash_attn`` module (imported on first use), or ImportError saying how to get it."""
    try:
        flash_attn = importlib.import_module("flash_attn")
    except ImportError as err:
        raise ImportError(
            "split attention backend 'flash' needs flash-attn >= 2.1 (`pip install flash-attn`; CUDA GPUs only); "
            "use backend 'reference' or 'auto' without it"
        ) from err
    version = str(getattr(flash_attn, "__version__", "0"))
    major_minor = tuple(int(p) for p in (version.split(".") + ["0"])[:2] if p.isdigit())
    if major_minor < (2, 1):
        # before 2.1 the causal mask of a sequence with more keys than queries was aligned top-left (flash-attn README)
        raise ImportError(f"split attention backend 'flash' needs flash-attn >= 2.1 (found {version})")
    return flash_attn


def _flash_available() -> bool:
    try:
        _import_flash_attn()
    except ImportError:
        return False
    return True


def _flex_available() -> bool:
    try:
        importlib.import_module("torch.nn.attention.flex_attention")
    except ImportError:
        return False
    return True


def split_backend(device: torch.device | str, dtype: torch.dtype, requested: str = "auto") -> str:
    """Which backend split attention runs for a query on ``device`` in ``dtype``: ``"flash"``, ``"flex"`` or
    ``"reference"``.

    ``requested``: ``"auto"`` (flash on CUDA in fp16/bf16 when ``flash_attn`` imports; else flex on CUDA when torch has
    FlexAttention; else reference), ``"reference"``, ``"flash"`` (forced, any device; raises ImportError without
    flash-attn >= 2.1) or ``"flex"`` (forced, any device; raises ImportError on a torch without FlexAttention).
    """
    if requested not in BACKENDS:
        raise ValueError(f"unknown split attention backend {requested!r}; choose from {', '.join(BACKENDS)}")
    if requested == "reference":
        return "reference"
    if requested == "flash":
        _import_flash_attn()
        return "flash"
    if requested == "flex":
        if not _flex_available():
            raise ImportError("split attention backend 'flex' needs torch.nn.attention.flex_attention (torch >= 2.5)")
        return "flex"
    on_cuda = torch.device(device).type == "cuda"
    if on_cuda and dtype in (torch.float16, torch.bfloat16) and _flash_available():
        return "flash"
    if on_cuda and _flex_available():
        return "flex"
    return "reference"


def _suffix_mask(prefix_len: int, suffix_lens: Sequence[int], device: torch.device) -> torch.Tensor:
    """(S, P + S) bool, True = attend: suffix token t sees the whole prefix and the tokens of its own suffix <= t."""
    S = int(sum(suffix_lens))
    seg = torch.repeat_interleave(
        torch.arange(len(suffix_lens), device=device), torch.tensor(list(suffix_lens), device=device)
    )
    idx = torch.arange(S, device=device)
    own = (seg[:, None] == seg[None, :]) & (idx[:, None] >= idx[None, :])
    return torch.cat([torch.ones(S, prefix_len, dtype=torch.bool, device=device), own], dim=1)


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(b, Hkv, L, d) -> (b, Hkv * n_rep, L, d), each kv head repeated for its ``n_rep`` query heads."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


def _reference_split(query, key, value, segments, scaling, dropout) -> torch.Tensor:
    """SDPA per packed row. query (b, H, L, d), key/value (b, Hkv, L, d) -> (b, H, L, d), zeros at padding."""
    b, H, L, d = query.shape
    n_rep = H // key.size(1)
    rows = []
    for i, (P, lens) in enumerate(segments):
        S = int(sum(lens))
        parts = []
        if P:
            # no mask: SDPA's own causal kernels; GQA without copying K/V (transformers ``use_gqa_in_sdpa``,
            # integrations/sdpa_attention.py:43-53, enables it on CUDA only in this no-mask case)
            parts.append(
                F.scaled_dot_product_attention(
                    query[i : i + 1, :, :P],
                    key[i : i + 1, :, :P],
                    value[i : i + 1, :, :P],
                    dropout_p=dropout,
                    is_causal=True,
                    scale=scaling,
                    enable_gqa=n_rep > 1,
                )
            )
        if S:
            # keys [prefix | all suffixes of the row] are contiguous in the packed row; the mask keeps suffix g to
            # the prefix and its own past. With a mask, repeat K/V as transformers does (sdpa_attention.py:136-138).
            parts.append(
                F.scaled_dot_product_attention(
                    query[i : i + 1, :, P : P + S],
                    _repeat_kv(key[i : i + 1, :, : P + S], n_rep),
                    _repeat_kv(value[i : i + 1, :, : P + S], n_rep),
                    attn_mask=_suffix_mask(P, lens, query.device),
                    dropout_p=dropout,
                    scale=scaling,
                )
            )
        if L - P - S:
            parts.append(query.new_zeros(1, H, L - P - S, value.size(-1)))
        rows.append(torch.cat(parts, dim=2))
    return torch.cat(rows, dim=0)


def _flash_plan(segments, L: int, device: torch.device) -> dict:
    """Index tensors for one varlen call over a batch of packed rows (built once per layout and device).

    Sequences, in order: per row its prefix (queries = keys = prefix), then each suffix g (queries = suffix g,
    keys = [prefix | suffix g]). ``q_index``: every non-padding token of the flattened (b * L) batch, in order;
    ``k_index``: the key tokens of every sequence, concatenated.
    """
    q_index, k_index, cu_q, cu_k = [], [], [0], [0]
    for i, (P, lens) in enumerate(segments):
        base = i * L
        prefix = torch.arange(base, base + P)
        if P:
            q_index.append(prefix)
            k_index.append(prefix)
            cu_q.append(cu_q[-1] + P)
            cu_k.append(cu_k[-1] + P)
        start = base + P
        for n in lens:
            own = torch.arange(start, start + n)
            q_index.append(own)
            k_index.extend([prefix, own])
            cu_q.append(cu_q[-1] + n)
            cu_k.append(cu_k[-1] + P + n)
            start += n
    q_lens = [b - a for a, b in zip(cu_q[:-1], cu_q[1:], strict=True)]
    k_lens = [b - a for a, b in zip(cu_k[:-1], cu_k[1:], strict=True)]
    return {
        "q_index": torch.cat(q_index).to(device),
        "k_index": torch.cat(k_index).to(device),
        "cu_q": torch.tensor(cu_q, dtype=torch.int32, device=device),
        "cu_k": torch.tensor(cu_k, dtype=torch.int32, device=device),
        "max_q": max(q_lens),
        "max_k": max(k_lens),
    }


def _cached_plan(info: Any, L: int, device: torch.device) -> dict:
    """:func:`_flash_plan` cached on the ``SegmentInfo`` object (every layer, and the checkpointed recompute, of one
    forward passes the same object)."""
    cache = getattr(info, "_flash_plans", None)
    if not isinstance(cache, dict):
        cache = {}
        try:
            info._flash_plans = cache
        except AttributeError:  # an immutable layout object: no cache
            pass
    key = (str(device), L)
    if key not in cache:
        cache[key] = _flash_plan(info.segments, L, device)
    return cache[key]


def _flash_split(query, key, value, info, scaling, dropout) -> torch.Tensor:
    """One ``flash_attn_varlen_func`` call. query (b, H, L, d), key/value (b, Hkv, L, d) -> (b, L, H, d)."""
    flash_attn = _import_flash_attn()
    b, H, L, d = query.shape
    plan = _cached_plan(info, L, query.device)
    q = query.transpose(1, 2).reshape(b * L, H, d).index_select(0, plan["q_index"])
    k = key.transpose(1, 2).reshape(b * L, key.size(1), d).index_select(0, plan["k_index"])
    v = value.transpose(1, 2).reshape(b * L, value.size(1), value.size(-1)).index_select(0, plan["k_index"])
    out = flash_attn.flash_attn_varlen_func(
        q,
        k,
        v,
        plan["cu_q"],
        plan["cu_k"],
        plan["max_q"],
        plan["max_k"],
        dropout_p=dropout,
        softmax_scale=scaling,
        causal=True,
    )
    full = out.new_zeros(b * L, H, out.size(-1)).index_copy(0, plan["q_index"], out)
    return full.view(b, L, H, out.size(-1))


def _flex_documents(segments, L: int, device: torch.device) -> torch.Tensor:
    """(b, L) int32 document ids of the packed rows: 0 = prefix, g + 1 = suffix g, -1 = padding."""
    rows = []
    for P, lens in segments:
        ids = [0] * P
        for g, n in enumerate(lens):
            ids += [g + 1] * n
        rows.append(ids + [-1] * (L - len(ids)))
    return torch.tensor(rows, dtype=torch.int32, device=device)


def _flex_block_mask(info: Any, L: int, device: torch.device) -> Any:
    """The FlexAttention ``BlockMask`` of the layout, cached on the ``SegmentInfo`` (every layer and the checkpointed
    recompute of one forward pass the same object). Query q may see key k when ``k <= q`` and k is in the prefix or in
    q's own suffix; a padding query sees only itself (a finite, discarded output rather than a fully masked row)."""
    from torch.nn.attention.flex_attention import create_block_mask

    cache = getattr(info, "_flex_masks", None)
    if not isinstance(cache, dict):
        cache = {}
        try:
            info._flex_masks = cache
        except AttributeError:
            pass
    key = (str(device), L)
    if key not in cache:
        docs = _flex_documents(info.segments, L, device)

        def mask_mod(b, h, q, kv):
            dq, dk = docs[b, q], docs[b, kv]
            real = (dq >= 0) & ((dk == 0) | (dk == dq))
            return (kv <= q) & (real | ((dq < 0) & (kv == q)))

        cache[key] = (create_block_mask(mask_mod, docs.size(0), None, L, L, device=device), docs >= 0)
    return cache[key]


#: device types on which :func:`_flex_function` compiles FlexAttention. CUDA only by default: elsewhere the eager
#: implementation runs (tests). torch 2.13's inductor also compiles it on CPU, for inference only (no backward:
#: ``torch/_inductor/kernel/flex/flex_cpu.py`` raises on the log-sum-exp output a backward needs), so a test adds
#: ``"cpu"`` here to count the compiled path's recompilations on CPU.
COMPILE_DEVICES: tuple[str, ...] = ("cuda",)
#: the ``torch.compile`` backend; a test may use ``"aot_eager"`` (the same dynamo guards, hence the same
#: recompilations, without inductor's code generation).
COMPILE_BACKEND = "inductor"
_COMPILED_FLEX: dict[tuple[str, str], Callable] = {}


def _flex_function(device: torch.device) -> Callable:
    """``flex_attention``, compiled once per process and device type in :data:`COMPILE_DEVICES` (its fused kernel);
    the eager implementation elsewhere.

    Compiled with dynamic shapes (``dynamic=True``), so one compiled kernel serves every packed length L and row
    count b. The packed length changes with nearly every batch (screenshot size, instruction and completion lengths),
    and with ``dynamic=False`` each new L recompiled (about 10 s each on an H200, docs/GPU_CHECK.md part a) until
    dynamo's recompile limit (``torch._dynamo.config.recompile_limit``, 8), after which the call fell back to the eager
    implementation that builds the (L, L) scores. Bucketing L to a few padded sizes would also bound the compiles,
    but only as many as there are buckets, and with padding; the price of dynamic shapes is the kernel's bounds checks
    (``IS_DIVISIBLE`` is only set when L is statically a multiple of 128, torch/_inductor/kernel/flex/
    flex_attention.py:344-353). Dynamo still specialises sizes 0 and 1 (b = 1 and b > 1 are two compiles).
    """
    from torch.nn.attention.flex_attention import flex_attention

    if device.type not in COMPILE_DEVICES:
        return flex_attention
    key = (device.type, COMPILE_BACKEND)
    if key not in _COMPILED_FLEX:
        _COMPILED_FLEX[key] = torch.compile(flex_attention, dynamic=True, backend=COMPILE_BACKEND)
    return _COMPILED_FLEX[key]


def _flex_split(query, key, value, info, scaling, dropout) -> torch.Tensor:
    """One FlexAttention call. query (b, H, L, d), key/value (b, Hkv, L, d) -> (b, L, H, d), zeros at padding."""
    if dropout:
        raise NotImplementedError("split attention backend 'flex' has no attention dropout; use 'reference'")
    b, H, L, d = query.shape
    block_mask, real = _flex_block_mask(info, L, query.device)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    if query.device.type == "cpu" and needs_grad:
        # FlexAttention has no backward on CPU (torch 2.13 flex_attention.py raises): the same mask, materialised
        # from the block mask's mask_mod, through SDPA (tests only; O(L^2) memory)
        from torch.nn.attention.flex_attention import create_mask

        mask = create_mask(block_mask.mask_mod, b, None, L, L, device=query.device)
        n_rep = H // key.size(1)
        out = F.scaled_dot_product_attention(
            query, _repeat_kv(key, n_rep), _repeat_kv(value, n_rep), attn_mask=mask, scale=scaling
        )
    else:
        out = _flex_function(query.device)(
            query, key, value, block_mask=block_mask, scale=scaling, enable_gqa=H != key.size(1)
        )
    out = out.transpose(1, 2)
    return torch.where(real[:, :, None, None], out, out.new_zeros(())).contiguous()


# ---- the registered functions ----------------------------------------------------------------------------------------
def _base_attention(module: torch.nn.Module) -> Callable:
    """The attention function of the implementation the model had before :func:`enable_split_attention`."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    base = getattr(module.config, _BASE_ATTR, None) or "sdpa"
    if base == "eager":
        # "eager" is not in the global interface: each modeling file has its own ``eager_attention_forward``, the
        # default of ``get_interface`` (modeling_qwen2_5_vl.py:229 and :654-656)
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        if eager is None:
            raise RuntimeError(f"no eager_attention_forward next to {type(module).__name__} to delegate to")
        return eager
    return ALL_ATTENTION_FUNCTIONS[base]


def split_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    shared_prompt_segments: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention over packed shared-prompt rows, registered as :data:`SPLIT_ATTENTION`.

    Args:
        module: the attention layer (its ``config`` carries the base implementation and the backend).
        query: (b, H, L, d); key, value: (b, Hkv, L, d), H a multiple of Hkv (GQA), positions already applied.
        attention_mask: ignored with ``shared_prompt_segments`` (the mask function returns None then); otherwise
            handed to the base implementation.
        scaling: softmax scale (None: 1/sqrt(d)); dropout: attention dropout probability.
        shared_prompt_segments: a :class:`vlm_r1.shared_prompt.SegmentInfo` (``segments``: one ``(prefix_len,
            [suffix_len, ...])`` per row, ``length`` = L), or None to delegate everything to the base implementation.

    Returns:
        ``(attn_output (b, L, H, d), None)``, the layout of transformers' ``sdpa_attention_forward``
        (integrations/sdpa_attention.py:204-208); padding tokens' outputs are zero.
    """
    if shared_prompt_segments is None:
        return _base_attention(module)(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
    info = shared_prompt_segments
    segments = info.segments
    b, H, L, _ = query.shape
    if len(segments) != b or key.size(2) != L or int(getattr(info, "length", L)) != L:
        raise ValueError(
            f"split attention: query {tuple(query.shape)}, key {tuple(key.shape)} do not match "
            f"{len(segments)} packed rows of length {getattr(info, 'length', '?')} (a KV cache?)"
        )
    if H % key.size(1):
        raise ValueError(f"split attention: {H} query heads are not a multiple of {key.size(1)} key/value heads")
    for P, lens in segments:
        if P + sum(lens) > L:
            raise ValueError(f"split attention: a row of {P} + {sum(lens)} tokens does not fit length {L}")
    if kwargs.get("sliding_window") is not None or kwargs.get("softcap") is not None:
        raise NotImplementedError("split attention supports neither sliding-window attention nor softcapping")
    requested = getattr(module.config, _BACKEND_ATTR, "auto")
    backend = split_backend(query.device, query.dtype, requested)
    if backend == "flash":
        return _flash_split(query, key, value, info, scaling, dropout), None
    if backend == "flex":
        return _flex_split(query, key, value, info, scaling, dropout), None
    out = _reference_split(query, key, value, segments, scaling, dropout)
    return out.transpose(1, 2).contiguous(), None


_STATE = threading.local()


def _segments_active() -> bool:
    return getattr(_STATE, "depth", 0) > 0


def split_attention_mask(*args, config: Any = None, **kwargs):
    """Mask function registered as :data:`SPLIT_ATTENTION` in ``AttentionMaskInterface`` (masking_utils.py:733).

    Inside a forward that carries ``shared_prompt_segments`` (seen by the hooks :func:`enable_split_attention`
    installs) it returns None: the split attention ignores the mask, so none is built (an eager base would otherwise
    build an (L, L) float mask, masking_utils.py:567, and packed position ids an (L, L) bool one, :1003-1025). Otherwise it
    is the base implementation's mask function, so 2D padding masks in generation work as before.
    """
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    if _segments_active():
        return None
    base = getattr(config, _BASE_ATTR, None) or "sdpa"
    mask_fn = ALL_MASK_ATTENTION_FUNCTIONS[base] if base in ALL_MASK_ATTENTION_FUNCTIONS else sdpa_mask
    return mask_fn(*args, config=config, **kwargs)


def register_split_attention() -> str:
    """Register :func:`split_attention_forward` and :func:`split_attention_mask` under :data:`SPLIT_ATTENTION`
    (idempotent; :func:`enable_split_attention` calls it). Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(SPLIT_ATTENTION, split_attention_forward)
    AttentionMaskInterface.register(SPLIT_ATTENTION, split_attention_mask)
    return SPLIT_ATTENTION


# ---- switching a model ---------------------------------------------------------------------------------------------
def _unwrap(model: Any) -> Any:
    """The transformers model inside DDP / DeepSpeed (``.module``) / PEFT (``base_model.model``) wrappers: the first
    ``PreTrainedModel`` among ``model.modules()`` (pre-order, so the outermost one)."""
    from transformers import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            return module
    raise TypeError(f"{type(model).__name__} holds no transformers PreTrainedModel")


def _enter_hook(module, args, kwargs):
    if kwargs.get(SEGMENTS_KWARG) is not None:
        _STATE.depth = getattr(_STATE, "depth", 0) + 1


def _exit_hook(module, args, kwargs, output):
    if kwargs.get(SEGMENTS_KWARG) is not None:
        _STATE.depth = max(0, getattr(_STATE, "depth", 0) - 1)


def enable_split_attention(model: Any, backend: str = "auto") -> str:
    """Switch the *text* model of ``model`` to :data:`SPLIT_ATTENTION`; the vision tower keeps its implementation.

    Args:
        model: a loaded transformers model, possibly wrapped (DDP, DeepSpeed, PEFT).
        backend: ``"auto"``, ``"reference"``, ``"flash"`` or ``"flex"`` (see :func:`split_backend`); ``"flash"``
            raises ImportError at once without flash-attn.

    Returns:
        The base implementation (``"sdpa"``, ``"eager"``, ``"flash_attention_2"``, ...) that calls without
        ``shared_prompt_segments`` are delegated to. Idempotent: a second call returns the same base (and updates
        the backend).

    The text config is ``config.get_text_config(decoder=True)`` (``Qwen2_5_VLConfig.text_config``; the config itself
    for a text-only model), switched with ``set_attn_implementation({"text_config": name})``
    (modeling_utils.py:1960); decoder layers read ``self.config._attn_implementation`` at every call
    (modeling_qwen2_5_vl.py:654). Forward hooks on the model note when a forward carries ``shared_prompt_segments``,
    so the mask function builds no mask then.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown split attention backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend == "flash":
        _import_flash_attn()
    register_split_attention()
    inner = _unwrap(model)
    config = inner.config
    text_config = config.get_text_config(decoder=True)
    current = text_config._attn_implementation
    if current == SPLIT_ATTENTION:
        base = getattr(text_config, _BASE_ATTR, None) or "sdpa"
    else:
        base = current or "sdpa"
        setattr(text_config, _BASE_ATTR, base)
        if text_config is config:
            inner.set_attn_implementation(SPLIT_ATTENTION)
        else:
            key = next((k for k in config.sub_configs if getattr(config, k, None) is text_config), None)
            if key is None:
                raise ValueError(f"cannot find the text sub-config of {type(config).__name__}")
            inner.set_attn_implementation({key: SPLIT_ATTENTION})
        if text_config._attn_implementation != SPLIT_ATTENTION:
            raise RuntimeError(f"{type(inner).__name__} did not take attn_implementation={SPLIT_ATTENTION!r}")
    setattr(text_config, _BACKEND_ATTR, backend)
    if not getattr(inner, _HOOKED_ATTR, False):  # a plain flag: a deep copy keeps it together with the hooks
        inner.register_forward_pre_hook(_enter_hook, with_kwargs=True)
        inner.register_forward_hook(_exit_hook, with_kwargs=True, always_call=True)
        setattr(inner, _HOOKED_ATTR, True)
    return base
