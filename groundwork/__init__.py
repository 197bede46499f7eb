"""The bottom layer: GUI-free, trainer-free rules and tools that every other package builds on.

It holds the hostile-input rules (``validate``: values, ids, text, paths, image frame, model limits), the record
framing (``records``), safe outputs (``outputs``), CLI number types (``argtypes``), geometry (``geometry``), the pixel
budget (``pixel_budget``) and the one registry (``registry``). It imports nothing else of the project
(docs/ARCHITECTURE.md; enforced by tests/test_layers.py).
"""
