"""Shared-prompt GRPO: each group's prompt (screenshot + instruction) goes through the model once, not G times.

A GRPO generation batch holds N prompts x G rollouts. TRL (``trl/trainer/grpo_trainer.py`` 1.16,
``_get_per_token_logps_and_entropies``) runs every rollout as its own row ``[prompt | completion]``, so each prompt is
embedded, run through the vision tower and through every decoder layer G times, in the policy, old and reference
passes. Here one *packed row* per group carries the prompt once and the G completions after it::

    [ prompt[:-1] | prompt[-1], c_1 | prompt[-1], c_2 | ... | prompt[-1], c_G ]
      prefix        suffix 1         suffix 2               suffix G

* attention: suffix g sees the prefix and its own tokens, causally (a 4D mask, or :mod:`vlm_r1.shared_prompt_attention`
  without a dense mask); the prefix is causal as usual;
* positions: the prefix keeps the positions the model gives the prompt (Qwen-VL M-RoPE: ``get_rope_index``, through
  the module hook :meth:`vlm_r1.modules.VLMBaseModule.shared_prompt_positions`); token j of every suffix
  (j = 0 is the copy of the last prompt token) gets ``last prompt position + j`` on every axis, exactly what the naive
  row gives it (``get_rope_index`` continues text positions after the prompt);
* images: one copy of the group's ``pixel_values``, so the vision tower runs once per group;
* the log-prob of completion token j of rollout g is read at suffix g's token j (the fused LM head scores token t+1
  from position t), and scattered back into TRL's ``(B, C)`` layout, so the loss code is untouched.

Each rollout's tokens see exactly the keys and positions they see in the naive row, so the log-probs, entropies and
gradients are the same up to float rounding (measured: ``docs/REFERENCES.md#shared-prompt-grpo-exactness-and-cost``;
tested in ``tests/test_shared_prompt.py``). Prior work: Prefix Grouper (arXiv 2506.05433), verl PR #4368, Unsloth PR
#6871.

Batch layouts (``B`` rollouts, groups of ``G`` consecutive rows, ``num_images[r]`` images in row r):

* *naive*: TRL's: ``pixel_values`` holds every row's patches, ``image_grid_thw`` one row per image of every row;
* *shared*: ``image_grid_thw`` and ``num_images`` as naive, ``pixel_values`` only the patches of each group's first
  row (its *carrier*), i.e. one copy per group. :func:`dedup_pixel_values` / :func:`expand_pixel_values` convert.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: key of the per-batch marker in TRL generation outputs / training inputs: the group size G of a shared layout.
SHARED_KEY = "shared_prompt_group_size"
#: key the trainer adds to every dataset row: the dataset index the sampler drew (a group = one index G times).
INDEX_KEY = "__shared_prompt_index__"

METRIC_KEYS = (
    "shared_prompt/llm_tokens",
    "shared_prompt/naive_llm_tokens",
    "shared_prompt/vision_patches",
    "shared_prompt/naive_vision_patches",
)


# ---- pixel layouts -------------------------------------------------------------------------------------------------
def _row_starts(counts: Sequence[int]) -> list[int]:
    """Running sums ``[0, c_0, c_0 + c_1, ...]``: row r owns entries ``starts[r]:starts[r + 1]`` (of ``image_grid_thw``
    when ``counts`` is ``num_images``, of ``pixel_values`` when it is the patches per row)."""
    starts = [0]
    for n in counts:
        starts.append(starts[-1] + int(n))
    return starts


def _patches_per_row(image_grid_thw: torch.Tensor | None, num_images: Sequence[int] | None, rows: int) -> list[int]:
    """Patch rows of ``pixel_values`` per batch row (naive layout): sum of t*h*w over the row's images."""
    if image_grid_thw is None or num_images is None:
        return [0] * rows
    if len(num_images) != rows:
        raise ValueError(f"num_images has {len(num_images)} entries for {rows} rows")
    per_image = image_grid_thw.prod(dim=-1).tolist()
    out, k = [], 0
    for n in num_images:
        out.append(int(sum(per_image[k : k + n])))
        k += n
    if k != len(per_image):
        raise ValueError(f"num_images sums to {k} but image_grid_thw has {len(per_image)} rows")
    return out


