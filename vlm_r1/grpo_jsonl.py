"""Entry point ``python -m vlm_r1.grpo_jsonl``: GRPO on JSONL data with upstream VLM-R1's command line (the library,
its flags and its example are :mod:`vlm_r1.grpo`; ``--help`` lists every flag)."""

import sys

from vlm_r1.grpo import main

if __name__ == "__main__":
    sys.exit(main())
