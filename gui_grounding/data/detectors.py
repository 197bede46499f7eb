"""UI element detectors for detector-IoU cleaning, behind one interface.

GTA1 cleans its training data by comparing each annotated box with the elements OmniParser detects on the screenshot
and dropping samples whose best IoU is under 0.1 (Yan98/GTA1 ``preprocessing/filter.py:33,94`` at 81f0c4c). A detector
here is anything with

    detector.detect(image_path) -> list[dict]

where each detection is ``{"bbox": [x_min, y_min, x_max, y_max], "type": "text" | "icon" | "element",
"score": float | None, "source": <detector name>}`` with ``bbox`` in **original-image pixels** (the frame of the
screenshot file, the frame canonical samples are stored in).

Backends (``DETECTORS``; combine with ``+``, e.g. ``build_detector("ocr+classic")``):

* ``ocr`` (:class:`OCRDetector`): PP-OCRv4 text detection run with onnxruntime through the ``rapidocr-onnxruntime``
  package (models ship inside the wheel; offline). Text lines, plus the words of each line (see the class docstring).
* ``classic`` (:class:`ClassicDetector`): weights-free OpenCV proposals (edge components at three dilation scales,
  rectangular outlines, colour-uniform regions).
* ``omniparser`` (:class:`OmniParserDetector`): OmniParser's YOLO icon detector (ultralytics, user-supplied weights)
  plus ``ocr``, merged as OmniParser merges them (:func:`merge_ocr_and_icons`).
* ``a+b``: :class:`UnionDetector`, the concatenation of its components' detections (each keeps its ``source``).

Heavy dependencies (``rapidocr_onnxruntime``, ``cv2``, ``ultralytics``) are imported only when a detector loads, with
an error naming the extra to install (``pip install -e .[clean]``, ``pip install -e .[omniparser]``).
"""

from __future__ import annotations

import os
from typing import Any

from groundwork.validate import open_image
from gui_grounding.models.frames import Box, box_iou

CLEAN_EXTRA_HINT = "pip install -e .[clean]  (rapidocr-onnxruntime, opencv-python-headless)"
OMNIPARSER_HINT = (
    "the omniparser detector needs ultralytics and OmniParser's icon detector weights: "
    "pip install ultralytics; pass --omniparser-weights .../icon_detect/model.pt (extra: pip install -e .[omniparser])"
)


def _import_cv2():
    try:
        import cv2
    except ImportError as err:  # pragma: no cover - the clean extra is installed in the test environment
        raise ImportError(f"this detector needs OpenCV: {CLEAN_EXTRA_HINT}") from err
    return cv2


def read_image_bgr(image_path: str):
    """The image as a ``(H, W, 3)`` uint8 BGR numpy array (original pixels; alpha dropped, palettes expanded).

    Decoded with PIL (the project's image reader) so every format the data loader accepts works here too.

    Raises:
        FileNotFoundError: the file does not exist.
        OSError: PIL cannot decode it.
    """
    import numpy as np

    if not os.path.isfile(image_path):
        raise FileNotFoundError(f"image not found: {image_path}")

    rgb = np.asarray(open_image(image_path))  # displayed frame (EXIF applied), as the annotated boxes are
    return np.ascontiguousarray(rgb[:, :, ::-1])


def _clip_box(box: Box, width: int, height: int) -> list[float]:
    x0, y0, x1, y1 = box
    return [min(max(x0, 0.0), width), min(max(y0, 0.0), height), min(max(x1, 0.0), width), min(max(y1, 0.0), height)]


def _detection(box, type_: str, score: float | None, source: str) -> dict:
    return {
        "bbox": [round(float(v), 2) for v in box],
        "type": type_,
        "score": None if score is None else round(float(score), 4),
        "source": source,
    }


def quad_to_box(quad) -> Box:
    """Axis-aligned ``(x_min, y_min, x_max, y_max)`` enclosing a quadrilateral ``[[x, y], ...]`` (same pixel frame).

    RapidOCR returns each text line as four corner points (clockwise from top-left); the smallest upright box that
    contains all four corners is the one compared with annotated boxes.
    """
    xs = [float(p[0]) for p in quad]
    ys = [float(p[1]) for p in quad]
    return min(xs), min(ys), max(xs), max(ys)


