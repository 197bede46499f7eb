"""UI-I2E-Bench (UI-E2I-Synth, MSRA, ACL 2025): 1,477 grounding instructions on web, Windows and Android screenshots,
63.03% of them implicit (the element described by position, appearance or purpose rather than named).

Sources. The paper, as its authors host it: colmon46/i2e-bench-leaderboard
``assets/UI_E2I_Synth_Advancing_GUI_Grounding_with_Large_Scale_Instruction_Synthesis.pdf`` at
cadd352a7a9ba355db4bf117e2266d1872f13860: Table 1 (1,477 items, 63.03% implicit), Section 5 ("a prediction is
considered as a correct one if the coordinate falls within the ground-truth bounding box") and the caption of Table 2
("We calculate the average accuracy as correct samples divided by total samples"); the leaderboard of the same
repository (``leaderboard.js:85-108``: Platform Web / Desktop / Mobile, Element Type Button / Icon / Dropdown / Input /
Toggle, Implicitness Explicit / Implicit, Avg.). **The official scorer could not be read**: the leaderboard repository
holds the paper, the page and two result files, no evaluation code, and no other official code was found; the rule
above is the paper's, in words.

Layout and fields follow the third-party loader of InfiXAI/InfiGUI-G1 at 22208e4d4826626731292fa08bb73ec9fc6f9b15
(``README.md:153``: ``huggingface-cli download --repo-type dataset vaundys/I2E-Bench``)::

    DIR/I2E-bench-annotation.jsonl     one JSON record per line (eval/dataset_info.json:26-31)
    DIR/<image>                        images relative to DIR (image_root, eval/eval.py:30)

Records (``eval/data.py:269-293``): ``image`` (path relative to DIR), ``instruction``, ``bounding_box``
``[x1, y1, x2, y2]`` in pixels of the original image (the loader maps it to ``x1..y2`` and ``eval/eval.py:48-54``
scales it with the image as pixels), ``annotations.instr_type`` (``explicit`` / ``implicit``, required by the loader:
``data.py:286``), ``source`` (optional there: ``data.py:290``). The loader's test is inclusive
(``eval/prompts.py:72-74``) and every record counts once in the total (``eval/prompts.py:176-178``), a record with no
readable point as a miss. Errors (not scored): a missing field, a box that is not 4 numbers, ``annotations`` that is
not an object or an ``instr_type`` that is not a string, a ``source`` / ``el_type`` that is not a string, an image path
outside DIR, a missing or corrupt image; warnings (kept): a box outside the image, inverted, or of values in [0, 1].
The file is read with :func:`groundwork.records.iter_records` (JSON lines; a JSON list is read too).

Element type: the paper breaks accuracy down by element type (Table 3), but the loader does not read it and which
field holds it in the published file could not be verified; ``el_type`` (a name seen in a third-party preparation
script whose repository the code index did not name) is read when present, as ``by_element_type``. Which value of
``source`` is which of the paper's Web / Desktop / Mobile columns is unverified too: ``by_source`` keeps the values
as the file writes them.

Identity: a record's ``id`` when it has one, else ``I2E-bench-annotation:<index>`` (the index counting every line);
an id handed out twice refuses the load (:class:`~gui_grounding.data.annotations.DuplicateIdError`).

Metrics (:meth:`UII2E.metrics`, accuracy in percent): ``overall`` (the headline: correct / total over every record,
the paper's "Avg."; the leaderboard's averages are micro: UI-TARS-1.5-7B has 81.3 explicit, 68.2 implicit and 73.2
Avg., not their mean 74.75), ``by_instr_type`` (explicit, implicit), ``by_source``, ``by_element_type``.
"""

from __future__ import annotations

import os

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
from gui_grounding.eval.tables import breakdown_table, cell, check_results, tally

ANNOTATION_FILE = "I2E-bench-annotation.jsonl"
#: the implicitness classes in the paper's order (``annotations.instr_type``)
INSTR_TYPES = ("explicit", "implicit")


