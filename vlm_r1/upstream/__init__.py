"""The upstream dialect: upstream VLM-R1's command line (om-ai-lab/VLM-R1 at 90052f4, pinned to trl 0.17.0 and
transformers 4.49.0) on the core, as an edge package that only entry points import (docs/ARCHITECTURE.md;
``tests/test_layers.py``).

What it holds:

* :mod:`~vlm_r1.upstream.flags`: upstream's flags TRL 1.16 renamed or dropped and the transformers 4.x
  ``TrainingArguments`` flags 5.x removed, parsed with the core's and rewritten into core values;
* :mod:`~vlm_r1.upstream.defaults`: upstream's effective defaults where TRL / transformers 5 default differently;
* :mod:`~vlm_r1.upstream.tasks`, :mod:`~vlm_r1.upstream.rewards`, :mod:`~vlm_r1.upstream.accuracy`: the ``default`` and
  REC tasks and their rewards, registered under the core's entry-point groups ``vlm_r1.tasks`` / ``vlm_r1.rewards``
  (setup.py) like any plugin's;
* :mod:`~vlm_r1.upstream.debug_log`: the ``DEBUG_MODE=true`` / ``LOG_PATH`` rollout log;
* :mod:`~vlm_r1.upstream.table`: every upstream flag's declared, effective and our default
  (``python -m vlm_r1.upstream_defaults``, docs/UPSTREAM.md "Defaults").

The entry points hand :data:`UPSTREAM` (``python -m vlm_r1.grpo_jsonl``), :data:`GTA1` (``python -m
gui_grounding.train``, the launch plan, ``gui-grounding estimate``) or :data:`TRANSFORMERS_4` (``python -m
vlm_r1.sft``: only the transformers 4.x flags; SFT keeps TRL's defaults) to the core's one parse
(:class:`vlm_r1.dialect.Dialect`).
"""

from __future__ import annotations

import functools

from vlm_r1.dialect import Dialect
from vlm_r1.upstream import flags
from vlm_r1.upstream.debug_log import RolloutLogWriter
from vlm_r1.upstream.defaults import DEFAULT_NOTES, DEFAULTS


def dialect(*, dataset_name_as_data: bool = False, name: str = "upstream VLM-R1") -> Dialect:
    """Upstream VLM-R1's dialect; ``dataset_name_as_data``: a ``--dataset_name`` that is not a YAML mixture is the
    data file (GTA1's ``src/grpo_grounding.py`` form, :func:`vlm_r1.upstream.flags.finish`)."""
    return Dialect(
        name=name,
        argument_classes=(flags.UpstreamCompatArguments, flags.LegacyTrainingArguments),
        defaults=DEFAULTS,
        default_notes=DEFAULT_NOTES,
        translate=flags.translate,
        finish=functools.partial(flags.finish, dataset_name_as_data=dataset_name_as_data),
        rollout_log=RolloutLogWriter,
    )


#: ``python -m vlm_r1.grpo_jsonl``'s command line
UPSTREAM = dialect()
#: GTA1's (Yan98/GTA1 81f0c4c ``src/grpo_grounding.py``, a VLM-R1 fork on the same pins): upstream's, with
#: ``--dataset_name FILE.json`` as the data file
GTA1 = dialect(dataset_name_as_data=True, name="GTA1")
#: the transformers 4.49 ``TrainingArguments`` flags alone (``python -m vlm_r1.sft``: upstream-style scripts pass
#: them; its defaults stay TRL's ``SFTConfig``'s)
TRANSFORMERS_4 = Dialect(
    name="transformers 4.x", argument_classes=(flags.LegacyTrainingArguments,), translate=flags.translate
)