class Detector:
    """Interface: ``detect(image_path) -> list of detections`` (module docstring), plus a name and a config.

    ``config()`` returns the parameters that change the output; the detection cache stores it with each line and
    ignores cached lines made with another configuration. ``load()`` imports the backend and loads its models (called
    once before the first image, so a missing dependency or weights file fails at once with a clear message).
    """

    name = "detector"

    def config(self) -> dict[str, Any]:
        """Parameters that determine this detector's output (JSON-serialisable)."""
        return {}

    def load(self) -> None:
        """Import the backend and load models; idempotent."""

    def detect(self, image_path: str) -> list[dict]:
        """Detections on one screenshot, boxes in original-image pixels ``[x_min, y_min, x_max, y_max]``."""
        raise NotImplementedError

    @property
    def components(self) -> list[Detector]:
        """The leaf detectors this one is made of (itself for a leaf); the cache keeps one file per component."""
        return [self]


# --------------------------------------------------------------------------------------------------------------------
# ocr


class OCRDetector(Detector):
    """Text boxes from PP-OCRv4 (RapidOCR on onnxruntime), as text lines plus the words of each line.

    Source of the rule: GTA1's OmniParser run uses PaddleOCR text-line boxes (Yan98/GTA1 ``preprocessing/run.py:37-60``
    at 81f0c4c: ``paddle=True``, ``text_threshold`` 0.9, ``xyxy`` boxes). RapidOCR runs the same PP-OCR detection
    model family (``ch_PP-OCRv4_det``) on onnxruntime with its packaged defaults (DB thresholds 0.3/0.5, unclip 1.6,
    min side scaled to 736 px, max side 2000 px). Each quadrilateral becomes the axis-aligned box around its corners
    (:func:`quad_to_box`), clipped to the image.

    Words: an OCR line is one box per line of text, so a short link inside a paragraph has IoU below 0.1 with its line
    (on ``data/web_sample`` 23% of the true boxes would be dropped by lines alone). Each line is therefore also split at
    blank column runs: a column is *ink* when any pixel in it differs from the line's median colour by more than
    ``ink_threshold`` (0-255, max over B, G, R); a run of at least ``max(2, round(word_gap * line_height))`` blank
    columns separates two words (letter gaps of screen fonts are 0-2 px, word spaces about a quarter of the line
    height). A line that does not split adds no word box. Measured on the committed web sample: with words no true box
    has best IoU under 0.1 (5th percentile 0.47).

    Args:
        min_text_score: ``None`` (default): detection only, ``score`` is ``None``, 0.25-0.6 s per 1280x720
            screenshot on 2 CPU cores. A number: also run text recognition and keep lines whose recognition confidence
            is at least this (GTA1/OmniParser: 0.9); ``score`` is that confidence; about 3.9 s per screenshot. On
            ``data/web_sample`` 0.9 drops 6% of the true boxes (short or symbol text such as the "_ | A | B" letter
            index gets low confidence, and its whole line goes), detection only drops none.
        word_gap: minimum blank gap between words as a fraction of the line height (default 0.2).
        ink_threshold: colour difference (0-255) that makes a pixel ink (default 48).
        split_words: add word boxes (default True).
    """

    name = "ocr"

    def __init__(
        self,
        min_text_score: float | None = None,
        *,
        word_gap: float = 0.2,
        ink_threshold: int = 48,
        split_words: bool = True,
        source: str | None = None,
    ):
        self.min_text_score = min_text_score
        self.word_gap = float(word_gap)
        self.ink_threshold = int(ink_threshold)
        self.split_words = bool(split_words)
        self.source = source or self.name
        self._engine = None

    def config(self) -> dict[str, Any]:
        return {
            "min_text_score": self.min_text_score,
            "word_gap": self.word_gap,
            "ink_threshold": self.ink_threshold,
            "split_words": self.split_words,
            "models": "rapidocr-onnxruntime PP-OCRv4 det",
        }

    def load(self) -> None:
        if self._engine is not None:
            return
        _import_cv2()
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as err:
            raise ImportError(f"the ocr detector needs rapidocr-onnxruntime: {CLEAN_EXTRA_HINT}") from err
        kwargs = {} if self.min_text_score is None else {"text_score": float(self.min_text_score)}
        self._engine = RapidOCR(**kwargs)

    def text_lines(self, image) -> list[tuple[Box, float | None]]:
        """``[(box, score)]`` text lines of a BGR image array; boxes in its pixels, score ``None`` without recognition."""
        self.load()
        height, width = image.shape[:2]
        recognise = self.min_text_score is not None
        result, _ = self._engine(image, use_det=True, use_cls=False, use_rec=recognise)
        lines = []
        for item in result or []:
            quad, score = (item[0], float(item[2])) if recognise else (item, None)
            box = _clip_box(quad_to_box(quad), width, height)
            if box[2] > box[0] and box[3] > box[1]:
                lines.append((tuple(box), score))
        return lines

    def split_line(self, image, box: Box) -> list[Box]:
        """Word boxes of one text line ``box`` (pixels of ``image``, a BGR array); ``[]`` when it is one word."""
        import numpy as np

        x0, y0 = max(int(np.floor(box[0])), 0), max(int(np.floor(box[1])), 0)
        x1, y1 = min(int(np.ceil(box[2])), image.shape[1]), min(int(np.ceil(box[3])), image.shape[0])
        crop = image[y0:y1, x0:x1].astype(np.int16)
        if crop.size == 0:
            return []
        background = np.median(crop.reshape(-1, 3), axis=0)
        ink = (np.abs(crop - background).max(axis=2) > self.ink_threshold).any(axis=0)
        min_gap = max(2, round(self.word_gap * (y1 - y0)))
        words, start, last, blank = [], None, 0, 0
        for col, is_ink in enumerate(ink):
            if is_ink:
                if start is None:
                    start = col
                last, blank = col, 0
            elif start is not None:
                blank += 1
                if blank >= min_gap:
                    words.append((x0 + start, y0, x0 + last + 1, y1))
                    start = None
        if start is not None:
            words.append((x0 + start, y0, x0 + last + 1, y1))
        return words if len(words) > 1 else []

    def detect_array(self, image) -> list[dict]:
        """Detections on a BGR image array (lines, then words), boxes in its pixels."""
        dets = []
        for box, score in self.text_lines(image):
            dets.append(_detection(box, "text", score, self.source))
            if self.split_words:
                dets.extend(_detection(w, "text", score, self.source) for w in self.split_line(image, box))
        return dets

    def detect(self, image_path: str) -> list[dict]:
        return self.detect_array(read_image_bgr(image_path))


