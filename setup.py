"""Packaging for the GTA1-style GRPO GUI-grounding project.

Two packages:
  * ``vlm_r1``        - VLM-R1-compatible GRPO core on ``trl.GRPOTrainer`` (knows nothing about GUIs);
  * ``gui_grounding`` - the GTA1 plugin (schema, coordinate frames, prompts, click reward, collector, evaluation).

On CPU machines install torch first (``pip install torch==2.13.0`` picks the local CPU wheel) and never torchvision;
``run_scripts/setup_env.sh`` does this. On GPU clusters ``pip install -e .[gpu]`` adds the CUDA-only pieces.
"""

from setuptools import find_packages, setup

INSTALL_REQUIRES = [
    "torch>=2.13,<2.14",
    "transformers==5.23.0",
    "trl==1.16.0",
    "accelerate==1.15.0",
    "datasets==5.2.0",
    "peft==0.21.2",
    "pillow>=12",
    "pyyaml>=6",
    "tqdm>=4.66",
    "matplotlib>=3.8",
    "tensorboard>=2.16",
    "wandb>=0.31",  # --report_to wandb (upstream run scripts log there); WANDB_MODE=offline works without a network
    "imagesize>=1.4",  # image sizes from headers, without decoding
    "scipy>=1.11",  # eval: Wilson intervals and McNemar's paired test (gui_grounding.eval.stats)
    # the default task's `accuracy` as upstream VLM-R1 scores it (vlm_r1.rewards): math_verify for math answers,
    # the Indel ratio (python-Levenshtein's `ratio`) for partial credit
    "math-verify>=0.9,<0.10",
    "rapidfuzz>=3",
]

EXTRAS = {
    # CUDA-only pieces: imported lazily by the code, with a clear message when absent.
    # vllm: TRL 1.16.0 supports 0.22.0-0.31.0 (trl/import_utils.py:101-115 warns outside it; its own `vllm` extra says
    # vllm>=0.22.0,<=0.31.0), and `vllm>=0.11` resolved to 0.33.0. 0.31.0 needs transformers<5.18 (its METADATA),
    # which our transformers==5.23.0 excludes; 0.27.1-0.30.0 need torch==2.13.0 and transformers>=5.5.3/5.10.4. Pinned
    # to 0.30.0, the version whose interface tests/fakes/vllm mirrors (tests/test_vllm_rollouts.py; docs/TRAINING.md).
    "gpu": ["flash-attn>=2.7", "vllm==0.30.0", "deepspeed==0.19.8"],
    "deepspeed": ["deepspeed==0.19.8"],
    "collect": ["playwright>=1.50"],
    # OpenAI-compatible chat-completions endpoints (`vllm serve`, hosted APIs): the `openai` evaluation backend.
    "api": ["openai>=1.40"],
    # Detector-IoU cleaning (`gui-grounding clean`): PP-OCR on onnxruntime (models inside the wheel) and OpenCV.
    "clean": ["rapidocr-onnxruntime>=1.4", "opencv-python-headless>=4.9"],
    # `gui-grounding clean --detector omniparser`: OmniParser's YOLO icon detector (weights supplied by the user).
    "omniparser": ["ultralytics>=8"],
    # deepspeed: tests/test_deepspeed.py runs ZeRO-2/3 on CPU (its sdist builds without CUDA; ops JIT-compile on use)
    "dev": [
        "pytest>=8",
        "hypothesis>=6",
        "ruff>=0.6",
        "openai>=1.40",
        "rapidocr-onnxruntime>=1.4",
        "opencv-python-headless>=4.9",
        "deepspeed==0.19.8",
    ],
}

setup(
    name="gui-grounding-grpo",
    version="0.1.0",
    description="GRPO training and evaluation of GUI grounding models (GTA1 recipe) on a VLM-R1-compatible TRL core",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(
        include=["groundwork", "groundwork.*", "vlm_r1", "vlm_r1.*", "gui_grounding", "gui_grounding.*"]
    ),
    include_package_data=True,
    package_data={"gui_grounding": ["eval/*.html"], "vlm_r1": ["upstream/upstream_defaults.json"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": ["gui-grounding = gui_grounding.cli:main"],
        # Task plugins (vlm_r1/tasks.py). Upstream VLM-R1's tasks and rewards live in the upstream edge
        # (vlm_r1/upstream/), which the core never imports: they register here like any plugin, and the core's
        # registries count this package's own (vlm_r1.*) entries as built-ins. `--task_type gui_grounding` turns
        # records into prompts + reward columns and declares its own flags (--prompt_mode, --adapter, --box_rounding)
        # and rewards (click, ...). Reward-only plugins register under "vlm_r1.rewards".
        "vlm_r1.tasks": [
            "default = vlm_r1.upstream.tasks:DefaultTask",
            "rec = vlm_r1.upstream.tasks:RECTask",
            *(f"{t} = vlm_r1.upstream.tasks:DefaultTask" for t in ("ic", "odLength", "gui", "gui_defect")),
            "gui_grounding = gui_grounding.training.task:GUIGroundingTask",
        ],
        "vlm_r1.rewards": [
            "accuracy = vlm_r1.upstream.accuracy:accuracy_reward",
            "format = vlm_r1.upstream.rewards:format_reward",
            "rec_iou = vlm_r1.upstream.rewards:iou_reward",
            "rec_format = vlm_r1.upstream.rewards:format_reward_rec",
        ],
    },
)
