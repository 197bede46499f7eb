"""What a model family means to GUI grounding: coordinate frames, prompts and the one point parser, the family
adapters, the published checkpoints' profiles, the region vote and the sample -> model row builder.

Lowest layer of the plugin: imports ``groundwork`` and the ``vlm_r1`` core only (docs/ARCHITECTURE.md)."""
