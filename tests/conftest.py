"""Shared fixtures: tiny Qwen2.5-VL / Qwen2-VL / Qwen3-VL checkpoints (built offline, once per session), a PNG factory,
and the shared helpers of ``tests/helpers`` as fixtures (``repo`` / ``sample``: paths.REPO / paths.SAMPLE; ``proc``: the
child-process module, ``proc.child_env(...)`` and ``proc.run(...)``). Plain functions are imported from
``tests.helpers`` directly (``from tests.helpers.proc import run``); one home each, no per-file copies:

* ``train``: tiny training runs (``tiny_train_argv`` / ``tiny_sft_argv`` / ``flags``, ``sample_subset``,
  ``step_logs``, ``launch``, ``colour_question_argv``);
* ``bench``: rescoring a predictions file (``rescore``, ``rescore_full``), ScreenSpot-Pro harness details;
* ``records``: completion and record shapes (``assistant``, ``conversation``, ``task_script_args``);
* ``images`` (``png_bytes``, ``raw_png``), ``jsonl`` (``read_jsonl``), ``detectors`` (``dict_detector``),
  ``gloo`` (``gloo_ranks``), ``wilson`` (closed-form intervals), ``paths``, ``proc``.

Environment is pinned before anything imports torch or huggingface_hub: at most 2 OpenMP threads (the CI machine has 2
cores; more threads oversubscribe and slow generation ~50x), no tokenizer thread pool, and the HF hub in offline mode
so a name that is not a local path fails at once instead of retrying the network for ~30 s.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: builds models or runs training/generation (seconds, not milliseconds)")


def _build_tiny(arch: str, tmp_path_factory) -> str:
    from vlm_r1.tiny import build_tiny_model

    out = tmp_path_factory.mktemp(f"tiny_{arch}")
    path = build_tiny_model(arch, str(out))
    assert os.path.isfile(os.path.join(path, "config.json")), f"build_tiny_model({arch!r}) wrote no config.json"
    return path


@pytest.fixture(scope="session")
def tiny_qwen25_dir(tmp_path_factory) -> str:
    """Directory of a tiny, randomly initialised Qwen2.5-VL checkpoint (max_pixels 200704, min_pixels 3136)."""
    return _build_tiny("qwen2_5_vl", tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory) -> str:
    """Directory of a tiny, randomly initialised Qwen2-VL checkpoint (max_pixels 200704, min_pixels 3136)."""
    return _build_tiny("qwen2_vl", tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory) -> str:
    """Directory of a tiny, randomly initialised Qwen3-VL checkpoint (``Qwen3VLModule.build_tiny_checkpoint``)."""
    return _build_tiny("qwen3_vl", tmp_path_factory)


@pytest.fixture(scope="session")
def repo() -> str:
    """The repository root (``tests.helpers.paths.REPO``)."""
    from tests.helpers.paths import REPO

    return REPO


@pytest.fixture(scope="session")
def sample() -> str:
    """The committed sample data folder (``tests.helpers.paths.SAMPLE``)."""
    from tests.helpers.paths import SAMPLE

    return SAMPLE


@pytest.fixture(scope="session")
def proc():
    """The child-process helpers (``tests/helpers/proc.py``): ``child_env``, ``run``, ``run_module``, ``stop``."""
    from tests.helpers import proc as module

    return module


@pytest.fixture
def make_image(tmp_path):
    """Factory ``make_image(width, height, name="img.png", folder=None, color=(200, 120, 40)) -> str``.

    Writes an RGB PNG of exactly ``width x height`` pixels (a colour gradient, so it is not trivially compressible)
    under ``folder`` (default ``tmp_path``; created if needed) and returns its path.
    """
    from PIL import Image

    def make(width: int, height: int, name: str = "img.png", folder=None, color=(200, 120, 40)) -> str:
        folder = str(folder) if folder is not None else str(tmp_path)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        im = Image.new("RGB", (width, height), color)
        # a few stripes so every PNG has real image data (truncating it then really corrupts it)
        for x in range(0, width, max(1, width // 8)):
            im.paste((x % 256, (x * 7) % 256, 255 - x % 256), (x, 0, min(width, x + 2), height))
        im.save(path, format="PNG")
        return path

    return make
