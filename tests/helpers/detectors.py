"""A detector for the ``gui-grounding clean`` tests whose detections a test sets by hand.

``from tests.helpers.detectors import dict_detector``; register it as the engine's detectors are registered
(``monkeypatch.setitem(gui_grounding.data.detectors.DETECTORS, name, cls)``) and reset its class attributes per test.
"""

from __future__ import annotations

import os


def dict_detector(name: str) -> type:
    """A new ``gui_grounding.data.detectors.Detector`` subclass called ``name`` (its own class attributes, so two
    test files never share state): ``detect(path)`` records the file name in ``calls``, raises ``OSError("cannot
    decode")`` for a name in ``raising``, returns ``outputs[name]`` as it is where given (a malformed detector
    output), else one ``{"bbox", "type": "element", "score": None, "source": name}`` per box in ``boxes[name]``.
    ``config()`` is ``{"version": version}`` (the constructor's ``version``, default 1: the cache key's part)."""
    from gui_grounding.data.detectors import Detector

    def __init__(self, version: int = 1):
        self.version = version

    def config(self):
        return {"version": self.version}

    def detect(self, image_path):
        cls, file_name = type(self), os.path.basename(image_path)
        cls.calls.append(file_name)
        if file_name in cls.raising:
            raise OSError("cannot decode")
        if file_name in cls.outputs:
            return cls.outputs[file_name]
        return [
            {"bbox": list(b), "type": "element", "score": None, "source": name} for b in cls.boxes.get(file_name, [])
        ]

    attributes = dict(__init__=__init__, config=config, detect=detect, __doc__=dict_detector.__doc__)
    attributes.update(name=name, boxes={}, calls=[], raising=set(), outputs={})
    return type(f"DictDetector_{name}", (Detector,), attributes)
