"""A test double of the zoom tool's environment: every first turn counts as a call on the screenshot's top-left
quarter, whatever the (random) tiny model wrote, so a training run on a random checkpoint goes through the whole tool
path (render the tool turn, generate turn 2 with the crop, the forward pass over both images, the masked loss, save,
resume). Used as ``--task_type tests.helpers.forced_zoom:ForcedZoomTask --zoom_tool true``."""

from __future__ import annotations

from gui_grounding.models import zoom_tool
from gui_grounding.training.task import GUIGroundingTask
from gui_grounding.training.zoom import ZoomEnvironment, row_frame


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