# --------------------------------------------------------------------------------------------------------------------
# classic


class ClassicDetector(Detector):
    """Weights-free OpenCV proposals of UI element boxes; ``type`` is ``"element"``, ``score`` ``None``.

    Three proposal sources, union, de-duplicated, boxes as ``[x, y, x + w, y + h]`` (pixel edges):

    1. **Edge components.** Canny edges of the grey image (hysteresis ``canny_low``/``canny_high``, default 50/150 on
       0-255), dilated with each rectangular kernel in ``kernels`` (``(width, height)`` px, default 3x3, 7x3, 15x3: a
       ``k``-wide kernel closes horizontal gaps up to ``k - 1`` px, so 3x3 joins the glyphs of a word, 7x3 the words
       of a phrase, 15x3 a line or a block); the bounding box of every 8-connected component is a proposal.
       Connected components, not external contours: a link inside a bordered panel stays its own component.
    2. **Rectangular outlines.** Contours of the undilated edge map whose filled area is at least ``outline_fill``
       (default 0.85) of their bounding box: buttons, inputs, cards, tabs.
    3. **Colour-uniform regions.** Flat pixels (grey morphological gradient in 3x3 at most ``flat_gradient``, default
       8) grouped by colour quantised to ``colour_bits`` bits per channel (default 4); each 4-connected component of one
       colour with at least ``min_region_area`` pixels (default 64) is a proposal (filled buttons, bars, sidebars,
       highlighted rows). Only the ``max_colours`` most frequent flat colours (default 64) are labelled.

    Every proposal must have both sides at least ``min_side`` px (default 4; 8 for outlines and regions) and cover at
    most ``max_area_fraction`` of the image (default 0.5: the page background is not an element). The parameters were
    chosen on ``data/web_sample`` (Chromium-rendered documentation pages), where no true box has best IoU under 0.1;
    about 0.06 s per 1280x720 screenshot.
    """

    name = "classic"

    def __init__(
        self,
        *,
        canny_low: int = 50,
        canny_high: int = 150,
        kernels: tuple[tuple[int, int], ...] = ((3, 3), (7, 3), (15, 3)),
        min_side: int = 4,
        outline_fill: float = 0.85,
        flat_gradient: int = 8,
        colour_bits: int = 4,
        min_region_area: int = 64,
        max_colours: int = 64,
        max_area_fraction: float = 0.5,
        source: str | None = None,
    ):
        self.canny_low, self.canny_high = int(canny_low), int(canny_high)
        self.kernels = tuple((int(kx), int(ky)) for kx, ky in kernels)
        self.min_side = int(min_side)
        self.outline_fill = float(outline_fill)
        self.flat_gradient = int(flat_gradient)
        self.colour_bits = int(colour_bits)
        self.min_region_area = int(min_region_area)
        self.max_colours = int(max_colours)
        self.max_area_fraction = float(max_area_fraction)
        self.source = source or self.name

    def config(self) -> dict[str, Any]:
        return {
            "canny": [self.canny_low, self.canny_high],
            "kernels": [list(k) for k in self.kernels],
            "min_side": self.min_side,
            "outline_fill": self.outline_fill,
            "flat_gradient": self.flat_gradient,
            "colour_bits": self.colour_bits,
            "min_region_area": self.min_region_area,
            "max_colours": self.max_colours,
            "max_area_fraction": self.max_area_fraction,
        }

    def load(self) -> None:
        _import_cv2()

    def boxes(self, image) -> list[tuple[int, int, int, int]]:
        """Sorted unique proposal boxes ``(x_min, y_min, x_max, y_max)`` of a BGR image array, in its pixels."""
        import numpy as np

        cv2 = _import_cv2()
        height, width = image.shape[:2]
        max_area = self.max_area_fraction * width * height
        found: set[tuple[int, int, int, int]] = set()

        def add(x, y, w, h, min_side):
            if w >= min_side and h >= min_side and w * h <= max_area:
                found.add((int(x), int(y), int(x + w), int(y + h)))

        grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        edges = cv2.Canny(grey, self.canny_low, self.canny_high)
        for kx, ky in self.kernels:
            dilated = cv2.dilate(edges, cv2.getStructuringElement(cv2.MORPH_RECT, (kx, ky)))
            _, _, stats, _ = cv2.connectedComponentsWithStats(dilated, connectivity=8)
            for x, y, w, h, _area in stats[1:]:
                add(x, y, w, h, self.min_side)
        contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        for contour in contours:
            x, y, w, h = cv2.boundingRect(contour)
            if cv2.contourArea(contour) >= self.outline_fill * w * h:
                add(x, y, w, h, max(self.min_side, 8))
        shift = 8 - self.colour_bits
        q = (image >> shift).astype(np.int32)
        colour = (q[..., 0] << (2 * self.colour_bits)) | (q[..., 1] << self.colour_bits) | q[..., 2]
        flat = cv2.morphologyEx(grey, cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8)) <= self.flat_gradient
        values, counts = np.unique(colour[flat], return_counts=True)
        order = np.argsort(-counts, kind="stable")[: self.max_colours]
        for value, count in zip(values[order], counts[order], strict=True):
            if count < self.min_region_area:
                continue
            mask = ((colour == value) & flat).astype(np.uint8)
            _, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
            for x, y, w, h, area in stats[1:]:
                if area >= self.min_region_area:
                    add(x, y, w, h, max(self.min_side, 8))
        return sorted(found)

    def detect(self, image_path: str) -> list[dict]:
        return [_detection(b, "element", None, self.source) for b in self.boxes(read_image_bgr(image_path))]


