"""The ``gui_grounding`` task's rows seen again at evaluation time: the adapter a row was built with and the request
it was trained on. Its own module so that the task (``gui_grounding.training.task``), the training-time click accuracy
(``gui_grounding.training.train_eval``) and the ``hf`` backend (``gui_grounding.eval.backends.hf.predict_rows``) import it
without importing each other (no ``task -> train_eval -> backends.hf -> task`` cycle).
"""

from __future__ import annotations

from groundwork.geometry import frame_of
from groundwork.pixel_budget import resize_for_model
from groundwork.validate import open_image
from gui_grounding.models.adapters import PROMPT_MODE_ADAPTERS, Request, get_adapter, messages_to_text
from gui_grounding.models.adapters.base import Adapter
from gui_grounding.models.frames import Frame
from gui_grounding.models.prompts import check_mode

__all__ = ["row_adapter", "row_frame", "row_request"]


def row_adapter(row: dict) -> Adapter:
    """The adapter a row was built with (column ``adapter``; rows without it: the gta1 adapter of ``prompt_mode``)."""

    name = row.get("adapter") or PROMPT_MODE_ADAPTERS[check_mode(row.get("prompt_mode") or "non_thinking")]
    return get_adapter(name)


def row_frame(row: dict) -> Frame:
    """The screenshot's frame of a task row: original ``image_size`` ``[W, H]`` and the ``resized_size`` ``[W', H']``
    it is sent at (pixels; :func:`groundwork.geometry.frame_of`).

    Raises:
        KeyError: a column is missing.
        ValueError: a size is not usable (NaN, infinite, under 1 pixel, past 1e12, not a whole pixel, not a pair):
            the callers' "no answer" / dropped-sample path, never a crash.
    """
    frame = frame_of(row["image_size"], row["resized_size"])
    if frame is None:
        raise ValueError(
            f"row {str(row.get('sample_id'))[:80]}: unusable image_size/resized_size "
            f"{str(row['image_size'])[:80]} / {str(row['resized_size'])[:80]}"
        )
    return frame


def row_request(row: dict, budget, adapter: Adapter | None = None):
    """The :class:`gui_grounding.models.adapters.Request` of a task row, exactly as it was trained: the row's prompt (plain
    strings turned into content blocks with the image before the first user text, TRL's
    ``prepare_multimodal_messages`` rule), its screenshot resized once by the run's ``budget``
    (:func:`groundwork.pixel_budget.resize_for_model`, as the training image transform does), and the frame
    ``image_size`` -> ``resized_size`` for parsing.

    Raises:
        ValueError: ``budget`` gives another size than the row's ``resized_size`` (the rows were built under another
            pixel budget), or a size is unusable (:func:`row_frame`).
    """
    from trl.data_utils import prepare_multimodal_messages

    adapter = adapter or row_adapter(row)
    frame = row_frame(row)  # before decoding: a row with unusable sizes costs no image read
    image = open_image(row["image_path"])
    image = resize_for_model(image if image.mode == "RGB" else image.convert("RGB"), budget)
    size = (frame.resized_width, frame.resized_height)
    if image.size != size:
        raise ValueError(
            f"row {row.get('sample_id')}: the pixel budget gives {image.size[0]}x{image.size[1]}, the row "
            f"was built at {size[0]}x{size[1]} (another budget)"
        )
    messages = prepare_multimodal_messages(row["prompt"], images=[image])
    for message in messages:  # the image goes separately to the processor; keep the placeholder only
        for part in message["content"]:
            part.pop("image", None)
    return Request(messages, image, {"frame": frame}, messages_to_text(row["prompt"]))
