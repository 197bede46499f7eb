"""Entry point ``python -m gui_grounding.plan``: the batch maths of a GTA1 launch (the library is
:mod:`gui_grounding.ops.plan`, whose docstring describes the flags and the output), in GTA1's dialect
(:data:`vlm_r1.upstream.GTA1`)."""

import sys

from gui_grounding.ops.plan import main
from vlm_r1.upstream import GTA1

if __name__ == "__main__":
    sys.exit(main(dialect=GTA1))