# --------------------------------------------------------------------------------------------------------------------
# omniparser


def _area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _contained_fraction(inner: Box, outer: Box) -> float:
    """Fraction of ``inner``'s area that lies inside ``outer`` (0 when ``inner`` has no area)."""
    iw = min(inner[2], outer[2]) - max(inner[0], outer[0])
    ih = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = _area(inner)
    return iw * ih / area if iw > 0 and ih > 0 and area > 0 else 0.0


def _overlap(a: Box, b: Box) -> float:
    """OmniParser's overlap measure: the largest of the IoU and the two containment fractions."""
    return max(box_iou(a, b), _contained_fraction(a, b), _contained_fraction(b, a))


def merge_ocr_and_icons(
    ocr: list[dict], icons: list[dict], iou_threshold: float = 0.7, inside_fraction: float = 0.8
) -> list[dict]:
    """Merge OCR text boxes and YOLO icon boxes (same pixel frame) the way OmniParser does; returns the kept boxes.

    Source: OmniParser's ``remove_overlap_new`` as called by GTA1's ``run.py`` (``iou_threshold=0.7``); facts
    re-implemented, not its code. "Overlap" is OmniParser's measure, the largest of the IoU (:func:`box_iou`) and the
    fraction of either box inside the other; "A inside B" means more than ``inside_fraction`` (0.8) of A's area is in
    B.

    1. Icon de-duplication: an icon is dropped when another icon overlaps it by more than ``iou_threshold`` and is
       smaller (the smaller box of a duplicate pair is kept).
    2. An icon inside a text box is dropped (the text box already stands for the element).
    3. Otherwise text boxes inside the icon are absorbed: OmniParser keeps the icon with their text as its content and
       drops them as separate boxes (here: they are removed from the output).

    The result is the remaining text boxes (input order) followed by the kept icons (input order). For cleaning, the
    merge can only remove boxes, never move them.
    """
    icon_boxes = [tuple(d["bbox"]) for d in icons]
    ocr_boxes = [tuple(d["bbox"]) for d in ocr]
    absorbed: set[int] = set()
    kept_icons = []
    for i, box in enumerate(icon_boxes):
        if any(
            j != i and _overlap(box, other) > iou_threshold and _area(box) > _area(other)
            for j, other in enumerate(icon_boxes)
        ):
            continue
        if any(_contained_fraction(box, text) > inside_fraction for text in ocr_boxes):
            continue
        absorbed.update(k for k, text in enumerate(ocr_boxes) if _contained_fraction(text, box) > inside_fraction)
        kept_icons.append(icons[i])
    return [d for k, d in enumerate(ocr) if k not in absorbed] + kept_icons


