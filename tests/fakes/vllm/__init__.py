"""A FAKE ``vllm`` package for CPU tests (``tests/test_vllm_rollouts.py``): the interface of vLLM 0.30.0 that TRL 1.16.0
calls, written for this project (no vLLM code), with deterministic "generation" and a record of every call.

Never installed, never on ``sys.path`` by default: the test appends ``tests/fakes`` to ``sys.path`` only when no real
``vllm`` is importable (so it cannot shadow one) and removes it afterwards.

Source of the signatures: the wheel ``vllm-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl`` from PyPI (sha256
ef52ee58c410ead0b8afb190838fa4cbcb52075596f67862a03859d984966ac4, git commit ced6857af per its ``vllm/_version.py``):

* ``vllm/__init__.py:16-38``: the top-level names (``LLM``, ``SamplingParams``, ``RequestOutput``, ``CompletionOutput``)
  and ``__version__`` (``vllm/_version.py``: ``'0.30.0'``; TRL reads it through ``trl/import_utils.py:101-115``);
* ``vllm/entrypoints/llm.py:179-225`` (``LLM.__init__``), ``:418-481`` (``LLM.generate``), ``:796-841``
  (``reset_prefix_cache``, ``sleep``, ``wake_up``);
* ``vllm/sampling_params.py:88-124`` (``StructuredOutputsParams``), ``:198-206`` (``RequestOutputKind``), ``:215-374``
  (``SamplingParams`` fields), ``:656-661`` (empty bad word check), ``:720-788`` (``update_from_tokenizer``: how a
  ``bad_words`` string becomes banned token ids);
* ``vllm/outputs.py:33-68`` (``CompletionOutput``), ``:133-171`` (``RequestOutput``); ``vllm/logprobs.py:13-24``
  (``Logprob``);
* ``vllm/engine/arg_utils.py:461,472,556,559,563,724,730``: the ``EngineArgs`` fields TRL passes through ``LLM(**kwargs)``;
* ``vllm/v1/engine/llm_engine.py:128-130``: ``llm_engine.model_executor`` (TRL's colocate weight sync path);
* ``vllm/model_executor/models/qwen2_vl.py:881-929``: how many image tokens vLLM expects per image (smart_resize with
  the checkpoint image processor's ``size``, overridden by ``mm_processor_kwargs``);
* ``vllm/utils/network_utils.py:34``, ``vllm/distributed/weight_transfer/nccl_common.py:222``,
  ``vllm/distributed/weight_transfer/packed_tensor.py:15-16,144-151``: the server-mode weight-transfer names.

What is fake (not vLLM's behaviour): the completions (a fixed script, see :mod:`vllm._fake`), the logprob values, the
HTTP server (:mod:`vllm._fake_http`, shaped after what ``trl/generation/vllm_client.py`` sends and parses; the real
server's response bodies were not read) and NCCL (no GPU).
"""

from vllm._version import __version__, __version_tuple__
from vllm.entrypoints.llm import LLM
from vllm.logprobs import Logprob
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

__all__ = [
    "__version__",
    "__version_tuple__",
    "LLM",
    "SamplingParams",
    "StructuredOutputsParams",
    "RequestOutputKind",
    "RequestOutput",
    "CompletionOutput",
    "Logprob",
]
