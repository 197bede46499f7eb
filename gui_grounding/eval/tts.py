"""Test-time grounding (``gui-grounding eval --tts MODE``): K-sample consensus, zoom-in, and both, with the greedy
answer of the same run beside them.

Modes (:data:`TTS_MODES`):

* ``greedy`` (default): one greedy answer per screenshot; the run is exactly what it was before test-time modes
  existed (same predictions lines, same ``metrics.json``).
* ``consensus``: K answers sampled per screenshot (``--tts-samples``, ``--tts-temperature``, ``--tts-top-p``,
  ``--tts-seed``), voted by GUI-RC's region rule (:mod:`gui_grounding.models.consensus`: the centre of the largest max-vote
  region, ties to the region first in raster order); a sample whose answer is a **box** (``Adapter.answer_box``, in
  original pixels) votes with that box, a point with the 50-px square around it, as GUI-RC does with four- and
  two-number answers (ZJU-REAL/GUI-RCPO ``GUI-RC/evaluation.py:28-39,166-174`` at cd3bd51); the **agreement** (share
  of the K samples covering the winner) is stored per sample as a confidence. GUI-RC samples ``SAMPLE_NUM = 64`` at
  ``TEMPERATURE = 0.7`` with ``top_p=0.95`` and ``max_tokens=1024`` (evaluation.py:23-24, :104-109); our defaults
  are K=8, 0.7, top_p 1.0 and the profile's ``max_new_tokens``: a "GUI-RC" number needs at least ``--tts-samples 64
  --tts-top-p 0.95``.
* ``zoom``: two passes. The greedy answer picks a window of the **original** screenshot (``--tts-zoom``: each side
  that fraction of the screenshot's, centred on the answer and shifted inside the image:
  :func:`gui_grounding.models.frames.zoom_window`); the crop is sent under the run's resolved pixel budget (the same
  :class:`groundwork.pixel_budget.PixelBudget` as every request: the adapter's ``build_request``), and the second greedy
  answer is mapped back through the crop (:class:`gui_grounding.models.frames.CropWindow`: a plain integer offset). Crops
  are taken from the displayed frame (EXIF orientation applied), the frame every box and point is in.
* ``zoom+consensus``: the consensus answer picks the window, and K samples on the crop are voted again (in the crop's
  pixels, clipped to the crop); its agreement is the second vote's (the first's when the crop gives no point).
* ``zoom-tool``: the model decides (issue 30 item 5). Its first turn is the adapter's prompt with the learned zoom
  tool offered (``Adapter.zoom_messages``, ``--max-zoom-calls N`` calls; :mod:`gui_grounding.models.zoom_tool`), the
  screenshot resized by the run's budget as every request (``Adapter.build_request``), greedy. A turn that calls no
  tool is the answer (the adapter's parse). A valid call ``zoom(bbox_2d)`` (in the answer frame of the image the turn
  answered on) gives a window of the **original** screenshot (``zoom_tool.region_window``; a later call's window,
  found in the crop it answered on, is moved to the screenshot by that crop's offset, ``CropWindow.to_image``); the
  crop is resized by the budget and sent back in a tool-response turn after the model's call, so the next turn sends
  every image so far (screenshot, then each crop, ``Request.images``); a point answered there maps back with
  ``zoom_tool.crop_point_to_original``. Any reject (``zoom_tool.REJECTS``: a malformed call, several calls, an
  inverted, outside or degenerate region, an unsendable crop, a call after the N allowed) ends the sample with **no
  point** (scored as a miss) and its reason in ``tts.reject``; it never raises. Its greedy answer is the plain prompt's
  (no tool), as in the other modes. The turns are :mod:`gui_grounding.eval.tts_tool`'s.

When the first pass has no point (nothing parsed, or a refusal) there is no window and the answer is the first
pass's; when the crop pass has no point, or the crop cannot be sent under the budget (a too-thin window), the answer
falls back to the first pass's point (``tts.fallback`` in the predictions line says why).

Every backend draws with its own mechanism (:class:`Engine`): ``hf`` samples K continuations of one prefill per
prompt where the family has the shared-prompt prefill hook (``VLMBaseModule.shared_prompt_prefill``: the Qwen
families), else K independent ``generate`` calls (logged); ``vllm`` uses ``SamplingParams(n=K, seed=...)``;
``openai`` asks for ``n=K`` with a ``seed`` and fills any shortfall with repeated calls (servers that ignore ``n``).
Sampling is seeded per sample and pass (:func:`seed_for`: the run's ``--tts-seed`` and the sample_id), and the
seed is recorded: the same seed gives the same answers on the same backend and batch size.

Predictions line of a test-time run (``point``, ``raw_response``, ``prompt``, ``adapter`` are the **greedy**
answer, exactly as a greedy run writes them, so rescoring the file with ``--tts greedy`` gives the greedy numbers)::

    {"sample_id", "point", "raw_response", "prompt", "adapter",
     "samples": [[x, y] | null, ...],                 # K sampled points, original pixels (consensus modes)
     "sample_boxes": [[x1, y1, x2, y2] | null, ...],  # the box each sample wrote (box answers only), original pixels
     "sample_responses": ["...", ...],
     "tts": {"mode", "point": [x, y] | null, "agreement", "votes", "region": [x0, y0, x1, y1] | null,
             "window": [x0, y0, x1, y1] | null, "zoom_point", "zoom_responses": [...], "fallback": null | "..."},
     "cost": {"greedy" | "sampling" | "zoom" | "tool": {"calls", "sequences", "prompt_tokens", "generated_tokens",
              "wall_s"}}}

``zoom-tool``'s ``tts`` record instead: ``{"mode": "zoom-tool", "point", "agreement": null, "refusal": bool, "zoomed":
bool, "reject": null | a REJECTS code, "max_zoom_calls", "prompt" (the first turn's, with the tool block), "turns":
[{"text", "call": [x1, y1, x2, y2] (answer frame) when the turn called zoom}, {"text", "window": [x_min, y_min, x_max,
y_max] (original pixels), "crop_size": [W', H'] (the crop as sent), "crop_answer": [x, y] | null (the crop's answer
frame), "point": [x, y] | null (original pixels), "call": ...}, ...]}``; its cost phase is ``tool`` (every turn).

**Rescoring without a model**: ``--tts consensus --predictions FILE`` applies the same rule to each line's
``"samples"`` (original pixels, beside ``point``) and, where a line has them, its ``"sample_boxes"`` (a sample with a
box votes with it), so K answers sampled on other infrastructure get the same answer;
``zoom`` modes score the line's ``tts.point`` (written by a ``--model`` run of that mode).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import asdict, dataclass, field

from groundwork import validate
from groundwork.outputs import write_bytes
from gui_grounding.eval import tts_tool
from gui_grounding.eval.backends import load_image, open_predictions, record, write_records
from gui_grounding.eval.engine import Draw, Engine
from gui_grounding.eval.judge import CORRECT
from gui_grounding.eval.predictions import parse_point, results_from_predictions
from gui_grounding.models.consensus import DEFAULT_REGION, MAX_SAMPLES, check_region, consensus, usable_box
from gui_grounding.models.frames import zoom_window

logger = logging.getLogger(__name__)

TTS_MODES = ("greedy", "consensus", "zoom", "zoom+consensus", "zoom-tool")
#: GUI-RC's sampling temperature (ZJU-REAL/GUI-RCPO GUI-RC/evaluation.py:23)
DEFAULT_TEMPERATURE = 0.7
#: K (GUI-RC samples ``SAMPLE_NUM = 64``, GUI-RC/evaluation.py:24 at cd3bd51; 8 here, a cheaper default)
DEFAULT_SAMPLES = 8
#: nucleus mass (GUI-RC: ``top_p=0.95``, evaluation.py:107; 1.0 here, no cut)
DEFAULT_TOP_P = 1.0
DEFAULT_ZOOM = 0.5
#: zoom-tool calls allowed per sample (``--max-zoom-calls``), and the most a run may allow
DEFAULT_ZOOM_CALLS = 1
MAX_ZOOM_CALLS = 8
#: cost phases of a predictions line: the greedy pass, K samples on the screenshot, the crop pass, the zoom-tool turns
PHASES = ("greedy", "sampling", "zoom", "tool")
#: a cost value beyond this (or not a number) in a predictions line is not counted (a hostile file must not overflow
#: the per-sample means): the predictions reader drops it with a warning (``gui_grounding.eval.predictions``
#: ``VALUE_FIELDS``), and :func:`cost_summary` sums only the known keys by the same rule
MAX_COST_VALUE = validate.MAX_COUNT
#: the cost keys of one phase (what :func:`_cost` writes) and whether each is a count (integer)
COST_KEYS = {"calls": True, "sequences": True, "prompt_tokens": True, "generated_tokens": True, "wall_s": False}
#: agreement bins of the calibration table and plot (left-closed; the last bin includes 1.0)
CALIBRATION_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


@dataclass(frozen=True)
class TTSConfig:
    """A test-time mode and its settings (see the module docstring).

    Attributes:
        mode: one of :data:`TTS_MODES`.
        samples: K sampled answers per pass (consensus modes), 1 .. :data:`gui_grounding.models.consensus.MAX_SAMPLES`
            (default 8; GUI-RC's ``SAMPLE_NUM`` is 64, evaluation.py:24 at cd3bd51).
        temperature: sampling temperature (> 0; default 0.7, GUI-RC's ``TEMPERATURE``, :23).
        top_p: nucleus sampling mass in ``(0, 1]`` (default 1.0; GUI-RC samples with ``top_p=0.95``, :107).
        seed: the run's sampling seed (recorded in ``metrics.json``).
        region: side of each sample's square voting region, original pixels (GUI-RC: 50), in
            ``[MIN_REGION, MAX_REGION]`` = ``[2, 1e6]`` (:func:`gui_grounding.models.consensus.check_region`: a narrower
            square cannot hold every point's vote).
        zoom: zoom window side as a fraction of the screenshot's side, ``(0, 1]``.
        max_zoom_calls: zoom-tool calls allowed per sample (``zoom-tool``), 1 .. :data:`MAX_ZOOM_CALLS`.
    """

    mode: str = "greedy"
    samples: int = DEFAULT_SAMPLES
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    seed: int = 0
    region: float = DEFAULT_REGION
    zoom: float = DEFAULT_ZOOM
    max_zoom_calls: int = DEFAULT_ZOOM_CALLS

    def __post_init__(self):
        if self.mode not in TTS_MODES:
            raise ValueError(f"unknown test-time mode {self.mode!r}; expected one of {', '.join(TTS_MODES)}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or not 1 <= self.samples <= MAX_SAMPLES:
            raise ValueError(f"tts samples must be an integer in 1..{MAX_SAMPLES}, got {self.samples!r}")
        for name, lo, hi, lo_open in (
            ("temperature", 0.0, 100.0, True),
            ("top_p", 0.0, 1.0, True),
            ("zoom", 0.0, 1.0, True),
        ):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or not ((lo < v if lo_open else lo <= v) and v <= hi)
            ):
                raise ValueError(f"tts {name} must be a number in ({lo}, {hi}], got {v!r}")
        try:
            check_region(self.region)
        except ValueError as err:
            raise ValueError(f"tts {err}") from None
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise ValueError(f"tts seed must be an integer in 0..2**31-1, got {self.seed!r}")
        calls = self.max_zoom_calls
        if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= MAX_ZOOM_CALLS:
            raise ValueError(f"max zoom calls must be an integer in 1..{MAX_ZOOM_CALLS}, got {calls!r}")

    @property
    def active(self) -> bool:
        """Whether this mode needs its own driver (:meth:`run`); ``greedy`` is each backend's own greedy loop."""
        return self.mode != "greedy"

    def run(self, engine: Engine, samples: list, out_path: str, *, adapter, budget) -> str:
        """The one test-time dispatch: a backend that got an :attr:`active` config hands its :class:`Engine` here
        (backends never import this module; ``docs/ARCHITECTURE.md``). Returns ``out_path``."""
        return predict_tts(engine, samples, out_path, adapter=adapter, budget=budget, tts=self)

    @property
    def uses_consensus(self) -> bool:
        return self.mode in ("consensus", "zoom+consensus")

    @property
    def uses_zoom(self) -> bool:
        return self.mode in ("zoom", "zoom+consensus")

    @property
    def uses_zoom_tool(self) -> bool:
        return self.mode == "zoom-tool"

    @property
    def images_per_prompt(self) -> int:
        """The most images one request of this mode sends (a backend's per-prompt limit, e.g. vLLM's
        ``limit_mm_per_prompt``): the screenshot, and in ``zoom-tool`` one crop per allowed call."""
        return 1 + self.max_zoom_calls if self.uses_zoom_tool else 1

    @property
    def phases(self) -> tuple[str, ...]:
        """The cost phases this mode's answer needs (the greedy pass of a consensus run is only for the
        side-by-side greedy numbers)."""
        return {
            "greedy": ("greedy",),
            "consensus": ("sampling",),
            "zoom": ("greedy", "zoom"),
            "zoom+consensus": ("sampling", "zoom"),
            "zoom-tool": ("tool",),
        }[self.mode]

    def label(self) -> str:
        """``consensus (K=8, T=0.7)``-style name for tables."""
        bits = []
        if self.uses_consensus:
            bits.append(f"K={self.samples}, T={self.temperature:g}")
        if self.uses_zoom:
            bits.append(f"window {self.zoom:g}")
        if self.uses_zoom_tool:
            bits.append(f"at most {self.max_zoom_calls} call{'s' if self.max_zoom_calls != 1 else ''}")
        return f"{self.mode} ({', '.join(bits)})" if bits else self.mode

    def to_dict(self) -> dict:
        """The settings (``metrics.json["meta"]["tts"]``); ``max_zoom_calls`` only for ``zoom-tool`` (the other
        modes' records stay as they were)."""
        out = asdict(self)
        if not self.uses_zoom_tool:
            del out["max_zoom_calls"]
        return out


def seed_for(seed: int, sample_id: str, stage: str) -> int:
    """A 31-bit sampling seed for one sample and pass (``stage``: ``"sampling"`` / ``"zoom"``), from the run's
    ``seed``: stable across runs, processes and batch compositions (SHA-256, not Python's salted ``hash``)."""
    digest = hashlib.sha256(f"{seed}\x00{sample_id}\x00{stage}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------------------------------
# the driver: one loop for every backend


def _cost(draws: list[Draw], wall: float, index: int) -> dict:
    d = draws[index]
    return {
        "calls": d.calls,
        "sequences": len(d.texts),
        "prompt_tokens": d.prompt_tokens,
        "generated_tokens": d.generated_tokens,
        "wall_s": round(wall / max(1, len(draws)), 6),
    }


def _add_cost(a: dict | None, b: dict) -> dict:
    return b if a is None else {k: a.get(k, 0) + b.get(k, 0) for k in b}


def _run_phase(engine, tts, phase, reqs, n, seeds, idx, costs, errors) -> list[Draw]:
    """One engine call for the requests of samples ``idx`` (greedy when ``n == 1`` without seeds); adds its cost
    (wall time shared equally) to ``costs[i][phase]`` and the first error to ``errors[i]``."""
    t0 = time.perf_counter()
    if n == 1 and seeds is None:
        draws = engine.generate(reqs, n=1, temperature=0.0)
    else:
        draws = engine.generate(reqs, n=n, temperature=tts.temperature, top_p=tts.top_p, seeds=seeds)
    wall = time.perf_counter() - t0
    for j, i in enumerate(idx):
        costs[i][phase] = _add_cost(costs[i].get(phase), _cost(draws, wall, j))
        if draws[j].error and errors[i] is None:
            errors[i] = draws[j].error
    return draws


def _parse_all(sample, request, texts: list[str], adapter) -> tuple[list, list]:
    """Each text -> ``(points, boxes)``: its point in original pixels (``None`` when it does not parse or is a
    refusal), by the one parse path of every backend (:func:`gui_grounding.eval.backends.record`), and the box it
    wrote in original pixels when it answered one (``Adapter.parse_box``; ``None`` for a point answer, no point, or
    a box beyond +-1e7), what the vote uses as that sample's region."""

    points, boxes = [], []
    for t in texts:
        point = record(sample, request, t, adapter)["point"]
        box = usable_box(adapter.parse_box((request.assistant_prefix or "") + t, request)) if point else None
        points.append(point)
        boxes.append(list(box) if box is not None else None)
    return points, boxes


def _vote(points: list, boxes: list, width: int, height: int, region: float):
    return consensus(points, width, height, region=region, boxes=boxes)


def predict_tts(engine: Engine, samples: list, out_path: str, *, adapter, budget, tts: TTSConfig) -> str:
    """Write test-time predictions of ``engine`` for ``samples`` to ``out_path`` (resumable; appends).

    Per chunk of ``engine.chunk_size`` samples (a :class:`_Chunk`): the greedy pass, the K samples (consensus modes),
    the zoom pass (zoom modes), then one line per sample (module docstring). A request that failed for good (API
    backends) writes the line with ``"error"``, which the next run on the same file redoes.

    Returns:
        ``out_path``.

    Raises:
        OutputError: the predictions file cannot be read, rewritten or appended to.
    """
    from tqdm.auto import tqdm

    if tts.uses_zoom_tool and not getattr(adapter, "supports_zoom_tool", False):
        raise ValueError(
            f"--tts zoom-tool needs an adapter with a tool-call format (supports_zoom_tool); {adapter.name} has none"
        )
    logger.info("test-time mode %s on %s; %s", tts.label(), engine.name, engine.sampling_note or "")
    out, todo = open_predictions(out_path, samples)
    size = max(1, int(engine.chunk_size))
    with out, tqdm(total=len(todo), desc=f"predict ({tts.mode})", unit="sample") as bar:
        for start in range(0, len(todo), size):
            part = todo[start : start + size]
            chunk = _Chunk(engine, tts, adapter, budget, part, [load_image(s) for s in part])
            greedy = chunk.run("greedy", chunk.requests, 1, None, chunk.everyone)
            lines = [
                record(s, r, d.text, adapter, error=d.error)
                for s, r, d in zip(chunk.samples, chunk.requests, greedy, strict=True)
            ]
            if tts.uses_zoom_tool:
                tts_tool.run_turns(chunk)  # the zoom-tool turns (gui_grounding.eval.tts_tool)
            else:
                chunk.first_pass_and_zoom(lines)
            write_records(out, chunk.finish(lines))
            bar.update(len(chunk.samples))
    return out_path


class _Chunk:
    """One chunk of :func:`predict_tts`: its samples, their images and requests, each sample's cost per phase and
    first error (:func:`_run_phase`), and each sample's ``tts`` record (module docstring), filled pass by pass."""

    def __init__(self, engine: Engine, tts: TTSConfig, adapter, budget, samples: list, images: list):
        self.engine, self.tts, self.adapter, self.budget = engine, tts, adapter, budget
        self.samples, self.images = samples, images
        self.requests = [
            adapter.build_request(s, im, budget=budget) for s, im in zip(samples, self.images, strict=True)
        ]
        for s, r in zip(samples, self.requests, strict=True):
            r.context["sample_id"] = s.sample_id  # for the engines' logs
        self.everyone = list(range(len(samples)))
        self.costs: list[dict] = [{} for _ in samples]
        self.errors: list[str | None] = [None] * len(samples)
        self.info = [
            {
                "mode": tts.mode,
                "point": None,
                "agreement": None,
                "votes": None,
                "region": None,
                "window": None,
                "zoom_point": None,
                "fallback": None,
            }
            if not tts.uses_zoom_tool
            else tts_tool.new_record(tts.mode, tts.max_zoom_calls)
            for _ in samples
        ]

    def run(self, phase: str, reqs: list, n: int, seeds, idx: list[int]) -> list[Draw]:
        """One engine call for the samples ``idx`` (:func:`_run_phase`)."""
        return _run_phase(self.engine, self.tts, phase, reqs, n, seeds, idx, self.costs, self.errors)

    def first_pass_and_zoom(self, lines: list[dict]) -> None:
        """The modes other than ``zoom-tool``: the first pass's answers (:meth:`first_answers`), then (zoom modes)
        the crop pass on the fixed window around each (:func:`gui_grounding.models.frames.zoom_window`)."""
        first = self.first_answers(lines)  # the point that picks the zoom window
        if self.tts.uses_zoom:
            windows = {
                i: zoom_window(point, self.images[i].width, self.images[i].height, self.tts.zoom)
                for i, point in first.items()
                if point is not None
            }
            self.zoom(first, windows)

    def first_answers(self, lines: list[dict]) -> dict[int, tuple | list | None]:
        """The first pass's answer of each sample (index -> point or None): the consensus vote of K samples
        (consensus modes: their points and texts go in the line, the vote in the ``tts`` record), else the greedy
        point (also the ``tts`` record's point)."""
        first = {i: lines[i]["point"] for i in self.everyone}
        if not self.tts.uses_consensus:
            for i in self.everyone:
                self.info[i]["point"] = lines[i]["point"]
            return first
        tts = self.tts
        seeds = [seed_for(tts.seed, s.sample_id, "sampling") for s in self.samples]
        draws = self.run("sampling", self.requests, tts.samples, seeds, self.everyone)
        for i, (s, r, d) in enumerate(zip(self.samples, self.requests, draws, strict=True)):
            points, boxes = _parse_all(s, r, d.texts, self.adapter)
            vote = _vote(points, boxes, s.width, s.height, tts.region)
            lines[i]["samples"] = [list(p) if p is not None else None for p in points]
            if any(b is not None for b in boxes):
                lines[i]["sample_boxes"] = boxes
            lines[i]["sample_responses"] = list(d.texts)
            self.info[i].update(
                point=list(vote.point) if vote.point else None,
                agreement=vote.agreement,
                votes=vote.votes,
                region=list(vote.region) if vote.region else None,
            )
            first[i] = vote.point
        return first

    def zoom(self, first: dict[int, tuple | list | None], windows: dict) -> None:
        """The zoom pass: each sample with a first-pass point and a window (``windows``: index -> its
        :class:`gui_grounding.models.frames.CropWindow`) that can be sent under the budget asks again on the crop
        (K samples, seeded, in consensus modes); the others keep the first answer, with the ``fallback`` saying
        why."""
        zoom_idx, zoom_reqs = [], []
        for i, s in enumerate(self.samples):
            if first[i] is None:
                self.info[i]["fallback"] = "no first-pass point: no window"
                continue
            window = windows[i]
            try:
                self.budget.size_sent(window.width, window.height)
            except ValueError as err:
                self.info[i]["fallback"] = f"window {window.as_list()} cannot be sent: {err}"
                continue
            zoom_idx.append(i)
            zoom_reqs.append(
                self.adapter.build_request(_CropSample(s, window), window.crop(self.images[i]), budget=self.budget)
            )
            zoom_reqs[-1].context["sample_id"] = s.sample_id
        if not zoom_idx:
            return
        tts = self.tts
        n = tts.samples if tts.uses_consensus else 1
        seeds = (
            [seed_for(tts.seed, self.samples[i].sample_id, "zoom") for i in zoom_idx] if tts.uses_consensus else None
        )
        draws = self.run("zoom", zoom_reqs, n, seeds, zoom_idx)
        for j, i in enumerate(zoom_idx):
            self._zoom_answer(i, first[i], windows[i], zoom_reqs[j], draws[j])

    def _zoom_answer(self, i: int, first_point, window, request, draw: Draw) -> None:
        """Sample ``i``'s answer from its crop: the crop's point (consensus modes: the vote on the crop, whose
        agreement replaces the first vote's when it has a point) mapped back to the image, else the first point."""
        crop_points, crop_boxes = _parse_all(_CropSample(self.samples[i], window), request, draw.texts, self.adapter)
        info = self.info[i]
        info["window"] = window.as_list()
        info["zoom_responses"] = list(draw.texts)
        if self.tts.uses_consensus:
            vote = _vote(crop_points, crop_boxes, window.width, window.height, self.tts.region)
            if vote.point is not None:  # else the first vote's agreement stays with its point
                info.update(
                    agreement=vote.agreement,
                    votes=vote.votes,
                    region=[*window.to_image(vote.region[:2]), *window.to_image(vote.region[2:])],
                )
            crop_point = vote.point
        else:
            crop_point = crop_points[0] if crop_points else None
        if crop_point is None:
            info["fallback"] = "no point in the crop: first-pass point kept"
            info["point"] = list(first_point)
        else:
            info["point"] = list(window.to_image(crop_point))
            info["zoom_point"] = list(crop_point)

    def finish(self, lines: list[dict]) -> list[dict]:
        """The chunk's predictions lines: each with its ``tts`` record, its cost and its first error (if any)."""
        for i, line in enumerate(lines):
            line["tts"] = self.info[i]
            line["cost"] = self.costs[i]
            if self.errors[i] is not None:
                line["error"] = self.errors[i]
        return lines


@dataclass
class _CropSample:
    """A sample seen through a zoom window: the same instruction; ``width``/``height`` of the crop."""

    sample: object
    window: object
    extra: dict = field(default_factory=dict)

    @property
    def sample_id(self):
        return self.sample.sample_id

    @property
    def instruction(self):
        return self.sample.instruction

    @property
    def width(self):
        return self.window.width

    @property
    def height(self):
        return self.window.height


# --------------------------------------------------------------------------------------------------------------------
# scoring a file: the answers of a mode, the cost, the calibration


def _samples_problem(value) -> tuple[str | None, list]:
    """``(problem or None, points)`` of a line's ``"samples"`` (each null or [x, y] finite within +-1e7)."""

    if not isinstance(value, list):
        return f"'samples' must be a list of [x, y] / null, got {type(value).__name__}", []
    if len(value) > MAX_SAMPLES:
        return f"'samples' holds {len(value)} points; at most {MAX_SAMPLES}", []
    if not value:
        return "'samples' is empty", []
    points = []
    for i, p in enumerate(value):
        ok, point = parse_point(p)
        if not ok:
            return f"samples[{i}] must be null or [x, y] finite numbers (|v| <= 1e7), got {str(p)[:60]}", []
        points.append(point)
    return None, points


def _sample_boxes_problem(value, count: int) -> tuple[str | None, list | None]:
    """``(problem or None, boxes)`` of a line's ``"sample_boxes"`` (absent: ``None`` boxes; else a list of
    ``count`` entries, each null or ``[x1, y1, x2, y2]`` finite within +-1e7)."""
    if value is None:
        return None, None
    if not isinstance(value, list) or len(value) != count:
        return f"'sample_boxes' must be a list of {count} [x1, y1, x2, y2] / null (one per sample)", None
    boxes = []
    for i, b in enumerate(value):
        box = usable_box(b) if b is not None else None
        if b is not None and box is None:
            return (
                f"sample_boxes[{i}] must be null or [x1, y1, x2, y2] finite numbers (|v| <= 1e7), got {str(b)[:60]}",
                None,
            )
        boxes.append(box)
    return None, boxes


def tts_predictions(predictions: dict[str, dict], samples: list, tts: TTSConfig) -> dict[str, dict]:
    """The answers of ``tts.mode`` as predictions (``{sample_id: {"point", "refusal", "agreement", ...}}``), read
    from the greedy-keyed ``predictions`` of :func:`gui_grounding.eval.predictions.load_predictions`.

    * ``consensus``: the vote over the line's ``"samples"`` (and its ``"sample_boxes"``, when present: a sample with
      a box votes with it) with the sample's size and ``tts.region`` (the same rule a model run applied); a line
      without usable ``samples``, or with unusable ``sample_boxes``, is malformed for this mode (scored
      ``wrong_format``, with the reason);
    * ``zoom`` / ``zoom+consensus`` / ``zoom-tool``: the line's ``tts.point`` when ``tts.mode`` is this mode, else
      malformed (``zoom-tool``: its own refusal, ``tts.refusal``, since its prompt is not the greedy one's);
    * a line that was already malformed, or an explicit greedy refusal with no sampled point, keeps that.
    """

    out = {}
    for s in samples:
        pred = predictions.get(s.sample_id)
        if pred is None:
            continue
        if pred.get("malformed") is not None:
            out[s.sample_id] = pred
            continue
        # the mode's own point, refusal and agreement (never a top-level "agreement" of the line)
        new = {k: v for k, v in pred.items() if k not in ("point", "refusal", "agreement")}
        if tts.mode == "consensus":
            problem, points = (
                _samples_problem(pred.get("samples"))
                if "samples" in pred
                else ("no 'samples' (K sampled points) for --tts consensus", [])
            )
            boxes = None
            if problem is None:
                problem, boxes = _sample_boxes_problem(pred.get("sample_boxes"), len(points))
            if problem is None:
                vote = consensus(points, s.width or None, s.height or None, region=tts.region, boxes=boxes)
                new.update(point=list(vote.point) if vote.point else None, agreement=vote.agreement)
                if vote.point is None and pred.get("refusal") is True:
                    new["refusal"] = True
        else:
            info = pred.get("tts")
            problem = None
            if not isinstance(info, dict) or info.get("mode") != tts.mode:
                problem = f"no {tts.mode} answer in this record (a --model run with --tts {tts.mode} writes one)"
            else:
                ok, point = parse_point(info.get("point"))
                agreement = validate.bounded_number(info.get("agreement"))  # [0, 1], the reader's rule
                if not ok:
                    problem = f"tts.point must be null or [x, y], got {str(info.get('point'))[:60]}"
                else:
                    new["point"] = point
                    if agreement is not None:
                        new["agreement"] = agreement
                    refused = info.get("refusal") if tts.uses_zoom_tool else pred.get("refusal")
                    if point is None and refused is True:
                        new["refusal"] = True
        if problem is not None:
            new.update(point=None, malformed=problem)
        out[s.sample_id] = new
    return out


def cost_summary(predictions: dict[str, dict], tts: TTSConfig) -> dict:
    """Totals and per-sample means of each phase's cost over the lines' ``"cost"``, and per answer: ``greedy`` and
    the mode's (the sum of :attr:`TTSConfig.phases`). Lines without a ``cost`` (a file sampled elsewhere) are not
    counted (``lines_with_cost``). Only :data:`COST_KEYS` are summed, each value by the value rule
    (:func:`groundwork.validate.bounded_number`: counts integers in ``[0, MAX_COST_VALUE]``, ``wall_s`` a finite number
    in that range), the rule the predictions reader already applied."""
    phases: dict[str, dict] = {}
    counted = 0
    for pred in predictions.values():
        cost = pred.get("cost")
        if not isinstance(cost, dict):
            continue
        counted += 1
        for phase in PHASES:
            c = cost.get(phase)
            if isinstance(c, dict):
                acc = phases.setdefault(phase, {})
                for k, integer in COST_KEYS.items():
                    v = validate.bounded_number(c.get(k), 0, MAX_COST_VALUE, integer=integer)
                    if v is not None:
                        acc[k] = acc.get(k, 0) + v

    def per_answer(names):
        total: dict = {}
        for n in names:
            for k, v in phases.get(n, {}).items():
                total[k] = total.get(k, 0) + v
        total = {k: round(v, 3) if k == "wall_s" else v for k, v in total.items()}
        means = {f"{k}_per_sample": round(v / counted, 4) for k, v in total.items()} if counted else {}
        return {**total, **means}

    return {
        "lines_with_cost": counted,
        "greedy": per_answer(["greedy"]),
        tts.mode: per_answer(tts.phases),
        "phases": {k: per_answer([k]) for k in phases},
    }


def calibration(results: dict[str, dict], answers: dict[str, dict]) -> list[dict]:
    """Accuracy per agreement bin (:data:`CALIBRATION_BINS`): ``[{"low", "high", "samples", "correct",
    "accuracy"}]`` over the samples whose answer has an agreement (a finite number in ``[0, 1]``:
    :func:`groundwork.validate.bounded_number`, the predictions reader's rule; accuracy ``None`` for an empty bin)."""

    bins = [
        {"low": lo, "high": hi, "samples": 0, "correct": 0}
        for lo, hi in zip(CALIBRATION_BINS[:-1], CALIBRATION_BINS[1:], strict=True)
    ]
    for sid, ans in answers.items():
        a = validate.bounded_number(ans.get("agreement"))
        if a is None or sid not in results:
            continue
        k = min(len(bins) - 1, max(0, int(a * (len(bins)))))
        bins[k]["samples"] += 1
        bins[k]["correct"] += results[sid]["correctness"] == CORRECT
    for b in bins:
        b["accuracy"] = round(100 * b["correct"] / b["samples"], 2) if b["samples"] else None
    return bins


def plot_calibration(bins: list[dict], path: str, *, title: str) -> str:
    """``calibration.png``: accuracy (%) against agreement, one bar per bin labelled with its sample count, and the
    diagonal (a calibrated confidence). Written atomically."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    centres = [(b["low"] + b["high"]) / 2 for b in bins]
    heights = [b["accuracy"] or 0 for b in bins]
    width = (bins[0]["high"] - bins[0]["low"]) * 0.9 if bins else 0.18
    ax.bar(centres, heights, width=width, color="#4a7bd0", alpha=0.8, label="accuracy of the bin")
    for c, h, b in zip(centres, heights, bins, strict=True):
        ax.text(c, h + 1, f"n={b['samples']}", ha="center", fontsize=8)
    ax.plot([0, 1], [0, 100], "--", color="grey", lw=1, label="calibrated")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 108)
    ax.set_xlabel("agreement (share of the K samples in the winning region)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_bytes(path, buf.getvalue())
    return path


def tts_run(
    bench,
    samples: list,
    predictions: dict[str, dict],
    greedy_results: dict[str, dict],
    greedy_metrics: dict,
    tts: TTSConfig,
) -> dict:
    """Score a test-time mode beside greedy on the same predictions: the mode's answers (:func:`tts_predictions`),
    its results and metric tables, and the ``metrics.json["tts"]`` summary (settings, cost per answer, agreement
    calibration, the samples the two answers disagree on). The profile's published comparison (greedy numbers)
    moves to the mode's metrics unchanged, marked ``"answer": "greedy"``.

    Returns:
        ``{"label", "results", "metrics", "greedy_results", "greedy_metrics", "answers", "summary"}``.
    """

    answers = tts_predictions(predictions, samples, tts)
    results = results_from_predictions(samples, answers)
    metrics = bench.score(samples, results)
    greedy_metrics = dict(greedy_metrics)
    if "published" in greedy_metrics:
        metrics["published"] = {**greedy_metrics.pop("published"), "answer": "greedy"}
    only_greedy = [
        s.sample_id
        for s in samples
        if greedy_results[s.sample_id]["correctness"] == CORRECT and results[s.sample_id]["correctness"] != CORRECT
    ]
    only_tts = [
        s.sample_id
        for s in samples
        if results[s.sample_id]["correctness"] == CORRECT and greedy_results[s.sample_id]["correctness"] != CORRECT
    ]
    bins = calibration(results, answers) if tts.uses_consensus else []
    agreements = [a for a in (validate.bounded_number(x.get("agreement")) for x in answers.values()) if a is not None]
    fallbacks: dict[str, int] = {}
    for pred in predictions.values():
        info = pred.get("tts")
        reason = info.get("fallback") if isinstance(info, dict) else None
        if isinstance(reason, str):
            key = reason.split(":")[0]
            fallbacks[key] = fallbacks.get(key, 0) + 1
    malformed = sum(1 for a in answers.values() if a.get("malformed") is not None)
    if tts.uses_zoom_tool:
        extra = {"zoom_tool": tts_tool.summary(predictions, samples, tts.mode, tts.max_zoom_calls)}
    else:
        extra = {}
    summary = {
        "mode": tts.mode,
        "label": tts.label(),
        "config": tts.to_dict(),
        "cost": cost_summary(predictions, tts),
        "agreement": {
            "mean": round(sum(agreements) / len(agreements), 4) if agreements else None,
            "calibration": bins,
        },
        "disagreements": {
            "greedy_only_correct": len(only_greedy),
            "tts_only_correct": len(only_tts),
            "greedy_only_correct_ids": only_greedy[:50],
            "tts_only_correct_ids": only_tts[:50],
        },
        "fallbacks": fallbacks,
        "malformed_for_mode": malformed,
        **extra,
    }
    return {
        "label": tts.label(),
        "results": results,
        "metrics": metrics,
        "greedy_results": greedy_results,
        "greedy_metrics": greedy_metrics,
        "answers": answers,
        "summary": summary,
    }
