"""Entry point ``python -m vlm_r1.preflight``: the multi-node preflight on its own (the library and its flags are
:mod:`vlm_r1.preflight`)."""

import sys

from vlm_r1.preflight import main

if __name__ == "__main__":
    sys.exit(main())
