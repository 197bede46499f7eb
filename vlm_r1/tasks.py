"""Task plugins: how data records become GRPO prompts and reward columns.

A task turns the ``--data_file_paths`` records into a ``datasets.Dataset`` whose rows hold ``prompt`` (chat
messages with string contents; TRL inserts the image placeholders before the user text), ``image`` (a PIL image,
attached lazily) and any columns its rewards read. Tasks are chosen by ``--task_type``, from :data:`TASKS` (a
:class:`groundwork.registry.Registry`): the entry-point group ``vlm_r1.tasks`` (name -> ``package.module:TaskClass``),
or a ``--task_type package.module:TaskClass`` spec. The core declares no task of its own: upstream VLM-R1's
(``default``, the task without ``--task_type``; ``rec``; ``ic``, ``odLength``, ``gui``, ``gui_defect``) are the upstream
edge's (``vlm_r1.upstream.tasks``), registered in that group by this package (counted as built-ins), and the GUI
plugin's ``gui_grounding`` is registered there too.

A plugin task declares everything the core must not know about it: its own command-line options (``options_class``,
a dataclass parsed together with the core's flags once ``--task_type`` is known: :func:`task_options_class`, used by
``vlm_r1.command_line.parse_task``), its reward functions (``rewards``: name -> function, resolved before the
``vlm_r1.rewards`` registry), metric aliases and the metrics of the one-line console log.
"""

from __future__ import annotations

import logging
from typing import Any

from groundwork import validate
from groundwork.pixel_budget import from_processor, resize_for_model
from groundwork.registry import Registry

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vlm_r1.tasks"


class Task:
    """Base class of a task plugin.

    Class attributes a plugin sets (all optional):

    * ``name``: the ``--task_type`` name;
    * ``default_reward_funcs``: the rewards used when ``--reward_funcs`` is not given;
    * ``options_class``: a dataclass of the task's own flags (``--help`` lists them once ``--task_type`` names the
      task, ``--config`` YAML keys fill them); the parsed instance is ``self.options`` (defaults when not parsed);
    * ``rewards``: ``{name: reward function}`` the task declares for ``--reward_funcs`` (looked up before the
      ``vlm_r1.rewards`` registry: :func:`vlm_r1.rewards.resolve_rewards`);
    * ``reward_aliases``: ``--reward_funcs`` name -> the name used instead for this task (rec: accuracy -> rec_iou);
    * ``metric_aliases``: ``{alias: logged metric key}``: each training log also carries the alias with the same
      values (:class:`vlm_r1.callbacks.StepStatsCallback`);
    * ``console_metrics``: ``(label, key, format)`` entries the one-line console log shows after the reward
      (:func:`vlm_r1.callbacks.compact_log_line`);
    * ``debug_columns``: the task's row columns per line of the ``DEBUG_MODE`` rollout log (``{"problem":
      ("instruction",), "solution": (...)}``; :func:`vlm_r1.upstream.debug_log.reward_block`, through the dialect's rollout log);
    * ``uses_reward_method``: the task reads ``--reward_method``.
    """

    name = "base"
    default_reward_funcs: tuple[str, ...] = ()
    uses_reward_method = False  # reads --reward_method
    options_class: type | None = None
    rewards: dict[str, Any] = {}
    # --reward_funcs name -> registry name used instead for this task (e.g. rec: accuracy -> rec_iou)
    reward_aliases: dict[str, str] = {}
    metric_aliases: dict[str, str] = {}
    console_metrics: tuple[tuple[str, str, str], ...] = ()
    debug_columns: dict[str, tuple[str, ...]] = {}
    #: the run's :class:`groundwork.pixel_budget.PixelBudget`, bound by the entry point (``vlm_r1.grpo_jsonl`` / ``vlm_r1.sft``)
    #: before ``build_dataset``; read it through :meth:`budget`
    pixel_budget: Any = None

    def __init__(self, options: Any = None):
        """``options``: an instance of ``options_class`` (None: its defaults; ignored when the task has none)."""
        if options is None and self.options_class is not None:
            options = self.options_class()
        self.options = options

    def run_info(self, script_args: Any, vlm_module: Any) -> dict:
        """Task-specific entries for ``OUTPUT_DIR/vlm_r1_run.json``. Default: the task's options (``{}`` without)."""
        import dataclasses

        return dataclasses.asdict(self.options) if dataclasses.is_dataclass(self.options) else {}

    def budget(self, processing_class: Any, vlm_module: Any):
        """The run's pixel budget: :attr:`pixel_budget` when the entry point bound one, else the processor's own
        settings (:func:`groundwork.pixel_budget.from_processor`; a task built directly)."""
        if self.pixel_budget is None:
            self.pixel_budget = from_processor(vlm_module, processing_class)
        return self.pixel_budget

    def build_dataset(self, script_args: Any, processing_class: Any, vlm_module: Any):
        """Return a ``datasets.Dataset`` with a ``prompt`` column and lazily loaded ``image``/``images``.

        Reads ``script_args.data_file_list`` / ``script_args.image_folder_list``.
        """
        raise NotImplementedError

    def rollout_environment(self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any):
        """A :class:`vlm_r1.tool_rollout.RolloutEnvironment` when the run's rollouts may call a tool (the trainer then
        runs the tool turns), else ``None`` (default: single-turn rollouts). May raise ``ValueError`` for a flag
        combination the environment refuses."""
        return None

    def sft_rows(self, dataset: Any):
        """The rows ``python -m vlm_r1.sft`` trains on, from the task's dataset (default: the same rows; a task may
        expand a sample into several rows, e.g. one per turn)."""
        return dataset

    def sft_completion(self, row: dict) -> str:
        """The target answer of one dataset row for ``python -m vlm_r1.sft`` (in the frame the prompt asks for).

        Raises:
            NotImplementedError: the task defines no SFT target.
        """
        raise NotImplementedError(f"task {self.name!r} defines no SFT target (sft_completion)")

    def eval_callbacks(
        self, script_args: Any, training_args: Any, processing_class: Any, vlm_module: Any, eval_dataset: Any
    ) -> list:
        """Trainer callbacks that compute the task's own held-out metric (default: none)."""
        return []


