"""Profiles of published checkpoints: everything that decides an evaluation score, pinned and cited.

``gui-grounding eval --profile NAME`` (and ``gui-grounding prompt --profile NAME``) takes from a :class:`Profile`:

* the **adapter** (system prompt, user prompt, image/text order, answer frame, parser: ``gui_grounding.models.adapters``);
* the **pixel budget** (:class:`groundwork.pixel_budget.PixelBudget`, each value citing the model card or the official
  evaluation script at a pinned commit);
* **decoding** (greedy; ``max_new_tokens``);
* the **benchmark options** (OSWorld-G plain vs Refined);
* the **backends** that can run the model (a 72B needs vllm with tensor parallelism or an OpenAI-compatible server;
  hf runs on one device);
* the **published numbers** (:class:`PublishedScore`), shown next to ours in ``metrics.json`` and ``results.md``,
  each flagged as within 1 point or not.

A flag given on the command line beats the profile (and is recorded as the value's source). ``gui-grounding
profiles`` lists every profile with each value's source. The profile table and the pitfalls are in
docs/EVALUATION.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from groundwork.markdown import md_table
from groundwork.pixel_budget import PixelBudget
from gui_grounding.models.adapters import ADAPTERS, get_adapter
from gui_grounding.models.adapters.internvl import INTERNVL_HARNESS_BUDGET
from gui_grounding.models.adapters.qwen2_5_vl import (
    GTA1_BUDGET,
    GUI_G2_BUDGET,
    QWEN25VL_HARNESS_BUDGET,
    UI_TARS_BUDGET,
    UI_VENUS_GROUND_BUDGET,
)
from gui_grounding.models.adapters.qwen3_vl import QWEN3_VL_BUDGET

#: how far (in accuracy points) our number may be from the published one to count as reproduced
REPRODUCED_WITHIN = 1.0


@dataclass(frozen=True)
class PublishedScore:
    """One published accuracy (percent): ``benchmark`` (a ``--benchmark`` name), ``value``, ``options`` (the benchmark
    options it was measured with, e.g. ``{"subset": "refined"}``) and ``source`` (where it is published)."""

    benchmark: str
    value: float
    source: str
    options: dict = field(default_factory=dict)
    note: str = ""

    def matches(self, benchmark: str, options: dict) -> bool:
        """True when this score was measured on ``benchmark`` with these options (unstated options: defaults)."""
        return self.benchmark == benchmark and all(options.get(k) == v for k, v in self.options.items())


@dataclass(frozen=True)
class Profile:
    """A published checkpoint's evaluation settings (module docstring); every value with a source in ``sources``.

    Attributes:
        name: ``--profile`` name, e.g. ``gta1-7b-2507``.
        model: the checkpoint's hub id.
        model_type: its ``config.model_type``.
        adapter: the adapter name (``gui_grounding.models.adapters``).
        budget: the pixel budget (values cite their sources).
        max_new_tokens: generation budget; decoding is greedy.
        backends: backends that can run it, most practical first (``hf`` only where one device holds the model).
        benchmark_options: ``{benchmark: {option: value}}`` applied to that benchmark (flags win).
        published: the published numbers.
        sources: ``{"adapter" | "max_new_tokens" | "model" | ...: source}``.
        notes: caveats shown by ``gui-grounding profiles``.
    """

    name: str
    model: str
    model_type: str
    adapter: str
    budget: PixelBudget
    max_new_tokens: int
    backends: tuple[str, ...]
    sources: dict
    benchmark_options: dict = field(default_factory=dict)
    published: tuple[PublishedScore, ...] = ()
    notes: str = ""

    def options_for(self, benchmark: str) -> dict:
        """The benchmark options this profile pins for ``benchmark`` (``{}`` when none)."""
        return dict(self.benchmark_options.get(benchmark, {}))

    def comparison(self, benchmark: str, options: dict, metrics: dict) -> list[dict]:
        """Our overall accuracy next to each published number for ``benchmark`` measured with ``options``:
        ``[{"published", "ours", "difference", "within_1_point", "source", "options"}]`` (accuracy in percent;
        difference = ours - published)."""
        ours = (metrics.get("overall") or {}).get("accuracy")
        rows = []
        for score in self.published:
            if not score.matches(benchmark, options) or ours is None:
                continue
            diff = round(float(ours) - score.value, 2)
            rows.append(
                {
                    "published": score.value,
                    "ours": ours,
                    "difference": diff,
                    "within_1_point": abs(diff) <= REPRODUCED_WITHIN,
                    "source": score.source,
                    "options": dict(score.options),
                    "note": score.note,
                }
            )
        return rows

    def describe(self) -> str:
        """Multi-line text of every value with its source (``gui-grounding profiles NAME``)."""

        adapter = get_adapter(self.adapter)
        lines = [
            f"{self.name}: {self.model} (model_type {self.model_type})",
            f"  adapter          {self.adapter} (answer frame {adapter.answer_frame})   <- "
            f"{self.sources.get('adapter', '?')}",
            f"  decoding         greedy, max_new_tokens {self.max_new_tokens}   <- "
            f"{self.sources.get('max_new_tokens', '?')}",
            f"  backends         {', '.join(self.backends)}   <- {self.sources.get('backends', '?')}",
        ]
        for bench, opts in self.benchmark_options.items():
            lines.append(f"  {bench:<16} {opts}   <- {self.sources.get('benchmark_options', '?')}")
        lines += ["  " + line for line in self.budget.describe().splitlines()]
        for s in self.published:
            opts = f" {s.options}" if s.options else ""
            lines.append(f"  published        {s.benchmark}{opts}: {s.value:.1f}   <- {s.source}")
        if self.notes:
            lines.append(f"  notes            {self.notes}")
        return "\n".join(lines)


PROFILES: dict[str, Profile] = {}


def register(profile: Profile) -> Profile:
    """Add ``profile`` to :data:`PROFILES` (its adapter must exist).

    Raises:
        ValueError: the name is taken or the adapter is unknown.
    """

    if profile.name in PROFILES:
        raise ValueError(f"profile {profile.name!r} is already registered")
    if profile.adapter not in ADAPTERS:
        raise ValueError(f"profile {profile.name!r}: unknown adapter {profile.adapter!r}")
    PROFILES[profile.name] = profile
    return profile


def get_profile(name: str) -> Profile:
    """The profile ``name``.

    Raises:
        ValueError: unknown name; the message lists the profiles.
    """
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def profile_dict(profile: Profile) -> dict:
    """JSON form of ``profile`` (``gui-grounding profiles --json``)."""
    return {
        "name": profile.name,
        "model": profile.model,
        "model_type": profile.model_type,
        "adapter": profile.adapter,
        "pixel_budget": profile.budget.to_dict(),
        "decoding": {"greedy": True, "max_new_tokens": profile.max_new_tokens},
        "backends": list(profile.backends),
        "benchmark_options": profile.benchmark_options,
        "published": [
            {"benchmark": s.benchmark, "options": s.options, "value": s.value, "source": s.source, "note": s.note}
            for s in profile.published
        ],
        "sources": dict(profile.sources),
        "notes": profile.notes,
    }


def profiles_table() -> str:
    """A Markdown table of every profile: name, model, adapter, budget, max_new_tokens, backends, published."""
    rows = []
    for p in PROFILES.values():
        b = p.budget
        budget = f"{b.min_pixels:,}..{b.max_pixels:,} px (factor {b.factor})" if b.resizes else f"{b.max_tiles} tiles"
        published = (
            "; ".join(
                f"{s.benchmark}{'/' + '/'.join(map(str, s.options.values())) if s.options else ''} {s.value:.1f}"
                for s in p.published
            )
            or "-"
        )
        rows.append([p.name, p.model, p.adapter, budget, p.max_new_tokens, ", ".join(p.backends), published])
    return md_table(
        ["profile", "model", "adapter", "pixel budget", "max_new_tokens", "backends", "published"], rows, left=7
    )


# ---------------------------------------------------------------------------------------------------------------------
# the profiles (sources: public repositories at the commits named; model cards by URL)


_GTA1_README = "Yan98/GTA1 README.md (81f0c4c)"
_GTA1_SOURCES = {
    "adapter": f"{_GTA1_README}:123-138 (SYSTEM_PROMPT with the resized height/width; extract_coordinates: first "
    "(x,y), times original/resized) and :171-182 (system message, then the image and the instruction)",
    "max_new_tokens": f"{_GTA1_README}:141 (max_new_tokens = 32) and :191 (do_sample=False)",
    "backends": "7B: one GPU (hf, vllm); 32B/72B: tensor parallelism (vllm, or an OpenAI-compatible server)",
    "benchmark_options": "the model card states OSWorld-G on the Refined set (plain: 55.1, README.md:21)",
}
_ONE_GPU = ("hf", "vllm", "openai")
_TENSOR_PARALLEL = ("vllm", "openai")


def _gta1(name: str, model: str, backends: tuple, published: tuple, notes: str = "") -> Profile:
    return Profile(
        name,
        model,
        "qwen2_5_vl",
        "gta1",
        GTA1_BUDGET,
        32,
        backends,
        dict(_GTA1_SOURCES),
        {"osworld-g": {"subset": "refined"}},
        published,
        notes,
    )


_GTA1_7B_CARD = "https://huggingface.co/Salesforce/GTA1-7B-2507 (model card)"
_GTA1_PAPER = "GTA1 paper, arXiv:2507.05791, grounding results table (not re-read for this profile: verify)"


def _gta1_paper(screenspot_pro: float, screenspot_v2: float, osworld_g_refined: float) -> tuple:
    """The three scores of a GTA1 checkpoint in the paper's grounding table (OSWorld-G on the Refined set)."""
    return (
        PublishedScore("screenspot-pro", screenspot_pro, _GTA1_PAPER),
        PublishedScore("screenspot-v2", screenspot_v2, _GTA1_PAPER),
        PublishedScore("osworld-g", osworld_g_refined, _GTA1_PAPER, {"subset": "refined"}),
    )


