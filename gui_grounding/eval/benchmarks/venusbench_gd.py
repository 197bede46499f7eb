"""VenusBench-GD (inclusionAI, Dec 2025): 6,166 bilingual grounding instructions, 97 applications, web / mobile /
desktop, in six task files, one of them refusal items.

Published at https://huggingface.co/datasets/inclusionAI/VenusBench-GD. The official evaluation is inclusionAI/UI-Venus,
branch ``VenusBench-GD`` (``eval.py`` / ``eval_ddp.py``, a fork of the ScreenSpot-Pro harness), read at
56b1005aaf7675fc516c0d58a2dc4640e197e091; its ``README.md`` gives the layout::

    DIR/instruction/element_grounding.json    spatial_grounding.json     visual_grounding.json
    DIR/instruction/reasoning_grounding.json  functional_grounding.json  refusal_spatial.json
    DIR/images/{web,mobile,desktop}/...        (img_filename is relative to images/)
    DIR/meta.json                              (not read)

Records (each file a JSON list): ``img_filename``; ``bbox`` ``[x1, y1, x2, y2]`` in pixels (``eval.py:159``; the
``[x, y, w, h]`` reading is the commented-out ``eval.py:160``); ``instruction`` (English) and ``instruction_zh``
(Chinese, ``eval.py:400``); optional ``platform`` / ``application`` / ``ui_type`` / ``group`` (``eval.py:423-430``
use None when one is absent; here a present one must be a string or null, else ``bad_field``). ``img_filename`` must
stay inside ``images/`` (``path_outside_root``). The harness divides the box by the image size read from the file
(``eval.py:162,416-418``) and tests the normalised point with edges included (``eval.py:168``): with the point in
pixels of the same image, that is the inclusive pixel test of the shared judge (:mod:`gui_grounding.eval.judge`).

**What the published command scores** (``scripts/run_eval.sh:8-17``: ``--task all --language en --gt_type positive
--inst_style instruction``):

* every ``*.json`` of ``instruction/`` (``eval.py:356-361``), ``refusal_spatial.json`` included;
* every record under the one ``--gt_type`` of the command line (``eval.py:387-395``; records carry no type of their
  own): with ``positive``, each record is tested point-in-box against its own ``bbox`` (``eval.py:436-440,157-171``),
  a missing point is ``wrong_format``;
* the headline is the harness's ``metrics["overall"]`` ``action_acc``: correct / total over every scored record, a
  micro average (``eval.py:132-154,316-329``). The harness also writes ``fine_grained`` (platform x application),
  ``seeclick_style`` (platform), ``leaderboard_simple_style`` (group) and ``leaderboard_detailed_style``
  (application), each with text / icon accuracies (``eval.py:181-314``). It has no per-task-file table: a per-subtask
  number is a run with ``--task <file stem>``, the same count as our ``by_task`` cell.

``--gt_type negative`` (``eval.py:173-179``) is correct only when the model adapter's own ``result`` is
``"negative"``. In that branch only the OpenCUA adapters return it, and on a parse failure (``models/opencua_7b.py:
169-176``), never on the refusal answer every adapter's prompt asks for (``[-1,-1]``, ``click(x=-1, y=-1)``,
``[-1,-1,-1,-1]``: e.g. ``models/qwen3vl_4b.py:103``, ``models/gta1_32b.py:93``); most adapters turn that answer
into no point (``models/gta1_32b.py:129-130``, ``models/holo1_5_7b.py:125-126``), so under the positive test a refusal
is ``wrong_format`` on every item. UI-Venus-1.5's copy of the harness (inclusionAI/UI-Venus branch ``UI-Venus-1.5``,
``models/grounding/eval_screenspot_pro.py:273-280`` at c3a1442c3c4501af18c124458dbbddcbda5c2c6f) scores a negative
as correct when the parsed point is exactly ``[-1, -1]`` (no point: ``wrong_format``); its scripts point at a
``VenusBench_GD/basic_instruction/`` folder (``scripts/run_gd_ddp.sh:27-29``), which is not in the published layout.

**Refusal items**: ``refusal_spatial.json`` (any instruction file whose stem starts with ``refusal``) is the paper's
"Refusal Grounding" subtask, instructions whose target is not on the screen. Unverified: that file's records could not
be read (the dataset is not reachable from this project's machines), so what their ``bbox`` holds, and so what the
published command's positive test gives on them, is unknown. (VLMEvalKit's port scores every row of its own TSV
re-packaging point-in-box with no refusal rule: open-compass/VLMEvalKit ``vlmeval/dataset/GUI/venusbench.py:116-153``
at e8e78f05f3080fe28154f2130321f17951c3be94.) Here each of its records is a refusal sample
(:attr:`Sample.refusal`, no boxes; its ``bbox`` is not read) judged by the shared rule: correct only on an explicit
refusal (the predictions line's ``"refusal": true``) or a point with both coordinates negative, ``wrong_format``
without a point, ``wrong`` for any point on the screen. That contains UI-Venus-1.5's exact ``[-1, -1]`` rule for a
model whose adapter reports ``[-1, -1]`` as a refusal; a point such as ``(-5, -3)`` is a refusal here and not there.

**Denominators** (:data:`DENOMINATORS`; ``metrics.json`` holds every cell, ``--denominator`` picks the headline):

* ``positive`` (first: the authors' scoring as far as it can be pinned): the records of the five target files, each
  correct when its point is inside its box, the published command's positive test; the refusal records, which that
  command also feeds through the box test against their unread ``bbox``, are left out;
* ``with-refusal``: every record, the refusal items judged by the refusal rule;
* ``refusal-as-miss``: every record, each refusal item a miss whatever the answer: what the published command gives
  if the refusal records' ``bbox`` is a placeholder no point hits (unverified), and what a model that cannot abstain
  is given.

**Language**: ``language="en"`` (the published command's ``--language en``: ``instruction``) or ``"cn"``
(``instruction_zh``, ``eval.py:396-402``; the harness allows ``cn`` with the positive test only, and we read
``instruction_zh`` for the refusal items too). A record without the chosen language's instruction is a ``bad_field``
error. Each language is its own run (``metrics["language"]``).

**Identity**: ``sample_id`` is always ``<file stem>:<index>`` (e.g. ``spatial_grounding:3``, the index counting every
record of the file): the published records' own ids, if any, are not known to be unique across the six files, so
they are not used (a record's ``id`` is kept in ``extra["record_id"]``).

Metrics (:meth:`VenusBenchGD.metrics`, accuracy in percent): ``overall`` (the ``positive`` denominator),
``overall_with_refusal``, ``overall_refusal_as_miss``, ``refusal`` (the refusal items alone), ``by_task`` (every record,
per task file: the paper's subtasks), and over the target records (the positive test) ``by_platform``, ``by_ui_type``,
``by_application`` and ``by_group`` for the fields some record carries (a record without the field is in no cell).
"""

