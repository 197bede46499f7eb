"""A test double of the zoom tool's environment: every first turn counts as a call on the screenshot's top-left
quarter, whatever the (random) tiny model wrote, so a training run on a random checkpoint goes through the whole tool
path (render the tool turn, generate turn 2 with the crop, the forward pass over both images, the masked loss, save,
resume). Used as ``--task_type tests.helpers.forced_zoom:ForcedZoomTask --zoom_tool true``."""

from __future__ import annotations

from gui_grounding.models import zoom_tool
from gui_grounding.models.rows import row_frame
from gui_grounding.training.task import GUIGroundingTask
from gui_grounding.training.zoom import ZoomEnvironment


class ForcedZoomEnvironment(ZoomEnvironment):
    def step(self, row, turns):
        if len(turns) == 1:  # pretend the first turn called zoom on the top-left quarter, in the answer frame
            frame = row_frame(row)
            region = [0, 0, frame.resized_width / 2, frame.resized_height / 2]
            turns[-1]["text"] = zoom_tool.call_text(region)
        return super().step(row, turns)


class ForcedZoomTask(GUIGroundingTask):
    def rollout_environment(self, script_args, training_args, processing_class, vlm_module):
        env = super().rollout_environment(script_args, training_args, processing_class, vlm_module)
        return ForcedZoomEnvironment(env.budget, env.max_calls, env.cost) if env is not None else None


def eos_checkpoint(src: str, out: str) -> str:
    """A copy of the tiny checkpoint ``src`` at ``out`` whose every text position predicts the end-of-turn token:
    the text layers add nothing to the residual stream (``o_proj`` and ``down_proj`` zero), every token embeds to one
    vector ``e``, and only the end-of-turn row of ``lm_head`` is non-zero (along the normed ``e``, logit 40). So each
    turn is ``<|im_end|>`` alone and a rollout is exactly: turn 1, the (forced) tool turn, turn 2."""
    import torch

    from vlm_r1.modules import load_model, load_processor

    model, processor = load_model(src), load_processor(src)
    eos = processor.tokenizer.eos_token_id
    lm = model.model.language_model
    with torch.no_grad():
        for layer in lm.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        e = torch.ones(lm.embed_tokens.weight.shape[1])
        lm.embed_tokens.weight.copy_(e.expand_as(lm.embed_tokens.weight))
        h = lm.norm(e[None, None])[0, 0]
        model.lm_head.weight.zero_()
        model.lm_head.weight[eos] = 40 * h / h.square().sum()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