def load_images_transform(budget: Any = None):
    """A ``Dataset.with_transform`` function adding PIL images from the ``image_path`` column.

    ``image_path`` holds a path or a list of paths. One path gives an ``image`` column; a list gives ``images``.
    With ``budget`` (the run's :class:`groundwork.pixel_budget.PixelBudget`), each image is resized once, here, by
    :func:`groundwork.pixel_budget.resize_for_model`, so the processor's own smart_resize (set to the same budget) is the
    identity. Images are converted to RGB, in their displayed frame (``ImageOps.exif_transpose``, the convention of
    ``groundwork.validate``: the frame sizes and boxes are read in; upstream VLM-R1 and GTA1 ignore the EXIF orientation
    tag).
    """

    def load(path: str):
        im = validate.open_image(path)
        return resize_for_model(im, budget) if budget is not None else im

    def transform(batch: dict) -> dict:
        paths = batch["image_path"]
        if paths and isinstance(paths[0], list):
            batch["images"] = [[load(p) for p in ps] for ps in paths]
        else:
            batch["image"] = [load(p) for p in paths]
        return batch

    return transform


#: the name of the task a command line without ``--task_type`` gets (upstream VLM-R1's, ``vlm_r1.upstream.tasks``)
DEFAULT_TASK = "default"

#: the entry-point group ``vlm_r1.tasks`` (this package's own entries, the upstream tasks, count as built-ins: an
#: installed plugin may replace one, logged) + ``package.module:TaskClass`` specs
TASKS = Registry("task_type", ENTRY_POINT_GROUP, dict, own="vlm_r1.")


def get_task_class(task_type: str | None) -> type:
    """The task class of ``--task_type`` (None -> ``default``).

    Raises:
        ValueError: unknown task type (the message lists the built-in and installed ones) or a bad spec.
    """
    TASKS.refresh()  # read the entry points now (a plugin installed since the last lookup)
    return TASKS.get_callable(task_type or DEFAULT_TASK)


def get_task(task_type: str | None, options: Any = None) -> Task:
    """The task for ``--task_type`` (None -> ``default``), with its parsed ``options`` (None: the defaults).

    Raises:
        ValueError: unknown task type; the message lists built-in and installed ones.
    """
    cls = get_task_class(task_type)
    return cls() if options is None else cls(options)  # cls(): also plugins written before options existed


def task_options_class(task_type: str | None) -> type | None:
    """The options dataclass ``--task_type`` declares (``Task.options_class``), or None.

    Raises:
        ValueError: unknown task type.
    """
    return getattr(get_task_class(task_type), "options_class", None)


def all_task_options() -> dict[str, type]:
    """``{task name: options dataclass}`` of every registered task that declares options (for ``--help`` and for the
    error naming the task an unknown flag belongs to). A plugin that fails to import is left out."""
    out = {}
    for name in TASKS.names():
        try:
            cls = TASKS.get(name)
        except Exception:  # noqa: BLE001 - a broken third-party plugin must not break --help
            continue
        if getattr(cls, "options_class", None) is not None:
            out[name] = cls.options_class
    return out