register(
    _gta1(
        "gta1-7b-2507",
        "HelloKKMe/GTA1-7B-2507",
        _ONE_GPU,
        (
            PublishedScore("screenspot-pro", 50.1, f"{_GTA1_README}:21"),
            PublishedScore("screenspot-v2", 92.4, f"{_GTA1_README}:21"),
            PublishedScore("osworld-g", 55.1, f"{_GTA1_README}:21", {"subset": "plain"}),
            PublishedScore("osworld-g", 67.7, _GTA1_7B_CARD, {"subset": "refined"}),
        ),
        notes="also published as Salesforce/GTA1-7B-2507 (README.md:11); the official parser int()s the (x,y) pair, so "
        "a decimal answer scores (0,0) there and its decimal point here",
    )
)
register(
    _gta1(
        "gta1-32b-2507",
        "HelloKKMe/GTA1-32B",
        _TENSOR_PARALLEL,
        _gta1_paper(53.6, 93.2, 61.9),
        notes="the 2507 release on Qwen2.5-VL-32B (the Oct-2025 Salesforce/GTA1-32B is another model, on OpenCUA-32B)",
    )
)
register(
    _gta1(
        "gta1-72b-2507",
        "HelloKKMe/GTA1-72B",
        _TENSOR_PARALLEL,
        _gta1_paper(58.4, 94.8, 66.7),
        notes="the 2507 release on Qwen2.5-VL-72B",
    )
)