def carrier_slices(image_grid_thw, num_images, num_generations: int, rows: int) -> list[tuple[int, int]]:
    """Per group: ``(start, end)`` of its carrier's patches in a *shared*-layout ``pixel_values``."""
    per_row = _patches_per_row(image_grid_thw, num_images, rows)
    out, start = [], 0
    for g in range(0, rows, num_generations):
        out.append((start, start + per_row[g]))
        start += per_row[g]
    return out


def dedup_pixel_values(pixel_values, image_grid_thw, num_images, num_generations: int) -> torch.Tensor:
    """Naive -> shared layout: keep each group's first row's patches. ``pixel_values``: (patches, D)."""
    rows = len(num_images)
    starts = _row_starts(_patches_per_row(image_grid_thw, num_images, rows))
    parts = [pixel_values[starts[g] : starts[g + 1]] for g in range(0, rows, num_generations)]
    return torch.cat(parts) if parts else pixel_values[:0]


def expand_pixel_values(pixel_values, image_grid_thw, num_images, num_generations: int) -> torch.Tensor:
    """Shared -> naive layout: the carrier's patches repeated for each of the G rows of its group."""
    rows = len(num_images)
    parts = []
    for start, end in carrier_slices(image_grid_thw, num_images, num_generations, rows):
        parts.extend([pixel_values[start:end]] * num_generations)
    return torch.cat(parts) if parts else pixel_values[:0]


def split_rows(pixel_values, image_grid_thw, num_images, num_generations: int) -> list[torch.Tensor]:
    """Shared layout -> one tensor per row (the carrier's patches for a group's first row, empty for the others)."""
    rows = len(num_images)
    out = []
    for g, (start, end) in enumerate(carrier_slices(image_grid_thw, num_images, num_generations, rows)):
        out.append(pixel_values[start:end])
        out.extend([pixel_values[:0]] * (min(rows, (g + 1) * num_generations) - g * num_generations - 1))
    return out


# ---- group identity ------------------------------------------------------------------------------------------------
def image_digest(image: Any) -> str:
    """Content hash of one image: PIL (mode, size, pixel bytes), numpy array or torch tensor (dtype, shape, bytes), raw
    bytes; anything else (a path string) by its ``repr``."""
    h = hashlib.blake2b(digest_size=16)
    if hasattr(image, "tobytes") and hasattr(image, "size") and hasattr(image, "mode"):
        h.update(f"{image.mode}|{image.size}".encode())
        h.update(image.tobytes())
    elif isinstance(image, torch.Tensor):
        array = image.detach().cpu().contiguous()
        h.update(f"tensor|{array.dtype}|{tuple(array.shape)}".encode())
        h.update(array.numpy().tobytes() if array.dtype != torch.bfloat16 else array.float().numpy().tobytes())
    elif hasattr(image, "tobytes") and hasattr(image, "dtype") and hasattr(image, "shape"):  # numpy
        h.update(f"array|{image.dtype}|{tuple(image.shape)}".encode())
        h.update(image.tobytes())
    elif isinstance(image, (bytes, bytearray)):
        h.update(bytes(image))
    else:
        h.update(repr(image).encode("utf-8", "backslashreplace"))
    return h.hexdigest()


