"""Predict click points with a transformers model (``hf`` backend): batched greedy generation, resumable.

Conventions (GTA1 inference, ``gta1_and_peers.md`` 1.2): the screenshot is smart_resized once with the processor's
pixel budget, the GTA1 system prompt states the resized size, generation is greedy, the **first** ``(x,y)`` of the
answer is taken (non-strict parse) and mapped back to original pixels per axis.

Output: one JSONL line per sample ``{"sample_id", "point": [x, y] | null, "raw_response", "resized_point",
"resized_size"}`` with ``point`` in original-image pixels (``null`` = no valid answer).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable

from gui_grounding.frames import Frame
from gui_grounding.prompts import build_messages, parse_point
from gui_grounding.schema import Sample

logger = logging.getLogger(__name__)


def _batches(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def read_done_ids(path: str) -> set[str]:
    """sample_ids already present in a predictions JSONL (for resuming); empty set if the file does not exist."""
    if not os.path.exists(path):
        return set()
    done = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    done.add(json.loads(line)["sample_id"])
                except (json.JSONDecodeError, KeyError):
                    continue  # a half-written last line from an interrupted run is redone
    return done


def predict_hf(
    model_path: str,
    samples: list[Sample],
    out_path: str,
    *,
    batch_size: int = 8,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    prompt_mode: str = "non_thinking",
    max_new_tokens: int = 32,
    device: str | None = None,
) -> str:
    """Write predictions for ``samples`` to ``out_path`` (appending; samples already there are skipped).

    Args:
        model_path: checkpoint directory or hub id (Qwen2-VL / Qwen2.5-VL family).
        samples: canonical samples (boxes in original pixels; only instruction/image are used here).
        out_path: predictions JSONL.
        batch_size: prompts per ``generate`` call.
        min_pixels, max_pixels: override the processor's smart_resize budget (resized pixels).
        prompt_mode: ``non_thinking`` or ``thinking``.
        max_new_tokens: generation budget per sample.
        device: torch device; default cuda if available else cpu.

    Returns:
        ``out_path``.
    """
    import torch
    from PIL import Image
    from tqdm.auto import tqdm

    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(model_path)
    processor = module.load_processor(model_path, min_pixels=min_pixels, max_pixels=max_pixels)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = module.get_model_class(model_path, {}).from_pretrained(model_path, dtype=dtype).to(device).eval()
    factor, min_px, max_px = module.get_image_resize_params(processor)
    tokenizer = processor.tokenizer
    banned = [[i] for i in module.get_banned_token_ids(processor)]

    done = read_done_ids(out_path)
    todo = [s for s in samples if s.sample_id not in done]
    if done:
        logger.info("resuming: %d of %d samples already predicted in %s", len(samples) - len(todo), len(samples),
                    out_path)  # fmt: skip
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "a", encoding="utf-8") as out, tqdm(total=len(todo), desc="predict", unit="sample") as bar:
        for batch in _batches(todo, batch_size):
            frames, images, texts = [], [], []
            for s in batch:
                frame = Frame.for_image(s.width, s.height, factor=factor, min_pixels=min_px, max_pixels=max_px)
                with Image.open(s.image_path) as im:
                    images.append(im.convert("RGB").resize((frame.resized_width, frame.resized_height),
                                                           Image.Resampling.BICUBIC))  # fmt: skip
                messages = build_messages(s.instruction, frame.resized_height, frame.resized_width, prompt_mode,
                                          image_block=True)  # fmt: skip
                texts.append(processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
                frames.append(frame)
            inputs, _ = module.prepare_model_inputs(processor, texts, images)
            inputs = inputs.to(device)
            with torch.inference_mode():
                output = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens,
                                        bad_words_ids=banned, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
            responses = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
            for s, frame, text in zip(batch, frames, responses, strict=True):
                resized_point = parse_point(text, prompt_mode, strict=False)
                point = frame.point_to_original(resized_point) if resized_point is not None else None
                out.write(json.dumps({
                    "sample_id": s.sample_id,
                    "point": [round(point[0], 2), round(point[1], 2)] if point else None,
                    "raw_response": text,
                    "resized_point": list(resized_point) if resized_point else None,
                    "resized_size": [frame.resized_width, frame.resized_height],
                }) + "\n")  # fmt: skip
            out.flush()
            bar.update(len(batch))
    return out_path
