"""``VLLMValidationError`` (vLLM 0.30.0 ``vllm/exceptions.py:10-37``: ``VLLMError(Exception)`` >
``VLLMClientError`` > ``VLLMValidationError``)."""


class VLLMError(Exception):
    pass


class VLLMClientError(VLLMError):
    pass


class VLLMValidationError(VLLMClientError):
    def __init__(self, message: str, *, parameter: str | None = None, value=None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value
