"""GUI grounding plugin (GTA1 recipe) for the vlm_r1 GRPO core."""
