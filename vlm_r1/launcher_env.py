"""Entry point ``python -m vlm_r1.launcher_env``: the launchers' environment variables checked by the one rule (the
library is :func:`vlm_r1.launch.launcher_env_main`; the variables and their types :data:`vlm_r1.launch.LAUNCHER_VARIABLES`).

    CHECKED="$("$PYTHON" -m vlm_r1.launcher_env --prog train_grpo NNODES NPROC_PER_NODE MAX_RESTARTS)" || exit 2
"""

import sys

from vlm_r1.launch import launcher_env_main

if __name__ == "__main__":
    sys.exit(launcher_env_main())