class UII2E(Benchmark):
    """UI-I2E-Bench reader and metrics (module docstring gives the format, the sources and what is unverified)."""

    name = "ui-i2e"
    listing_order = 71
    layout_help = (
        "UI-I2E-Bench, published at huggingface.co/datasets/vaundys/I2E-Bench. DIR holds I2E-bench-annotation.jsonl "
        "(lines of {image, instruction, bounding_box [x1,y1,x2,y2] px, annotations {instr_type explicit|implicit}, "
        "source}) and the images (image is relative to DIR)."
    )
    headline_rule = "correct / total over every record (the paper's Avg., a micro average; point inside the box)"
    headline_source = (
        "UI-E2I-Synth paper Section 5 and Table 2 caption (colmon46/i2e-bench-leaderboard assets/"
        "UI_E2I_Synth_Advancing_GUI_Grounding_with_Large_Scale_Instruction_Synthesis.pdf at cadd352); the official "
        "scorer could not be read, the layout follows InfiXAI/InfiGUI-G1 eval/data.py:269-293 at 22208e4"
    )

    def load(self, data_dir: str, *, strict: bool = False) -> tuple[list[Sample], BenchmarkLoadReport]:
        """Read ``DIR/I2E-bench-annotation.jsonl`` (rules in the module docstring).

        Raises:
            FileNotFoundError: no annotation file.
            DuplicateIdError: a sample id is handed out twice.
            SampleError: in strict mode, the first error.
        """
        path = os.path.join(data_dir, ANNOTATION_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found. {self.layout_help}")
        load = AnnotationLoad(self.need_pixels)
        load.read(path, lambda sid, rec, ref: self._sample(sid, rec, ref, data_dir, load), strict, jsonl=True)
        return load.finish(path, path)

    @staticmethod
    def _sample(sample_id, rec, ref, data_dir, load: AnnotationLoad) -> Sample:
        report = load.report
        require(rec, ("image", "instruction", "bounding_box", "annotations"), ref)
        instruction = instruction_text(rec, "instruction", ref, report)
        annotations = rec["annotations"]
        if not isinstance(annotations, dict) or not isinstance(annotations.get("instr_type"), str):
            raise SampleError(
                ref,
                "bad_field",
                f"annotations must be an object with a string instr_type, got {short_repr(annotations)}",
            )
        labels = {}
        for key in ("source", "el_type"):
            value = rec.get(key)
            if value is not None and not isinstance(value, str):
                raise SampleError(ref, "bad_field", f"{key} must be a string or null, got {short_repr(value)}")
            labels[key] = value
        box = box_from_xyxy(rec["bounding_box"], ref, report, "bounding_box")
        image_path, width, height = load.image(data_dir, rec["image"], ref)
        check_unit(box, "pixel", ref, report, "bounding_box")
        check_extent(box, width, height, ref, report, "bounding_box")
        extra = {
            "instr_type": annotations["instr_type"].lower(),
            "el_type": labels["el_type"],
            "image_rel": rec["image"],
        }
        return Sample(sample_id, instruction, image_path, [box], width, height, source=labels["source"], extra=extra)

    def metrics(self, samples: list[Sample], results: dict[str, dict]) -> dict:
        """``{"overall", "by_instr_type", "by_source", "by_element_type"}`` (the last two only when some record carries
        the field), cells in percent (:func:`gui_grounding.eval.tables.cell`). ``instr_type`` is lower-cased, as the
        loader does (``eval/data.py:286``); explicit and implicit come first."""
        check_results(samples, results)
        out = {
            "overall": tally(samples, results, lambda s: ["all"]).get("all", cell(0, 0, 0)),
            "by_instr_type": tally(samples, results, lambda s: [s.extra["instr_type"]], order=INSTR_TYPES),
        }
        by_source = tally(samples, results, lambda s: [s.source] if s.source is not None else [])
        by_element = tally(samples, results, lambda s: [v] if (v := s.extra.get("el_type")) is not None else [])
        if by_source:
            out["by_source"] = dict(sorted(by_source.items()))
        if by_element:
            out["by_element_type"] = dict(sorted(by_element.items()))
        return out

    def table(self, metrics: dict) -> str:
        """Overall, then per instruction type, source and element type (accuracy in percent)."""
        sections = [("by_instr_type", "instr_type"), ("by_source", "source"), ("by_element_type", "element type")]
        return breakdown_table("UI-I2E-Bench accuracy", metrics, sections)


#: the benchmark classes this file registers (groundwork.registry.discover)
BENCHMARKS = (UII2E,)