_UITARS = "bytedance/UI-TARS (582f3a7)"
register(
    Profile(
        "ui-tars-1.5-7b",
        "ByteDance-Seed/UI-TARS-1.5-7B",
        "qwen2_5_vl",
        "ui-tars-1.5",
        UI_TARS_BUDGET,
        128,
        _ONE_GPU,
        {
            "adapter": f"{_UITARS} README_v1.md:320 (grounding prompt; UI-TARS#157: 1.5 keeps it) and README_coordinates.md "
            "(absolute coordinates in the smart_resized frame)",
            "max_new_tokens": "answers are one action of < 40 tokens; ZJU-REAL/ClawGUI clawgui-eval/scripts/infer/"
            "transformers/uitars_run_transformers.sh (d990d3e) pins greedy decoding",
            "backends": "7B: one GPU",
        },
        {},
        (PublishedScore("screenspot-pro", 49.6, f"{_UITARS} README.md:169"),),
        "codes/ui_tars/prompt.py:59 (GROUNDING_DOUBAO) is a second, agent-style grounding prompt; ClawGUI reproduces 42.1 "
        "on ScreenSpot-Pro against the published 49.6 (clawgui-eval/README.md:465)",
    )
)

_QWEN_HARNESS = "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/qwen2_5vl.py (bd8bbbb)"
for _size, _published, _backends in (
    (
        "7B",
        (PublishedScore("screenspot-v2", 88.8, "ZJU-REAL/GUI-G2 README.md:302 (5c5c365), a third-party measurement"),),
        _ONE_GPU,
    ),
    ("32B", (), _TENSOR_PARALLEL),
    ("72B", (), _TENSOR_PARALLEL),
):
    register(
        Profile(
            f"qwen2.5-vl-{_size.lower()}",
            f"Qwen/Qwen2.5-VL-{_size}-Instruct",
            "qwen2_5_vl",
            "qwen2.5-vl",
            QWEN25VL_HARNESS_BUDGET,
            128,
            _backends,
            {
                "adapter": f"{_QWEN_HARNESS}:20-67 (computer_use system prompt, resized resolution), :160-162 (forced "
                "'<tool_call>...\"coordinate\": [' assistant prefix), :196-208 (parse)",
                "max_new_tokens": f"{_QWEN_HARNESS}:124-129 greedy (do_sample=False); the harness bounds max_length=2048, "
                "an answer needs < 20 tokens",
                "backends": "7B: one GPU; 32B/72B: tensor parallelism",
            },
            {},
            _published,
            "Qwen publishes no grounding evaluation script; this is the ScreenSpot-Pro harness's request (Qwen's "
            "computer_use tool). Without a published number of the authors for this exact request, no row is "
            "'within 1 point' by construction",
        )
    )

