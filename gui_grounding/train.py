"""Entry point ``python -m gui_grounding.train``: GTA1's ``src/grpo_grounding.py`` command line on our core (the
library, GTA1's defaults and the migration notes are :mod:`gui_grounding.training.gta1`; ``--help`` lists every
flag), in GTA1's dialect (:data:`vlm_r1.upstream.GTA1`: upstream VLM-R1's flags and effective defaults)."""

from gui_grounding.training.gta1 import main
from vlm_r1.upstream import GTA1

if __name__ == "__main__":
    main(dialect=GTA1)
