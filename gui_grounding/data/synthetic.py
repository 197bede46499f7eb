"""A seeded synthetic GUI grounding set that a tiny model can learn on CPU (``gui-grounding make-synthetic``).

Each screenshot is a "screen" cut into a ``cols x rows`` grid of cells, each cell a grey panel of its own shade (see
``SyntheticConfig.background``); some cells hold a button: a filled rectangle in one of a few distinct colours with a
dark border and the colour's name written on it (default: one button per screen). Every
button on a screen has a different colour. The instruction names one button by its colour ("Click the red button");
the target box is that button's rectangle. A model that ignores the image can do no better than guessing a cell
(``1 / buttons_per_image`` if it only guesses among cells that hold buttons), so accuracy above that line means it
reads the screenshot.

Why this shape: the real task (a point inside the element named by the instruction) at a size where the image costs
few tokens (112x112 pixels = 4x4 merged Qwen2.5-VL image tokens; images are already multiples of 28 so smart_resize
leaves them unchanged: original pixels == resized pixels), with colours that survive the tiny model's random vision
tower. Buttons are jittered in size and position inside their cell, so a point must land inside the drawn rectangle,
not just in the right cell.

Output (canonical format, ``gui_grounding.data.schema``; boxes in original pixels)::

    OUT/images/00000.png ...
    OUT/train.jsonl  OUT/test.jsonl   one sample per line: instruction, image_path, target_bbox, image size,
                                      source "synthetic", platform "desktop", ui_type "text", plus
                                      extra keys ``colour``, ``cell`` [col, row], ``buttons`` (all colours on screen)
    OUT/synthetic_config.json         the generator arguments and counts (everything needed to regenerate it)

Same arguments and seed -> byte-identical files. Train and test screens are disjoint.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field

from groundwork import outputs
from groundwork.argtypes import SEED, add_number_flag, flag_values, integer, number

# Distinct, saturated colours (name -> RGB) that differ strongly per channel.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 40),
    "blue": (30, 60, 220),
    "yellow": (240, 210, 20),
    "purple": (140, 40, 170),
    "orange": (245, 130, 20),
    "cyan": (20, 200, 210),
    "black": (20, 20, 20),
}
BACKGROUND = (235, 235, 235)
BACKGROUNDS = ("gradient", "panels", "plain", "tiles")
INSTRUCTION_TEMPLATES = ("Click the {colour} button",)
#: ``SyntheticConfig.no_target_kind`` values
NO_TARGET_KINDS = ("absent_colour", "empty_screen")


@dataclass
class SyntheticConfig:
    """Generator settings. Sizes are pixels of the written PNGs (= the model's resized frame when they are multiples
    of 28 and within the processor's pixel budget).

    Attributes:
        num_train, num_test: number of screens per split; each screen yields ``samples_per_image`` samples.
        width, height: screenshot size in pixels.
        cols, rows: grid of cells; each button lives inside one cell.
        buttons_per_image: buttons drawn per screen (1..cols*rows), each a different colour.
        colours: colour names (keys of :data:`COLOURS`) to draw from; at least ``buttons_per_image``.
        samples_per_image: instructions per screen (distinct target buttons, at most ``buttons_per_image``).
        min_fill, max_fill: button side as a fraction of the cell side (uniform in this range).
        background: ``panels`` (default): one grey panel per cell, lighter to darker in row-major order;
            ``tiles``: those panels, each with the same gradient inside (red falls by 40 from the cell's left edge to
            its right, blue from its top to its bottom), so a crop of one cell still shows where in it a point is
            (the zoom study, ``gui-grounding toy zoom``);
            ``gradient``: a light wallpaper whose red falls from left to right and blue from top
            to bottom (``R = 250 - 90 x / W``, ``G = 235``, ``B = 250 - 90 y / H``); ``plain``: one colour. Why: the tiny model's vision tower
            is random and its only position signals (rotary embeddings) carry almost no absolute position at this
            size, so on a plain screen it cannot learn *where* a button is in CPU minutes; the wallpaper around a
            button is a position cue it can read linearly. Real screenshots need no such cue for real models.
        name_cell: the instruction also names the button's cell, "Click the red button in row 2 column 3" (1-based):
            a coarse cue that survives any downscale (the zoom study: it says where to zoom, not where to click).
        seed: everything is drawn from ``random.Random(seed)``.
        no_target_share: the share of samples (0..1) whose instruction names a colour that is on no button of the
            screen (training to refuse, ``gui-grounding toy refusal``): the record has ``"no_target": true`` and
            ``target_bbox: []`` (``gui_grounding.data.schema.read_no_target``). Which samples, and the absent colour,
            are drawn from their own ``random.Random(f"{seed}:no_target")``, so at 0 (the default) the files are
            byte-identical to a set made before this setting existed; needs a colour left over
            (``len(colours) > buttons_per_image``) for ``no_target_kind`` ``absent_colour``.
        no_target_kind: how a no-target sample lacks its element. ``absent_colour`` (the default): the screen keeps
            its buttons and the instruction names a colour on none of them (the model must match the colour word to
            the pixels); ``empty_screen``: the whole screen is no-target, drawn with its grey panels and no button,
            and each of its instructions names the colour the screen would have shown (the element is simply not
            on the screen, as in OSWorld-G's infeasible items). With ``empty_screen`` the share is a share of
            screens, drawn from the same ``no_target`` stream.
    """

    num_train: int = 1000
    num_test: int = 200
    width: int = 112
    height: int = 112
    cols: int = 2
    rows: int = 2
    buttons_per_image: int = 1
    colours: list[str] = field(default_factory=lambda: ["red", "green", "blue", "yellow"])
    samples_per_image: int = 1
    min_fill: float = 0.45
    max_fill: float = 0.65
    background: str = "panels"
    name_cell: bool = False
    seed: int = 0
    no_target_share: float = 0.0
    no_target_kind: str = "absent_colour"

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first inconsistent setting."""
        if self.num_train < 1 or self.num_test < 0:
            raise ValueError("num_train must be >= 1 and num_test >= 0")
        if not 1 <= self.buttons_per_image <= self.cols * self.rows:
            raise ValueError(
                f"buttons_per_image={self.buttons_per_image} must be in 1..cols*rows={self.cols * self.rows}"
            )
        unknown = [c for c in self.colours if c not in COLOURS]
        if unknown:
            raise ValueError(f"unknown colours {unknown}; known: {', '.join(COLOURS)}")
        if len(set(self.colours)) < self.buttons_per_image:
            raise ValueError(f"{len(set(self.colours))} distinct colours cannot fill {self.buttons_per_image} buttons")
        if not 1 <= self.samples_per_image <= self.buttons_per_image:
            raise ValueError("samples_per_image must be in 1..buttons_per_image")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"unknown background {self.background!r}; expected one of {', '.join(BACKGROUNDS)}")
        if not 0.1 <= self.min_fill <= self.max_fill <= 1.0:
            raise ValueError("need 0.1 <= min_fill <= max_fill <= 1.0")
        if self.width // self.cols < 8 or self.height // self.rows < 8:
            raise ValueError("cells must be at least 8x8 pixels")
        if not 0.0 <= self.no_target_share <= 1.0:
            raise ValueError(f"no_target_share must be in [0, 1], got {self.no_target_share}")
        if self.no_target_kind not in NO_TARGET_KINDS:
            raise ValueError(f"no_target_kind must be one of {', '.join(NO_TARGET_KINDS)}, got {self.no_target_kind!r}")
        absent = self.no_target_kind == "absent_colour"
        if self.no_target_share > 0 and absent and len(set(self.colours)) <= self.buttons_per_image:
            raise ValueError("no_target_share > 0 needs a colour on no button (more colours than buttons_per_image)")


def _draw_screen(cfg: SyntheticConfig, rng: random.Random, show_buttons: bool = True):
    """One screen: returns ``(PIL image, [(colour, cell, box), ...])`` with boxes in pixels, inclusive edges.
    ``show_buttons`` False: the buttons are drawn from ``rng`` as usual (the stream stays the same) but not painted
    (``no_target_kind`` ``empty_screen``)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (cfg.width, cfg.height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    cell_w, cell_h = cfg.width // cfg.cols, cfg.height // cfg.rows
    cells = [(c, r) for r in range(cfg.rows) for c in range(cfg.cols)]
    if cfg.background == "gradient":
        import numpy as np

        xs = np.round(250 - 90 * np.arange(cfg.width) / cfg.width).astype(np.uint8)
        ys = np.round(250 - 90 * np.arange(cfg.height) / cfg.height).astype(np.uint8)
        arr = np.empty((cfg.height, cfg.width, 3), dtype=np.uint8)
        arr[..., 0], arr[..., 1], arr[..., 2] = xs[None, :], 235, ys[:, None]
        img = Image.fromarray(arr, "RGB")
        draw = ImageDraw.Draw(img)
    elif cfg.background == "tiles":  # panels, each with the same gradient inside (a position cue inside any cell)
        import numpy as np

        arr = np.empty((cfg.height, cfg.width, 3), dtype=np.float32)
        for i, (c, r) in enumerate(cells):
            shade = 245 - 110 * i / max(1, len(cells) - 1)
            fx = np.arange(cell_w, dtype=np.float32)[None, :] / cell_w
            fy = np.arange(cell_h, dtype=np.float32)[:, None] / cell_h
            tile = arr[r * cell_h : (r + 1) * cell_h, c * cell_w : (c + 1) * cell_w]
            tile[..., 0] = shade - 40 * fx
            tile[..., 1] = shade
            tile[..., 2] = shade - 40 * fy
        img = Image.fromarray(np.clip(np.round(arr), 0, 255).astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(img)
    elif cfg.background == "panels":
        for i, (c, r) in enumerate(cells):
            shade = round(245 - 110 * i / max(1, len(cells) - 1))
            draw.rectangle((c * cell_w, r * cell_h, (c + 1) * cell_w - 1, (r + 1) * cell_h - 1), fill=(shade,) * 3)
    chosen_cells = rng.sample(cells, cfg.buttons_per_image)
    chosen_colours = rng.sample(sorted(set(cfg.colours), key=cfg.colours.index), cfg.buttons_per_image)
    buttons = []
    for (col, row), colour in zip(chosen_cells, chosen_colours, strict=True):
        bw = max(4, round(cell_w * rng.uniform(cfg.min_fill, cfg.max_fill)))
        bh = max(4, round(cell_h * rng.uniform(cfg.min_fill, cfg.max_fill)))
        x0 = col * cell_w + rng.randint(0, cell_w - bw)
        y0 = row * cell_h + rng.randint(0, cell_h - bh)
        box = (x0, y0, x0 + bw - 1, y0 + bh - 1)
        if show_buttons:
            draw.rectangle(box, fill=COLOURS[colour], outline=(60, 60, 60))
            text_fill = (255, 255, 255) if sum(COLOURS[colour]) < 400 else (0, 0, 0)
            draw.text((x0 + 2, y0 + bh // 2 - 5), colour[: max(1, (bw - 4) // 6)], fill=text_fill)
        buttons.append((colour, [col, row], box))
    return img, buttons


def make_synthetic(out_dir: str, cfg: SyntheticConfig | None = None) -> dict:
    """Write the synthetic set to ``out_dir`` (see the module docstring for the layout).

    Returns:
        ``{"train": n_train_samples, "test": n_test_samples, "images": n_images, "out_dir": out_dir}``.

    Raises:
        ValueError: inconsistent settings (:meth:`SyntheticConfig.validate`).
    """

    cfg = cfg or SyntheticConfig()
    cfg.validate()
    outputs.check_outputs(folders=[out_dir])
    with outputs.OutputLock(out_dir, folder=True):
        return _write_synthetic(out_dir, cfg)


def _write_synthetic(out_dir: str, cfg: SyntheticConfig) -> dict:
    """:func:`make_synthetic` under its lock: images and splits written atomically, ``synthetic_config.json`` last
    (an earlier one is removed first, so it always describes the files beside it)."""

    config_path = os.path.join(out_dir, "synthetic_config.json")
    if os.path.lexists(config_path):
        os.remove(config_path)
    rng = random.Random(cfg.seed)
    absent_rng = random.Random(f"{cfg.seed}:no_target")  # its own stream: share 0 leaves the files as they were
    os.makedirs(os.path.join(out_dir, "images"), exist_ok=True)
    counts, index = {}, 0
    for split, n_screens in (("train", cfg.num_train), ("test", cfg.num_test)):
        lines = []
        for _ in range(n_screens):
            empty = (
                cfg.no_target_kind == "empty_screen"
                and cfg.no_target_share > 0
                and absent_rng.random() < cfg.no_target_share
            )
            img, buttons = _draw_screen(cfg, rng, show_buttons=not empty)
            rel = f"images/{index:05d}.png"
            with outputs.atomic_writer(os.path.join(out_dir, rel), "wb") as f:
                img.save(f, "PNG")
            for k, (colour, cell, box) in enumerate(rng.sample(buttons, cfg.samples_per_image)):
                template = rng.choice(INSTRUCTION_TEMPLATES)
                if cfg.no_target_kind == "empty_screen":
                    no_target = empty  # the named colour was never painted: no button on the screen
                else:
                    no_target = cfg.no_target_share > 0 and absent_rng.random() < cfg.no_target_share
                if no_target and not empty:  # name a colour on no button of this screen
                    colour = absent_rng.choice([c for c in cfg.colours if c not in {b[0] for b in buttons}])
                instruction = template.format(colour=colour)
                if cfg.name_cell:
                    instruction += f" in row {cell[1] + 1} column {cell[0] + 1}"
                target = {"x_min": box[0], "y_min": box[1], "x_max": box[2], "y_max": box[3]}
                lines.append(
                    {
                        "sample_id": f"synthetic:{index:05d}:{k}",
                        "instruction": instruction,
                        "image_path": rel,
                        **({"target_bbox": [], "no_target": True} if no_target else {"target_bbox": target}),
                        "image_width": cfg.width,
                        "image_height": cfg.height,
                        "source": "synthetic",
                        "platform": "desktop",
                        "ui_type": "text",
                        "colour": colour,
                        "cell": None if no_target else cell,
                        "buttons": [] if empty else [b[0] for b in buttons],
                    }
                )
            index += 1
        outputs.write_lines(os.path.join(out_dir, f"{split}.jsonl"), (json.dumps(line) for line in lines))
        counts[split] = len(lines)
    with outputs.atomic_writer(config_path) as f:
        json.dump({"config": asdict(cfg), "counts": counts, "images": index}, f, indent=2)
    return {**counts, "images": index, "out_dir": out_dir}


def register_cli(sub) -> None:
    """Add the ``make-synthetic`` subcommand to the ``gui-grounding`` parser."""
    d = SyntheticConfig()
    p = sub.add_parser(
        "make-synthetic",
        help="write the seeded synthetic toy set (coloured buttons) with splits",
        description=__doc__.split("\n\n")[0] + " Canonical JSONL train/test splits + PNGs; same "
        "arguments -> identical files.",
    )
    p.add_argument("--out", required=True, help="output directory (images/, train.jsonl, test.jsonl)")

    screens, side, grid, count = (
        integer(min=1, max=1_000_000),
        integer(min=8, max=8192),
        integer(min=1, max=256),
        (integer(min=1, max=64)),
    )
    test_screens, fill = integer(min=0, max=1_000_000), number(min=0.1, max=1.0)
    add_number_flag(p, "--num-train", screens, d.num_train, "training screens")
    add_number_flag(p, "--num-test", test_screens, d.num_test, "test screens (disjoint from training)")
    add_number_flag(p, "--width", side, d.width, "screen width in pixels (multiple of 28: no resize)")
    add_number_flag(p, "--height", side, d.height, "screen height in pixels")
    add_number_flag(p, "--cols", grid, d.cols, "grid columns (one button per cell at most)")
    add_number_flag(p, "--rows", grid, d.rows, "grid rows")
    add_number_flag(
        p,
        "--buttons-per-image",
        count,
        d.buttons_per_image,
        "buttons per screen, each a different colour (the instruction names one)",
    )
    p.add_argument("--colours", default=",".join(d.colours), help=f"comma-separated colours from: {', '.join(COLOURS)}")
    add_number_flag(p, "--samples-per-image", count, d.samples_per_image, "instructions per screen")
    add_number_flag(p, "--min-fill", fill, d.min_fill, "smallest button side / cell side")
    add_number_flag(p, "--max-fill", fill, d.max_fill, "largest button side / cell side")
    p.add_argument(
        "--background",
        choices=BACKGROUNDS,
        default=d.background,
        help="gradient wallpaper (position cue a tiny model can read), grey panels per cell, or plain",
    )
    add_number_flag(p, "--seed", SEED, d.seed, "random seed")
    add_number_flag(
        p,
        "--no-target-share",
        number(min=0.0, max=1.0),
        d.no_target_share,
        "share of samples whose instruction names a colour on no button (no_target: true; training to refuse)",
    )
    p.add_argument(
        "--no-target-kind",
        choices=NO_TARGET_KINDS,
        default=d.no_target_kind,
        help="absent_colour: the screen keeps its buttons and the instruction names a colour on none of them; "
        "empty_screen: a share of screens shows no button at all (every instruction on it is no-target)",
    )
    p.add_argument(
        "--name-cell",
        action="store_true",
        help="the instruction also names the button's cell ('... in row 2 column 3'; the zoom study's coarse cue)",
    )

    def run(args) -> None:
        sizes = ("num_train", "num_test", "width", "height", "cols", "rows", "buttons_per_image", "samples_per_image")
        cfg = SyntheticConfig(
            **flag_values(args, *sizes, "min_fill", "max_fill", "background", "seed", "no_target_share"),
            no_target_kind=args.no_target_kind,
            colours=args.colours.split(","),
            name_cell=args.name_cell,
        )
        out = make_synthetic(args.out, cfg)
        print(f"wrote {out['train']} train / {out['test']} test samples on {out['images']} screens to {args.out}")

    p.set_defaults(func=run)