class OmniParserDetector(Detector):
    """OmniParser's YOLO icon detector (ultralytics) plus :class:`OCRDetector` text boxes, merged.

    Source: GTA1 ``preprocessing/run.py`` runs OmniParser-v2.0 with ``BOX_TRESHOLD=0.05`` and an OCR/icon merge at IoU
    0.7 (Yan98/GTA1 ``preprocessing/run.py:37,62-75,91-96`` at 81f0c4c). Icons:
    ``YOLO(weights).predict(image, conf=box_threshold, iou=merge_iou)``, boxes ``xyxy`` in original pixels, ``type``
    ``"icon"``, ``score`` the YOLO confidence. Text: this project's ``ocr`` detector (RapidOCR PP-OCRv4 lines + words)
    instead of OmniParser's PaddleOCR. Merge: :func:`merge_ocr_and_icons`. No Florence-2 captions (they do not change
    boxes).

    Needs ``pip install ultralytics`` (extra ``omniparser``) and the weights file ``OmniParser-v2.0/icon_detect/model.pt``
    (from the OmniParser release; not downloaded here).
    """

    name = "omniparser"

    def __init__(
        self,
        weights: str | None = None,
        *,
        box_threshold: float = 0.05,
        merge_iou: float = 0.7,
        inside_fraction: float = 0.8,
        imgsz: int | None = None,
        ocr: OCRDetector | None = None,
        source: str | None = None,
    ):
        self.weights = weights
        self.box_threshold = float(box_threshold)
        self.merge_iou = float(merge_iou)
        self.inside_fraction = float(inside_fraction)
        self.imgsz = imgsz
        self.source = source or self.name
        self.ocr = ocr or OCRDetector(source=self.source)
        self.ocr.source = self.source
        self._model = None

    def config(self) -> dict[str, Any]:
        # the weights path is not part of the config, so a --from-cache run needs no weights; use another cache dir
        # for other weights
        return {
            "box_threshold": self.box_threshold,
            "merge_iou": self.merge_iou,
            "inside_fraction": self.inside_fraction,
            "imgsz": self.imgsz,
            "ocr": self.ocr.config(),
        }

    def load(self) -> None:
        if self._model is not None:
            return
        if not self.weights:
            raise FileNotFoundError(f"no weights given. {OMNIPARSER_HINT}")
        if not os.path.isfile(self.weights):
            raise FileNotFoundError(f"weights not found: {self.weights}. {OMNIPARSER_HINT}")
        try:
            from ultralytics import YOLO
        except ImportError as err:
            raise ImportError(f"ultralytics is not installed. {OMNIPARSER_HINT}") from err
        self.ocr.load()
        self._model = YOLO(self.weights)

    def icons(self, image) -> list[dict]:
        """YOLO icon detections on a BGR image array (original pixels)."""
        self.load()
        kwargs = {"conf": self.box_threshold, "iou": self.merge_iou, "verbose": False}
        if self.imgsz:
            kwargs["imgsz"] = self.imgsz
        result = self._model.predict(source=image, **kwargs)[0]
        xyxy = result.boxes.xyxy.cpu().numpy().tolist()
        conf = result.boxes.conf.cpu().numpy().tolist()
        height, width = image.shape[:2]
        return [
            _detection(_clip_box(b, width, height), "icon", c, self.source) for b, c in zip(xyxy, conf, strict=True)
        ]

    def detect(self, image_path: str) -> list[dict]:
        self.load()
        image = read_image_bgr(image_path)
        return merge_ocr_and_icons(
            self.ocr.detect_array(image), self.icons(image), self.merge_iou, self.inside_fraction
        )