register(
    Profile(
        "qwen3-vl-8b",
        "Qwen/Qwen3-VL-8B-Instruct",
        "qwen3_vl",
        "qwen3-vl",
        QWEN3_VL_BUDGET,
        128,
        _ONE_GPU,
        {
            "adapter": "QwenLM/Qwen3-VL cookbooks/spatial_understanding.ipynb (point_2d JSON on the 0-1000 grid)",
            "max_new_tokens": "greedy; answers are one JSON point",
            "backends": "8B: one GPU",
        },
        {},
        (
            PublishedScore(
                "screenspot-pro", 54.6, "ZJU-REAL/ClawGUI clawgui-eval/README.md:462 (d990d3e), 'official' column"
            ),
        ),
        "pixel budget as ClawGUI pins it (clawgui-eval/scripts/infer/transformers/qwen3vl_run_transformers.sh: "
        "MIN_PIXELS=65536, MAX_PIXELS=16777216, the processor default). Qwen's own GUI numbers use a computer_use "
        "tool-call system prompt that Qwen does not publish as a script (ClawGUI injects it from its data files); this "
        "profile uses the cookbook's pointing request, so expect a gap",
    )
)

_VENUS = "inclusionAI/UI-Venus"
register(
    Profile(
        "ui-venus-ground-7b",
        "inclusionAI/UI-Venus-Ground-7B",
        "qwen2_5_vl",
        "ui-venus-ground",
        UI_VENUS_GROUND_BUDGET,
        128,
        _ONE_GPU,
        {
            "adapter": f"{_VENUS} models/grounding/ui_venus_ground_7b.py:39-43 (fc7670d): the outline-box request, "
            "image first; the box divided by image_grid_thw*14 (the resized frame), its centre scored",
            "max_new_tokens": f"{_VENUS} models/grounding/ui_venus_ground_7b.py (fc7670d): generate(max_new_tokens=128), "
            "do_sample=False",
            "backends": "7B: one GPU",
        },
        {},
        (
            PublishedScore("screenspot-pro", 50.8, f"{_VENUS} README.md:206 (c3a1442)"),
            PublishedScore(
                "screenspot-v2", 94.1, "ZJU-REAL/ClawGUI clawgui-eval/README.md:466 (d990d3e), 'official' column"
            ),
            PublishedScore(
                "osworld-g",
                54.6,
                f"{_VENUS} README.md:206 (c3a1442)",
                note="the README does not say plain or Refined; ClawGUI lists 58.8 as official",
            ),
        ),
        "UI-Venus-1.0 has no refusal in its prompt; a [-1,-1] answer (UI-Venus-1.5's infeasible marker) is still read "
        "as a refusal",
    )
)

register(
    Profile(
        "gui-g2-7b",
        "inclusionAI/GUI-G2-7B",
        "qwen2_5_vl",
        "gui-g2",
        GUI_G2_BUDGET,
        128,
        _ONE_GPU,
        {
            "adapter": "ZJU-REAL/GUI-G2 README.md:174-223 (5c5c365): the outline-box request, image first, the box divided by "
            "image_grid_thw*14 (the resized frame), its centre",
            "max_new_tokens": "ZJU-REAL/GUI-G2 README.md:201 (max_new_tokens=128), :167-171 (do_sample False)",
            "backends": "7B: one GPU",
        },
        {},
        (
            PublishedScore("screenspot-v2", 93.3, "ZJU-REAL/GUI-G2 README.md:315 (5c5c365)"),
            PublishedScore(
                "screenspot-pro",
                47.5,
                "ZJU-REAL/ClawGUI clawgui-eval/README.md:456 (d990d3e), 'official' column (the GUI-G2 paper)",
            ),
        ),
    )
)

register(
    Profile(
        "internvl3-8b",
        "OpenGVLab/InternVL3-8B-hf",
        "internvl",
        "internvl-gui",
        INTERNVL_HARNESS_BUDGET,
        256,
        _ONE_GPU,
        {
            "adapter": "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:121-141 (bd8bbbb): the UI-element box "
            "request, 12 tiles, first [[x,y]] else last [[x1,y1,x2,y2]] on the 0-1000 grid",
            "max_new_tokens": "likaixin2000/ScreenSpot-Pro-GUI-Grounding models/internvl.py:103-107 (max_new_tokens=256, "
            "do_sample=False)",
            "backends": "8B: one GPU (the transformers-native -hf checkpoint)",
        },
        {},
        (),
        "no published grounding number of the authors for this request: the harness's own InternVL row is InternVL2; "
        "InternVL3's chat template decides the system message (InternVL's chat() adds its own)",
    )
)
