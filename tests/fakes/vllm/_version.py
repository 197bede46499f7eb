"""The version this fake mirrors (vLLM 0.30.0's ``vllm/_version.py``)."""

__version__ = "0.30.0"
__version_tuple__ = (0, 30, 0)
