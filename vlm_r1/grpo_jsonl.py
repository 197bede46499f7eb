"""Entry point ``python -m vlm_r1.grpo_jsonl``: GRPO on JSONL data with upstream VLM-R1's command line: the core's
library (:mod:`vlm_r1.grpo`: its flags, its example; ``--help`` lists every flag) in the upstream dialect
(:data:`vlm_r1.upstream.UPSTREAM`: upstream's legacy and renamed flags, effective defaults and ``DEBUG_MODE`` log)."""

import sys

from vlm_r1 import grpo
from vlm_r1.upstream import UPSTREAM


def command_line(argv=None, *, defaults=None):
    """:func:`vlm_r1.grpo.command_line` in upstream VLM-R1's dialect."""
    return grpo.command_line(argv, defaults=defaults, dialect=UPSTREAM)


def parse_args(argv=None, **kwargs):
    """:func:`vlm_r1.grpo.parse_args` in upstream VLM-R1's dialect: ``(script_args, training_args, model_args)``."""
    return grpo.parse_args(argv, dialect=UPSTREAM, **kwargs)


def main(argv=None):
    """:func:`vlm_r1.grpo.main` in upstream VLM-R1's dialect."""
    return grpo.main(argv, dialect=UPSTREAM)


if __name__ == "__main__":
    sys.exit(main())
