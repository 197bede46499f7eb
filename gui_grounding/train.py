"""Entry point ``python -m gui_grounding.train``: GTA1's ``src/grpo_grounding.py`` command line on our core (the
library, GTA1's defaults and the migration notes are :mod:`gui_grounding.training.gta1`; ``--help`` lists every
flag)."""

from gui_grounding.training.gta1 import main

if __name__ == "__main__":
    main()
