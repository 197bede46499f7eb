"""Moved: the adapters live in :mod:`gui_grounding.adapters` (one file per model family), shared by training, SFT
and evaluation. This module re-exports them for existing imports."""

from gui_grounding.adapters import *  # noqa: F401,F403
from gui_grounding.adapters import __all__  # noqa: F401