# --------------------------------------------------------------------------------------------------------------------
# union and construction


class UnionDetector(Detector):
    """Several detectors at once (``"ocr+classic"``): the concatenation of their detections, each keeping its
    ``source``. The best IoU against the union is the largest best IoU against any component, so a sample is kept
    when any component supports its box."""

    def __init__(self, detectors: list[Detector]):
        self.detectors = list(detectors)
        self.name = "+".join(d.name for d in self.detectors)

    def config(self) -> dict[str, Any]:
        return {d.name: d.config() for d in self.detectors}

    def load(self) -> None:
        for d in self.detectors:
            d.load()

    def detect(self, image_path: str) -> list[dict]:
        return [det for d in self.detectors for det in d.detect(image_path)]

    @property
    def components(self) -> list[Detector]:
        return [c for d in self.detectors for c in d.components]


DETECTORS: dict[str, type[Detector]] = {
    "ocr": OCRDetector,
    "classic": ClassicDetector,
    "omniparser": OmniParserDetector,
}


def parse_detector_spec(spec: str) -> list[str]:
    """Component names of a ``+``-joined spec (``"ocr+classic"`` -> ``["ocr", "classic"]``), duplicates removed.

    Raises:
        ValueError: an empty spec or an unknown name (the message lists the known ones).
    """
    names = []
    for part in spec.split("+"):
        name = part.strip().lower()
        if name not in DETECTORS:
            raise ValueError(f"unknown detector {part!r} in {spec!r}; known: {', '.join(DETECTORS)} (join with +)")
        if name not in names:
            names.append(name)
    return names


def build_detector(spec: str, options: dict[str, dict[str, Any]] | None = None) -> Detector:
    """A detector from a spec such as ``"ocr"``, ``"classic"`` or ``"ocr+classic"``.

    Args:
        spec: detector names (``DETECTORS``) joined with ``+``.
        options: keyword arguments per detector name, e.g. ``{"omniparser": {"weights": "icon_detect/model.pt"},
            "ocr": {"min_text_score": 0.9}}``; the ``ocr`` options also apply to omniparser's text boxes.

    Nothing is loaded here (no model, no heavy import): call ``load()`` or ``detect()`` for that.
    """
    options = options or {}
    detectors = []
    for name in parse_detector_spec(spec):
        kwargs = dict(options.get(name, {}))
        if name == "omniparser" and "ocr" not in kwargs:
            kwargs["ocr"] = OCRDetector(**options.get("ocr", {}))  # its text boxes use the ocr options too
        detectors.append(DETECTORS[name](**kwargs))
    return detectors[0] if len(detectors) == 1 else UnionDetector(detectors)
