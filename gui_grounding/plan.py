"""Entry point ``python -m gui_grounding.plan``: the batch maths of a GTA1 launch (the library is
:mod:`gui_grounding.ops.plan`, whose docstring describes the flags and the output)."""

import sys

from gui_grounding.ops.plan import main

if __name__ == "__main__":
    sys.exit(main())
