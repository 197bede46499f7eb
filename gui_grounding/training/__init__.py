"""The GTA1 training plugin: the ``gui_grounding`` task, its rewards and held-out click accuracy during training.

Sits above ``gui_grounding.eval`` (held-out evaluation during training reuses the eval judge and hf backend), below
``gui_grounding.ops`` (docs/ARCHITECTURE.md)."""
