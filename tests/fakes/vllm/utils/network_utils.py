"""``get_ip`` (vLLM 0.30.0 ``vllm/utils/network_utils.py:34``); the fake answers the loopback address."""


def get_ip() -> str:
    return "127.0.0.1"