from __future__ import annotations

import glob
import os

from groundwork.markdown import md_table
from gui_grounding.data.annotations import (
    BenchmarkLoadReport,
    box_from_xyxy,
    check_extent,
    check_unit,
    instruction_text,
    short_repr,
)
from gui_grounding.data.schema import Sample, SampleError, require
from gui_grounding.eval.benchmarks.base import AnnotationLoad, Benchmark
from gui_grounding.eval.tables import cell, check_results, fmt_cell_columns, tally

#: the published task files, in the paper's order (``README.md`` of the VenusBench-GD branch); others follow by name
TASKS = (
    "element_grounding",
    "spatial_grounding",
    "visual_grounding",
    "reasoning_grounding",
    "functional_grounding",
    "refusal_spatial",
)
#: an instruction file whose stem starts with this holds refusal items (no target)
REFUSAL_PREFIX = "refusal"
#: the harness's ``--language`` values and the instruction field each reads (``eval.py:21,396-402``)
LANGUAGES = {"en": "instruction", "cn": "instruction_zh"}
#: breakdown fields of the target records (``eval.py:423-430``), printed in this order
BREAKDOWNS = ("platform", "ui_type", "application", "group")
#: the headline's denominators (:meth:`VenusBenchGD.headline_cell`); the first is the authors'
DENOMINATORS = ("positive", "with-refusal", "refusal-as-miss")
#: each denominator in words (``--denominator``'s rule in the headline)
DENOMINATOR_RULES = {
    "positive": "the records of the five target files, each correct when its point is inside its box (the published "
    "command's --gt_type positive test, micro average); refusal_spatial.json's records, which that command also "
    "box-tests against a bbox we could not read, are left out",
    "with-refusal": "every record of the six files, a refusal item correct only on a refusal answer (an explicit "
    "refusal, or a point with both coordinates negative)",
    "refusal-as-miss": "every record of the six files, each refusal item counted as a miss whatever the answer",
}


