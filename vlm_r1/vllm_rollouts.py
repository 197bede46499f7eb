"""What ``--use_vllm`` needs from this project beyond TRL: the vision-token ban in vLLM's terms and the start-up checks.

TRL 1.16.0 generates through vLLM in two modes (``trl/generation/vllm_generation.py``): ``colocate`` builds
``vllm.LLM(model=<checkpoint path>, ...)`` in each training process (``:347-364``) and calls
``LLM.generate([{"prompt_token_ids", "multi_modal_data": {"image": ...}}], sampling_params=SamplingParams(n=1,
..., **generation_kwargs))`` (``:661-729``); ``server`` sends each unique prompt once with ``n=G`` to a running
``vllm serve`` (``:593-637``; ``trl/generation/vllm_client.py:326-501``: images are rendered by the server, then paired
with the trainer's token ids). Checked against vLLM 0.30.0's interface (read from its PyPI wheel, git commit
ced6857af) with a fake of it (``tests/fakes/vllm``, ``tests/test_vllm_rollouts.py``); never run on a GPU here. TRL
file:line citations are of the pinned TRL 1.16.0.

Two things of ours meet vLLM:

* **The vision-token ban** (``--ban_vision_tokens``). HF generation gets ``bad_words_ids=[[id]]``; vLLM's
  ``SamplingParams`` has no id form, only ``bad_words`` strings, which vLLM tokenizes itself without special tokens
  (and once more with a leading space, kept only when that is a new sequence of the same length): vLLM 0.30.0
  ``vllm/sampling_params.py:720-788``. A token's string bans exactly that id when the run's tokenizer encodes it back to
  ``[id]`` (true of Qwen's ``<|image_pad|>``, an added special token); :func:`vllm_bad_words` checks that and refuses
  the run otherwise, since vLLM would then ban some other sequence.
* **The pixel budget.** Our data transform resizes each image to the run's budget before TRL sees it
  (:func:`groundwork.pixel_budget.resize_for_model`) and the prompt holds that many image tokens. vLLM re-processes the
  image with the **checkpoint's** image processor: vLLM 0.30.0 ``vllm/model_executor/models/qwen2_vl.py:881-929``
  smart_resizes it under the processor's ``size`` bounds, overridden only by ``mm_processor_kwargs``, which TRL's
  colocate ``LLM(...)`` does not pass. The images are left as they are (so the token counts agree) when the run's
  bounds lie inside the checkpoint's; :func:`vllm_budget_problem` says when they do not, and the run is refused in
  colocate mode. In server mode the server's own ``--mm-processor-kwargs`` decide, which the trainer cannot read: the
  server must be started with the run's bounds (docs/TRAINING.md "vLLM rollouts").
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

#: the vLLM version whose interface the fake in tests/fakes/vllm mirrors (setup.py's ``gpu`` extra pins it)
VLLM_VERSION_CHECKED = "0.30.0"


def vllm_bad_words(tokenizer: Any, ids: list[int]) -> list[str]:
    """The ``bad_words`` strings that make vLLM ban exactly the token ids ``ids``: each id's token string.

    Raises:
        ValueError: an id whose token string the tokenizer does not encode back to that single id (without special
            tokens, as vLLM encodes ``bad_words``; vLLM 0.30.0 ``vllm/sampling_params.py:720-788``): vLLM would ban
            a different sequence, so ``--ban_vision_tokens`` cannot be honoured with ``--use_vllm``.
    """
    words = []
    for token_id, token in zip(ids, tokenizer.convert_ids_to_tokens(list(ids)), strict=True):
        encoded = tokenizer.encode(token, add_special_tokens=False) if token else []
        if list(encoded) != [token_id]:
            raise ValueError(
                f"--ban_vision_tokens with --use_vllm: vLLM bans words as strings it tokenizes itself, and token "
                f"{token_id} ({token!r}) encodes to {list(encoded)}, not [{token_id}], so vLLM would not ban it; "
                "run without --use_vllm (HF generation bans ids) or without --ban_vision_tokens"
            )
        words.append(token)
    return words


def vllm_budget_problem(run_bounds: tuple, checkpoint_bounds: tuple) -> str | None:
    """Why vLLM would resize this run's images again, or None when it leaves them as they are.

    ``run_bounds``: ``(min_pixels, max_pixels)`` the run's images are resized within
    (:meth:`groundwork.pixel_budget.PixelBudget.processor_bounds`); ``checkpoint_bounds``: the checkpoint's image
    processor's, which vLLM uses (pixels of the resized image, ``H' * W'``). An image already resized within the run's
    bounds is a fixed point of vLLM's smart_resize when the run's bounds lie inside the checkpoint's.
    """
    (lo, hi), (clo, chi) = run_bounds, checkpoint_bounds
    if None in (lo, hi, clo, chi):
        return None
    if clo <= lo and hi <= chi:
        return None
    return (
        f"the run resizes images to {lo:,}..{hi:,} pixels but vLLM re-resizes them with the checkpoint's image "
        f"processor ({clo:,}..{chi:,} pixels; TRL's colocate mode passes vLLM no mm_processor_kwargs), so the "
        "prompt's image tokens would not match vLLM's"
    )


def check_vllm_start(training_args: Any, vlm_module: Any, model_path: str, budget: Any) -> None:
    """Refuse, before any model is loaded, a ``--use_vllm`` run without vLLM installed (``SystemExit``) or whose images
    vLLM would see at another size.

    Colocate mode only (server mode: the server's ``--mm-processor-kwargs`` decide; said once as a warning). Families
    without a smart_resize frame (InternVL: tiles) are not checked (their vLLM processing was not read: unverified).

    Raises:
        ValueError: the message of :func:`vllm_budget_problem` and the fixes (a ``--max_pixels``/``--min_pixels``
            inside the checkpoint's bounds, or the checkpoint's processor saved with the run's bounds).
    """
    if not getattr(training_args, "use_vllm", False):
        return
    try:
        import vllm  # noqa: F401
    except ImportError as err:
        raise SystemExit("--use_vllm true needs vLLM (GPU only): pip install -e .[gpu]") from err
    if not budget.resizes:
        return
    lo, hi = budget.processor_bounds()
    if training_args.vllm_mode == "server":
        logger.warning(
            "--use_vllm server: start the vLLM server with --mm-processor-kwargs "
            '\'{"min_pixels": %d, "max_pixels": %d}\' so it resizes images as this run does',
            lo,
            hi,
        )
        return
    saved = vlm_module.processor_budget(vlm_module.load_processor(model_path))
    problem = vllm_budget_problem((lo, hi), (saved["min_pixels"], saved["max_pixels"]))
    if problem:
        raise ValueError(
            f"--use_vllm colocate: {problem}. Use --max_pixels <= {saved['max_pixels']} and --min_pixels >= "
            f"{saved['min_pixels']}, or save the checkpoint's processor with this run's bounds ({model_path})"
        )