def prompt_fingerprint(row: dict) -> str:
    """Hash of everything that makes a row's prompt: the ``prompt`` messages and the pixels of ``image``/``images``.

    Two rows with equal fingerprints tokenize to the same prompt ids and the same ``pixel_values``. Images are hashed by
    content (two same-size screenshots with the same instruction differ here even though their tokens and
    ``image_grid_thw`` are equal).
    """
    memo: dict[int, str] = {}

    def encode(obj):
        if hasattr(obj, "tobytes") or isinstance(obj, torch.Tensor):
            key = id(obj)
            if key not in memo:
                memo[key] = image_digest(obj)
            return {"__image__": memo[key]}
        raise TypeError(f"unhashable prompt part {type(obj).__name__}")

    images = row.get("images") if "images" in row else ([row["image"]] if row.get("image") is not None else [])
    payload = {"prompt": row.get("prompt"), "images": [encode(i) if i is not None else None for i in images or []]}
    try:
        text = json.dumps(payload, sort_keys=True, default=encode, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(payload)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def group_mismatch(indices: Sequence[Any], fingerprints: Sequence[str], num_generations: int) -> str | None:
    """Why the rows do not form whole groups of ``num_generations`` identical prompts, or None when they do.

    ``indices``: the dataset index the sampler drew for each row (TRL's ``RepeatSampler`` draws each index G times in
    a row); ``fingerprints``: :func:`prompt_fingerprint` per row. A block whose rows share the index but not the
    fingerprint means the dataset changes a row between reads (random augmentation): the copies are different prompts.
    """
    if len(indices) != len(fingerprints):
        raise ValueError(f"{len(indices)} indices for {len(fingerprints)} rows")
    if len(indices) % num_generations:
        return f"{len(indices)} rows are not whole groups of {num_generations}"
    for g in range(0, len(indices), num_generations):
        block = indices[g : g + num_generations]
        if any(i is None for i in block) or len(set(block)) != 1:
            return (
                f"rows {g}..{g + num_generations - 1} are not one dataset index G times (sampler indices {list(block)})"
            )
        if len(set(fingerprints[g : g + num_generations])) != 1:
            return (
                f"dataset index {block[0]} gave different prompts/images across its {num_generations} reads "
                "(random augmentation in the dataset?)"
            )
    return None


# ---- packing -------------------------------------------------------------------------------------------------------
@dataclass
class PackedBatch:
    """One packed row per group (right-padded to a common length L).

    Attributes:
        input_ids: (n, L) long.
        position_ids: (R, n, L) long (R = 3 for M-RoPE, 1 for plain RoPE).
        labels: (n, L) long, -100 except at completion tokens.
        mm_token_type_ids: (n, L) or None.
        segments: per packed row, ``(prefix_len, [suffix_len, ...])``; suffix g has ``1 + n_g`` tokens (the copy of
            the last prompt token, then its ``n_g`` unmasked completion tokens); tokens after the last suffix are padding.
        rollout_index: per rollout (row of the TRL batch), ``(packed row, first index into the fused head's (L-1)
            outputs, n_g)``.
        llm_tokens: non-padding tokens of the packed rows.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    labels: torch.Tensor
    mm_token_type_ids: torch.Tensor | None
    segments: list[tuple[int, list[int]]]
    rollout_index: list[tuple[int, int, int]]
    llm_tokens: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(self.input_ids.size(1))


PositionsFn = Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor | None], torch.Tensor]


def pack_groups(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    num_generations: int,
    positions_fn: PositionsFn,
    *,
    image_grid_thw: torch.Tensor | None = None,
    num_images: Sequence[int] | None = None,
    mm_token_type_ids: torch.Tensor | None = None,
    pad_token_id: int = 0,
) -> PackedBatch:
    """Pack a TRL batch (``B`` rows ``[left-padded prompt | right-padded completion]``) into one row per group.

    Args:
        input_ids, attention_mask: (B, P + C) as TRL builds them (``_compute_loss``), B a multiple of G.
        logits_to_keep: C, the completion width.
        num_generations: G.
        positions_fn: ``(prompt_ids (P_g,), mm_token_type_ids (P_g,) or None, image_grid_thw (k, 3) or None) ->
            (R, P_g)`` positions of one unpadded prompt (the module hook).
        image_grid_thw, num_images: naive/shared layout grids (one row per image of every row).
        mm_token_type_ids: (B, P + C) or None.

    Raises:
        ValueError: B not a multiple of G, or the G rows of a group differ in prompt tokens (they are not one group).
    """
    B, width = input_ids.shape
    if B % num_generations:
        raise ValueError(f"{B} rows are not whole groups of {num_generations}")
    C = int(logits_to_keep)
    grid_rows = _row_starts(num_images) if image_grid_thw is not None and num_images is not None else None
    packer = _GroupPacker(
        input_ids,
        attention_mask,
        prompt_width=width - C,
        completion_width=C,
        num_generations=num_generations,
        positions_fn=positions_fn,
        image_grid_thw=image_grid_thw,
        grid_rows=grid_rows,
        mm_token_type_ids=mm_token_type_ids,
    )
    rows = [packer.pack(g0) for g0 in range(0, B, num_generations)]
    return _pad_rows(rows, input_ids, mm_token_type_ids, pad_token_id)


@dataclass
class _GroupRow:
    """One group's packed row before padding (a step of :func:`pack_groups`).

    ``ids``/``labels``/``mm`` are (length,), ``pos`` is (R, length); ``suffix_lens`` as in :attr:`PackedBatch.segments`;
    ``rollouts``: per rollout of the group, ``(first index into the fused head's outputs, n_g)``.
    """

    ids: torch.Tensor
    pos: torch.Tensor
    labels: torch.Tensor
    mm: torch.Tensor | None
    prefix_len: int
    suffix_lens: list[int]
    rollouts: list[tuple[int, int]]


@dataclass
class _GroupPacker:
    """The per-group steps of :func:`pack_groups` over one TRL batch: the group's prompt (equal in its G rows), its
    image grid (equal in its G rows), the prompt's positions (the module hook), then the prefix and the G suffixes.

    ``prompt_width`` is ``P`` (the left-padded prompt columns), ``completion_width`` is ``C``; ``grid_rows`` are
    :func:`_row_starts` of ``num_images`` when the batch has image grids.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_width: int
    completion_width: int
    num_generations: int
    positions_fn: PositionsFn
    image_grid_thw: torch.Tensor | None = None
    grid_rows: list[int] | None = None
    mm_token_type_ids: torch.Tensor | None = None

    def prompt(self, g0: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(prompt ids, prompt mask)`` of the group whose first row is ``g0``.

        Raises:
            ValueError: a row of the group has other prompt tokens, or the prompt is empty.
        """
        Pw = self.prompt_width
        pmask = self.attention_mask[g0, :Pw].bool()
        prompt = self.input_ids[g0, :Pw][pmask]
        for r in range(g0 + 1, g0 + self.num_generations):
            other = self.input_ids[r, :Pw][self.attention_mask[r, :Pw].bool()]
            if other.shape != prompt.shape or not torch.equal(other, prompt):
                raise ValueError(f"rows {g0} and {r} are in one group but their prompt tokens differ")
        if prompt.numel() == 0:
            raise ValueError(f"row {g0} has an empty prompt")
        return prompt, pmask

    def grid(self, g0: int) -> torch.Tensor | None:
        """The image grid rows of the group whose first row is ``g0`` (None without grids or without images).

        Raises:
            ValueError: a row of the group has other image grids.
        """
        if self.grid_rows is None:
            return None
        rows, thw = self.grid_rows, self.image_grid_thw
        grid = thw[rows[g0] : rows[g0 + 1]]
        for r in range(g0 + 1, g0 + self.num_generations):
            if not torch.equal(thw[rows[r] : rows[r + 1]], grid):
                raise ValueError(f"rows {g0} and {r} are in one group but their image grids differ")
        return grid if grid.numel() else None

    def positions(self, prompt: torch.Tensor, mm: torch.Tensor | None, grid: torch.Tensor | None) -> torch.Tensor:
        """The hook's ``(R, P_g)`` positions of the unpadded prompt, as long.

        Raises:
            ValueError: the hook returned another shape.
        """
        pos = self.positions_fn(prompt, mm, grid)
        if pos.dim() != 2 or pos.size(1) != prompt.numel():
            raise ValueError(
                f"positions hook returned shape {tuple(pos.shape)} for a prompt of {prompt.numel()} tokens"
            )
        return pos.to(torch.long)

    def completion(self, r: int) -> torch.Tensor:
        """Row ``r``'s unmasked completion tokens.

        Raises:
            ValueError: its completion mask is not a prefix of the ``C`` columns (TRL right-pads completions).
        """
        cmask = self.attention_mask[r, self.prompt_width :].bool()
        comp = self.input_ids[r, self.prompt_width :][cmask]
        C = self.completion_width
        if cmask.any() and not torch.equal(cmask, torch.arange(C, device=cmask.device) < int(cmask.sum())):
            raise ValueError(f"row {r}: completion mask is not a prefix (TRL right-pads completions)")
        return comp

    def pack(self, g0: int) -> _GroupRow:
        """The packed row of the group whose first row is ``g0``: ``prompt[:-1]``, then per rollout the copy of the last
        prompt token and its completion, at positions ``last prompt position + j``; labels are the completion tokens."""
        prompt, pmask = self.prompt(g0)
        mm = self.mm_token_type_ids[g0, : self.prompt_width][pmask] if self.mm_token_type_ids is not None else None
        pos = self.positions(prompt, mm, self.grid(g0))
        last_id, last_pos = prompt[-1:], pos[:, -1:]
        ids, poss, labs, mms = [prompt[:-1]], [pos[:, :-1]], [torch.full_like(prompt[:-1], -100)], []
        if mm is not None:
            mms.append(mm[:-1])
        suffix_lens, rollouts = [], []
        cur = prompt.numel() - 1
        for r in range(g0, g0 + self.num_generations):
            comp = self.completion(r)
            n = comp.numel()
            ids.append(torch.cat([last_id, comp]))
            poss.append(last_pos + torch.arange(n + 1, device=pos.device)[None])
            labs.append(torch.cat([torch.full_like(last_id, -100), comp]))
            if mm is not None:
                mms.append(torch.zeros(n + 1, dtype=mm.dtype, device=mm.device))
            rollouts.append((cur, n))
            suffix_lens.append(n + 1)
            cur += n + 1
        return _GroupRow(
            torch.cat(ids),
            torch.cat(poss, dim=1),
            torch.cat(labs),
            torch.cat(mms) if mm is not None else None,
            prompt.numel() - 1,
            suffix_lens,
            rollouts,
        )


def _pad_rows(
    rows: list[_GroupRow], input_ids: torch.Tensor, mm_token_type_ids: torch.Tensor | None, pad_token_id: int
) -> PackedBatch:
    """The groups' rows right-padded to their longest (``pad_token_id``, position 0, label -100, mm type 0), with the
    segments and the rollout index of :class:`PackedBatch`."""
    L = max(int(row.ids.numel()) for row in rows)
    n_rows = len(rows)
    R = rows[0].pos.size(0)
    device = input_ids.device
    out_ids = torch.full((n_rows, L), pad_token_id, dtype=input_ids.dtype, device=device)
    out_pos = torch.zeros((R, n_rows, L), dtype=torch.long, device=device)
    out_lab = torch.full((n_rows, L), -100, dtype=torch.long, device=device)
    out_mm = (
        None if mm_token_type_ids is None else torch.zeros((n_rows, L), dtype=mm_token_type_ids.dtype, device=device)
    )
    segments, rollout_index, llm_tokens = [], [], 0
    for i, row in enumerate(rows):
        n = row.ids.numel()
        out_ids[i, :n] = row.ids
        out_pos[:, i, :n] = row.pos.to(device)
        out_lab[i, :n] = row.labels
        if out_mm is not None:
            out_mm[i, :n] = row.mm
        segments.append((row.prefix_len, row.suffix_lens))
        rollout_index.extend((i, start, k) for start, k in row.rollouts)
        llm_tokens += int(n)
    return PackedBatch(out_ids, out_pos, out_lab, out_mm, segments, rollout_index, llm_tokens)


def dense_mask(packed: PackedBatch, *, additive_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The (n, 1, L, L) attention mask of a packed batch: query t may see key s when s <= t and s is in the prefix or
    in t's own suffix; padding tokens see the prefix and themselves (their outputs are never read).

    Returns a bool mask (True = attend; what SDPA takes) or, with ``additive_dtype``, an additive float mask (0 or the
    dtype's minimum; what eager attention adds to the scores).
    """
    n, L = packed.input_ids.shape
    device = packed.input_ids.device
    seg = torch.full((n, L), -1, dtype=torch.long, device=device)  # -1 padding, 0 prefix, g+1 suffix g
    for i, (prefix, suffixes) in enumerate(packed.segments):
        seg[i, :prefix] = 0
        start = prefix
        for g, s in enumerate(suffixes):
            seg[i, start : start + s] = g + 1
            start += s
    q = seg[:, :, None]
    k = seg[:, None, :]
    idx = torch.arange(L, device=device)
    causal = idx[None, :, None] >= idx[None, None, :]
    allowed = causal & (k >= 0) & ((k == 0) | (k == q))
    allowed |= torch.eye(L, dtype=torch.bool, device=device)[None] & (q < 0)  # padding: itself only
    allowed = allowed[:, None]
    if additive_dtype is None:
        return allowed
    return torch.zeros(allowed.shape, dtype=additive_dtype, device=device).masked_fill(
        ~allowed, torch.finfo(additive_dtype).min
    )


@dataclass
class SegmentInfo:
    """Layout of packed rows for split attention (:mod:`vlm_r1.shared_prompt_attention`), passed to every attention
    call as the ``shared_prompt_segments`` keyword: ``segments`` as in :class:`PackedBatch`, ``length`` = L."""

    segments: list[tuple[int, list[int]]]
    length: int


def per_token_logps_and_entropies(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    num_generations: int,
    positions_fn: PositionsFn,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    pixel_values: torch.Tensor | None = None,
    image_grid_thw: torch.Tensor | None = None,
    num_images: Sequence[int] | None = None,
    mm_token_type_ids: torch.Tensor | None = None,
    attention: str = "dense",
    additive_mask_dtype: torch.dtype | None = None,
    pad_token_id: int = 0,
    autocast: Callable[[], Any] = nullcontext,
    stats: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """TRL's ``_get_per_token_logps_and_entropies`` outputs, computed one packed row per group.

    Args:
        model: the policy/reference model with TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``), possibly
            wrapped (DDP, DeepSpeed, PEFT).
        input_ids, attention_mask: (B, P + C), TRL's layout; groups are G consecutive rows with equal prompts.
        logits_to_keep: C.
        num_generations: G.
        positions_fn: the module hook (see :func:`pack_groups`).
        batch_size: rows per forward (TRL's chunking); rounded down to whole groups (at least one group).
        pixel_values: *shared* layout (one copy per group; :func:`dedup_pixel_values`), or None.
        image_grid_thw, num_images: one grid row per image of every row, images per row.
        attention: ``"dense"`` (4D mask through the model's own attention) or ``"split"`` (no dense mask; the model's
            text attention must be :mod:`vlm_r1.shared_prompt_attention`'s).
        additive_mask_dtype: None for a bool mask (SDPA), a float dtype for an additive mask (eager).
        stats: if given, ``llm_tokens`` and ``vision_patches`` of the forwards are added to it.

    Returns:
        ``(logps, entropies)``, each (B, C) in the dtype of the fused head's output; zero where the completion is
        masked (TRL's fused head gives 0 there too); ``entropies`` is None unless ``compute_entropy``.
    """
    B = input_ids.size(0)
    C = int(logits_to_keep)
    G = int(num_generations)
    groups_per_chunk = max(1, (batch_size or B) // G)
    slices = _shared_carriers(pixel_values, image_grid_thw, num_images, G, B)
    grid_cum = _row_starts(num_images) if image_grid_thw is not None and num_images is not None else None
    out_lp: list[torch.Tensor] = []
    out_en: list[torch.Tensor] = []
    for first_group in range(0, B // G, groups_per_chunk):
        r0, r1 = first_group * G, min(B, (first_group + groups_per_chunk) * G)
        sub_grid, sub_num = None, None
        if grid_cum is not None:
            sub_grid = image_grid_thw[grid_cum[r0] : grid_cum[r1]]
            sub_num = list(num_images[r0:r1])
        packed = pack_groups(
            input_ids[r0:r1],
            attention_mask[r0:r1],
            C,
            G,
            positions_fn,
            image_grid_thw=sub_grid,
            num_images=sub_num,
            mm_token_type_ids=None if mm_token_type_ids is None else mm_token_type_ids[r0:r1],
            pad_token_id=pad_token_id,
        )
        inputs = _packed_inputs(packed, attention, additive_mask_dtype)
        patches = 0
        if pixel_values is not None and slices is not None:
            groups = range(first_group, first_group + (r1 - r0) // G)
            patches = _add_carrier_pixels(inputs, pixel_values, slices, image_grid_thw, grid_cum, groups, G)
        if packed.mm_token_type_ids is not None:
            inputs["mm_token_type_ids"] = packed.mm_token_type_ids
        with autocast():
            outputs = model(**inputs, labels=packed.labels, fused_lm_head=True)
        lp_rows = outputs.log_probs  # (n, L-1): index t scores token t+1
        out_lp.extend(_scatter_rollouts(lp_rows, packed.rollout_index, C, connect_empty=True))
        if compute_entropy:
            out_en.extend(_scatter_rollouts(outputs.entropy, packed.rollout_index, C, connect_empty=False))
        if stats is not None:
            stats["llm_tokens"] = stats.get("llm_tokens", 0) + packed.llm_tokens
            stats["vision_patches"] = stats.get("vision_patches", 0) + patches
    logps = torch.stack(out_lp)
    entropies = torch.stack(out_en) if compute_entropy else None
    return logps, entropies


def _shared_carriers(
    pixel_values: torch.Tensor | None, image_grid_thw, num_images, num_generations: int, rows: int
) -> list[tuple[int, int]] | None:
    """:func:`carrier_slices` of a *shared*-layout ``pixel_values`` (None without pixels), checked against its rows.

    Raises:
        ValueError: ``pixel_values`` does not hold exactly the carriers' patches (one copy per group).
    """
    if pixel_values is None:
        return None
    slices = carrier_slices(image_grid_thw, num_images, num_generations, rows)
    held = slices[-1][1] if slices else 0
    if held != pixel_values.size(0):
        raise ValueError(
            f"pixel_values has {pixel_values.size(0)} rows but the groups' carriers hold "
            f"{held}: not the shared layout (one copy per group)"
        )
    return slices


def _packed_inputs(packed: PackedBatch, attention: str, additive_mask_dtype: torch.dtype | None) -> dict[str, Any]:
    """The model inputs of a packed batch: ids, positions (``(R, n, L)`` for M-RoPE, ``(n, L)`` for plain RoPE) and the
    attention: no mask and a :class:`SegmentInfo` for ``"split"``, else :func:`dense_mask`."""
    inputs: dict[str, Any] = {"input_ids": packed.input_ids}
    rope = packed.position_ids
    inputs["position_ids"] = rope if rope.size(0) > 1 else rope[0]
    if attention == "split":
        inputs["attention_mask"] = None
        inputs["shared_prompt_segments"] = SegmentInfo(packed.segments, packed.length)
    else:
        inputs["attention_mask"] = dense_mask(packed, additive_dtype=additive_mask_dtype)
    return inputs


def _add_carrier_pixels(
    inputs: dict[str, Any],
    pixel_values: torch.Tensor,
    slices: list[tuple[int, int]],
    image_grid_thw: torch.Tensor,
    grid_cum: list[int] | None,
    groups: range,
    num_generations: int,
) -> int:
    """Put the carriers' patches of ``groups`` (and their grids) into ``inputs``, when there are any; returns the patch
    rows added (what the vision tower runs)."""
    parts = [pixel_values[slices[g][0] : slices[g][1]] for g in groups]
    carriers = [g * num_generations for g in groups]
    grids = [image_grid_thw[grid_cum[r] : grid_cum[r + 1]] for r in carriers]
    if not sum(p.size(0) for p in parts):
        return 0
    inputs["pixel_values"] = torch.cat(parts)
    inputs["image_grid_thw"] = torch.cat(grids)
    return int(inputs["pixel_values"].size(0))


def _scatter_rollouts(
    rows: torch.Tensor, rollout_index: list[tuple[int, int, int]], width: int, *, connect_empty: bool
) -> list[torch.Tensor]:
    """Per rollout, its ``n_g`` values read from the packed ``rows`` (``(n, L-1)``) at its suffix, zero-padded to
    ``width`` (TRL's ``(B, C)`` layout). With ``connect_empty``, a first rollout with nothing scored is
    ``0 * rows.sum()`` so the graph stays connected (as TRL's scatter)."""
    out = []
    for k, (row, start, n) in enumerate(rollout_index):
        value = rows.new_zeros(width)
        if n:
            value = torch.cat([rows[row, start : start + n], rows.new_zeros(width - n)])
        elif k == 0 and connect_empty:
            value = value + 0 * rows.sum()
        out.append(value)
    return out


# ---- accounting ----------------------------------------------------------------------------------------------------
def token_counts(
    attention_mask: torch.Tensor, logits_to_keep: int, num_generations: int | None, image_grid_thw=None, num_images=None
) -> dict[str, int]:
    """Tokens and vision patches one policy forward+backward runs on a batch, shared (``num_generations`` = G) or
    naive (None / 0), next to what naive GRPO runs.

    ``llm_tokens``: non-padding tokens through the language model (a shared prompt counted once: ``P - 1`` prefix
    tokens plus ``1 + n_g`` per rollout); ``naive_llm_tokens``: ``attention_mask.sum()``; ``vision_patches`` /
    ``naive_vision_patches``: ``pixel_values`` rows through the vision tower (one copy per group vs one per row).
    """
    B = attention_mask.size(0)
    C = int(logits_to_keep)
    naive_tokens = int(attention_mask.sum())
    per_row = _patches_per_row(image_grid_thw, num_images, B) if num_images is not None else [0] * B
    naive_patches = int(sum(per_row))
    if not num_generations:
        return {
            "llm_tokens": naive_tokens,
            "naive_llm_tokens": naive_tokens,
            "vision_patches": naive_patches,
            "naive_vision_patches": naive_patches,
        }
    G = int(num_generations)
    prompt = attention_mask[:, :-C].sum(dim=1) if C else attention_mask.sum(dim=1)
    completion = attention_mask[:, -C:].sum(dim=1) if C else torch.zeros_like(prompt)
    shared = 0
    for g0 in range(0, B, G):
        shared += int(prompt[g0]) - 1 + int((completion[g0 : g0 + G] + 1).sum())
    patches = int(sum(per_row[g0] for g0 in range(0, B, G)))
    return {
        "llm_tokens": shared,
        "naive_llm_tokens": naive_tokens,
        "vision_patches": patches,
        "naive_vision_patches": naive_patches,
    }