class VenusBenchGD(Benchmark):
    """VenusBench-GD reader and metrics (module docstring gives the format, the sources and the rules).

    Args:
        denominator: the headline's denominator, one of :data:`DENOMINATORS` (``None``: ``"positive"``, the authors').
        language: ``"en"`` (``instruction``, the published command's) or ``"cn"`` (``instruction_zh``).

    Raises:
        ValueError: an unknown denominator or language.
    """

    name = "venusbench-gd"
    listing_order = 70
    layout_help = (
        "VenusBench-GD, published at huggingface.co/datasets/inclusionAI/VenusBench-GD. DIR holds instruction/*.json "
        "(element/spatial/visual/reasoning/functional_grounding.json and refusal_spatial.json: lists of "
        "{img_filename, bbox [x1,y1,x2,y2] px, instruction, instruction_zh, platform, application, ui_type}) and "
        "images/ (img_filename is relative to it)."
    )
    denominators = DENOMINATORS
    denominator_rules = DENOMINATOR_RULES
    headline_rule = DENOMINATOR_RULES[DENOMINATORS[0]]
    refusal_handling = (
        "refusal_spatial.json (no target on the screen): correct only on an explicit refusal or a point with both "
        "coordinates negative (gui_grounding.eval.judge); left out of the authors' positive headline, scored in "
        "with-refusal, missed in refusal-as-miss"
    )
    headline_source = (
        "inclusionAI/UI-Venus branch VenusBench-GD at 56b1005: scripts/run_eval.sh:8-17 (--task all --gt_type "
        "positive --language en), eval.py:157-171 (inclusive box test), eval.py:316-329 (overall = correct / total)"
    )

    def __init__(self, denominator: str | None = None, language: str = "en"):
        if language not in LANGUAGES:
            raise ValueError(f"VenusBench-GD language must be one of {', '.join(LANGUAGES)}, got {language!r}")
        self.denominator = self.check_denominator(denominator)
        self.language = language

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read every ``instruction/*.json`` of ``data_dir`` (the published task files first, in :data:`TASKS` order,
        then any other by name).

        Errors (not scored, counted): unreadable file or element, missing field, box not 4 numbers, an instruction
        that is not a string or not valid Unicode, a breakdown field that is not a string, an image path outside
        ``images/``, a missing or corrupt image. Warnings (kept and scored): box outside the image, inverted box,
        empty instruction, a box of values in [0, 1] (``suspect_unit``).

        Raises:
            FileNotFoundError: no ``instruction/*.json``.
            SampleError: in strict mode, the first error.
        """
        folder = os.path.join(data_dir, "instruction")
        files = glob.glob(os.path.join(folder, "*.json"))
        if not files:
            raise FileNotFoundError(f"no instruction/*.json in {data_dir}. {self.layout_help}")
        rank = {t: i for i, t in enumerate(TASKS)}
        files.sort(key=lambda p: (rank.get(_stem(p), len(TASKS)), _stem(p)))
        image_dir = os.path.join(data_dir, "images")
        load = AnnotationLoad(self.need_pixels)
        field = LANGUAGES[self.language]
        for path in files:
            task = _stem(path)
            load.read(
                path,
                lambda sid, rec, ref, t=task: self._sample(sid, rec, ref, t, field, image_dir, load),
                strict,
                id_key=None,
            )
        return load.finish(folder, data_dir)

    @staticmethod
    def _sample(sample_id, rec, ref, task, field, image_dir, load: AnnotationLoad) -> Sample:
        report = load.report
        refusal = task.startswith(REFUSAL_PREFIX)
        require(rec, ("img_filename", field) if refusal else ("img_filename", field, "bbox"), ref)
        instruction = instruction_text(rec, field, ref, report)
        labels = {}
        for key in BREAKDOWNS:
            value = rec.get(key)
            if value is not None and not isinstance(value, str):
                raise SampleError(ref, "bad_field", f"{key} must be a string or null, got {short_repr(value)}")
            labels[key] = value
        boxes = [] if refusal else [box_from_xyxy(rec["bbox"], ref, report)]
        image_path, width, height = load.image(image_dir, rec["img_filename"], ref)
        for box in boxes:
            check_unit(box, "pixel", ref, report, "bbox")
            check_extent(box, width, height, ref, report, "bbox")
        extra = {
            "task": task,
            "application": labels["application"],
            "group": labels["group"],
            "img_filename": rec["img_filename"],
            "record_id": rec.get("id"),
        }
        return Sample(
            sample_id,
            instruction,
            image_path,
            boxes,
            width,
            height,
            source=task,
            platform=labels["platform"],
            ui_type=labels["ui_type"],
            extra=extra,
            refusal=refusal,
        )

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"denominator", "language", "overall", "overall_with_refusal", "overall_refusal_as_miss", "refusal",
        "by_task", "by_platform", "by_ui_type", "by_application", "by_group"}`` (the last four only for fields some
        target record carries), cells in percent (:func:`gui_grounding.eval.tables.cell`).

        ``overall``: the target records alone (the ``positive`` denominator); ``overall_with_refusal``: every record,
        refusal items judged by the refusal rule; ``overall_refusal_as_miss``: every record, the refusal items counted
        as misses (the targets' correct count over every record); ``refusal``: the refusal items alone. ``by_task``
        counts every record under its task file (:data:`TASKS` order); the other breakdowns count the target records.
        """
        check_results(samples, results)
        empty = cell(0, 0, 0)
        targets = [s for s in samples if not s.refusal]
        everything = tally(samples, results, lambda s: ["all"]).get("all", empty)
        positive = tally(targets, results, lambda s: ["all"]).get("all", empty)
        out = {
            "denominator": self.denominator or DENOMINATORS[0],
            "language": self.language,
            "overall": positive,
            "overall_with_refusal": everything,
            "overall_refusal_as_miss": cell(
                positive["num_correct"], everything["num_total"], everything["wrong_format"]
            ),
            "refusal": tally(samples, results, lambda s: ["all"] if s.refusal else []).get("all", empty),
            "by_task": tally(samples, results, lambda s: [s.extra.get("task")], order=TASKS),
        }
        for key in BREAKDOWNS:
            cells = tally(targets, results, lambda s, k=key: [v] if (v := _label(s, k)) is not None else [])
            if cells:
                out[f"by_{key}"] = dict(sorted(cells.items()))
        return out

    def headline_cell(self, metrics: dict, denominator: str) -> dict:
        """``overall`` (positive), ``overall_with_refusal`` or ``overall_refusal_as_miss``."""
        key = {
            "positive": "overall",
            "with-refusal": "overall_with_refusal",
            "refusal-as-miss": "overall_refusal_as_miss",
        }[denominator]
        return metrics[key]

    def table(self, metrics: dict) -> str:
        """The three overall cells and the refusal items, then per task file, then each breakdown of the target
        records (accuracy in percent, with the 95% Wilson interval)."""
        rows = [
            ["overall (target records, positive test)", "", *fmt_cell_columns(metrics["overall"])],
            ["with refusal items (refusal rule)", "", *fmt_cell_columns(metrics["overall_with_refusal"])],
            ["refusal items as misses", "", *fmt_cell_columns(metrics["overall_refusal_as_miss"])],
            ["refusal items only", "", *fmt_cell_columns(metrics["refusal"])],
        ]
        rows += [["task", task, *fmt_cell_columns(c)] for task, c in metrics.get("by_task", {}).items()]
        for key in BREAKDOWNS:
            rows += [[key, str(v), *fmt_cell_columns(c)] for v, c in metrics.get(f"by_{key}", {}).items()]
        header = ["group", "value", "correct", "total", "no point", "accuracy %", "95% CI"]
        language = metrics.get("language", self.language)
        return f"**VenusBench-GD accuracy ({language} instructions)**\n\n" + md_table(header, rows, left=2)


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _label(sample: Sample, key: str) -> str | None:
    """The breakdown value ``key`` of ``sample`` (platform / ui_type on the sample, the rest in ``extra``)."""
    return getattr(sample, key) if key in ("platform", "ui_type") else sample.extra.get(key)


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (VenusBenchGD,)
