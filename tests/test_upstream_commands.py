"""Published launch commands run as written (slow: upstream's long max_completion_length on a random tiny model).

Each command line below is written here from the flag lists of upstream VLM-R1's scripts (om-ai-lab/VLM-R1 at
90052f4: run_scripts/run_grpo_rec.sh, run_grpo_rec_lora.sh, run_grpo_gui.sh, multinode_training_demo.sh with
multinode_training_args.yaml, src/open-r1-multimodal/run_scripts/run_grpo_rec.sh for grpo_rec.py) and GTA1's README
training command (Yan98/GTA1 at 81f0c4c). Only the model path, data paths, process count, max_steps, DeepSpeed config
path and entry point change; every other flag stays as published (bare ``--bf16``, ``--report_to wandb``,
``--max_completion_length 2048``, ``--attn_implementation flash_attention_2``, ...), and the environment the scripts
export (``DEBUG_MODE=true``, ``LOG_PATH``) is exported too. wandb runs offline (``WANDB_MODE=offline``): no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import child_env, run

pytestmark = pytest.mark.slow

ZERO2 = os.path.join(REPO, "configs", "deepspeed", "zero2.json")
ZERO3 = os.path.join(REPO, "configs", "deepspeed", "zero3.json")
MAX_STEPS = 3


def _torchrun(nproc: int, entry: list[str]) -> list[str]:
    # the scripts' launcher: torchrun --nproc_per_node=8 --nnodes=1 --node_rank=0 --master_addr=127.0.0.1 ...
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--nnodes=1",
        "--node_rank=0",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        *entry,
    ]


def _run(cmd: list[str], tmp_path, name: str) -> subprocess.CompletedProcess:
    log_dir = tmp_path / "runs" / name / "log"
    log_dir.mkdir(parents=True)
    env = child_env(  # the repository on PYTHONPATH (not the test plugins), as upstream's users run it
        threads=1,
        plugins=False,
        DEBUG_MODE="true",
        LOG_PATH=str(log_dir / "debug_log.2026-11-23-12-00-00.txt"),
        WANDB_MODE="offline",
        WANDB_DIR=str(tmp_path / "wandb"),
        WANDB_PROJECT="upstream-commands",
        WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
        WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"),
    )
    (tmp_path / "wandb").mkdir(exist_ok=True)
    return run(cmd, env=env, cwd=tmp_path, timeout=1500, tail=6000)


def _run_info(out) -> dict:
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        return json.load(f)


def _steps(out) -> int:
    with open(os.path.join(out, "trainer_state.json")) as f:
        return json.load(f)["global_step"]


def _debug_blocks(tmp_path, name: str) -> str:
    log_dir = tmp_path / "runs" / name / "log"
    return "".join(p.read_text(encoding="utf-8") for p in sorted(log_dir.iterdir()))


def _wandb_runs(tmp_path) -> list[str]:
    root = tmp_path / "wandb" / "wandb"
    return sorted(p.name for p in root.iterdir() if p.name.startswith("offline-run-")) if root.exists() else []


# ---- data shaped as upstream publishes it ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """COCO-like images; REC JSONL (rec_jsonsl_train), REC annotation JSON (rec_jsons_processed) + grpo_rec data
    config YAML; GUI-defect multi-image JSONL (gui_multi-image.jsonl); an ai2d-style JSONL; a GTA1 JSON list."""
    from PIL import Image, ImageDraw

    root = tmp_path_factory.mktemp("upstream_data")
    coco = root / "coco"
    (coco / "train2014").mkdir(parents=True)
    boxes = {}
    for i in range(4):
        name = f"train2014/COCO_train2014_{i:012d}.jpg"
        im = Image.new("RGB", (112 + 28 * i, 84), (30 * i, 90, 160))
        box = [10 + 5 * i, 12, 60 + 5 * i, 70]
        ImageDraw.Draw(im).rectangle(box, fill=(220, 30, 30))
        im.save(coco / name, quality=90)
        boxes[name] = box
    files = []
    for split in ("refcoco", "refcocop", "refcocog"):
        path = root / f"{split}_train.jsonl"
        with open(path, "w") as f:
            for i, (name, box) in enumerate(boxes.items()):
                f.write(
                    json.dumps(
                        {
                            "id": i,
                            "image": name,
                            "conversations": [
                                {
                                    "from": "human",
                                    "value": "<image>Please provide the bounding box coordinate of the region this "
                                    "sentence describes: the red square.",
                                },
                                {"from": "gpt", "value": box},
                            ],
                        }
                    )
                    + "\n"
                )
        files.append(str(path))
    annotations = []
    for i, (name, box) in enumerate(boxes.items()):
        annotations.append(
            {
                "image": name,
                "problem": "the red square",
                "solution": [float(v) for v in box],
                "normal_caption": "a red square on a blue background",
                "id": i,
            }
        )
    (root / "rec_jsons_processed").mkdir()
    for split in ("refcoco_train", "refcocop_train"):
        (root / "rec_jsons_processed" / f"{split}.json").write_text(json.dumps(annotations))
    (root / "rec.yaml").write_text(
        "datasets:\n"
        + "".join(
            f"    - json_path: {root / 'rec_jsons_processed' / (s + '.json')}\n"
            for s in ("refcoco_train", "refcocop_train")
        )
    )

    gui = root / "gui_multi-image"
    gui.mkdir()
    with open(root / "gui_multi-image.jsonl", "w") as f:
        for i in range(4):
            shots = []
            for k in (13, 14):
                name = f"GOOGLE_APPS-{i}_{k}.png"
                Image.new("RGB", (84, 140), (200, 200, 40 * k % 255)).save(gui / name)
                shots.append(name)
            human = (
                "You are tasked with identifying any UI Interaction Defects using the user action and two "
                "screenshots (before and after the action).\n- Operation No Response: nothing happens.\n"
                "- Unexpected Task Result: the result is wrong.\n\nOutput Format:\n- the defect name"
            )
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "image": shots,
                        "conversations": [
                            {"from": "human", "value": "<image><image>" + human},
                            {"from": "gpt", "value": ["Operation No Response", "Unexpected Task Result"][i % 2]},
                        ],
                    }
                )
                + "\n"
            )

    with open(root / "ai2d.jsonl", "w") as f:
        for i, name in enumerate(boxes):
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "image": name,
                        "conversations": [
                            {"from": "human", "value": "<image>Which colour is the square?\nA. red\nB. green"},
                            {"from": "gpt", "value": "A"},
                        ],
                    }
                )
                + "\n"
            )

    shots = root / "preprocessing" / "images"
    shots.mkdir(parents=True)
    gta1 = []
    for i in range(8):  # one optimiser step of the README command is 8 prompts (2 processes x 32 accumulation / 8)
        Image.new("RGB", (140, 252), (250, 250, 250)).save(shots / f"{i + 1}.png")
        gta1.append(
            {
                "image": f"images/{i + 1}.png",
                "bbox": [38, 166 + 10 * i, 961, 218 + 10 * i],
                "id": i,
                "conversations": [
                    {"from": "human", "value": "<image>Click on the search bar"},
                    {"from": "gpt", "value": "any thing here"},
                ],
            }
        )
    (root / "preprocessing" / "inp.json").write_text(json.dumps(gta1, indent=2))
    return {"root": root, "rec_files": ":".join(files), "coco": str(coco)}


# ---- upstream VLM-R1 run_scripts/ (grpo_jsonl.py) ----------------------------------------------------------------
def _rec_script_args(data, out, model, deepspeed, name):
    # om-ai-lab/VLM-R1 run_scripts/run_grpo_rec.sh, flag for flag (paths, max_steps and the DeepSpeed path changed)
    coco = data["coco"]
    return [
        "--use_vllm",
        "False",
        "--output_dir",
        out,
        "--resume_from_checkpoint",
        "True",
        "--model_name_or_path",
        model,
        "--data_file_paths",
        data["rec_files"],
        "--image_folders",
        f"{coco}:{coco}:{coco}",
        "--is_reward_customized_from_vlm_module",
        "True",
        "--task_type",
        "rec",
        "--per_device_train_batch_size",
        "8",
        "--gradient_accumulation_steps",
        "2",
        "--gradient_checkpointing",
        "true",
        "--logging_steps",
        "1",
        "--num_train_epochs",
        "2",
        "--bf16",
        "--attn_implementation",
        "flash_attention_2",
        "--run_name",
        name,
        "--data_seed",
        "42",
        "--save_steps",
        "100",
        "--num_generations",
        "8",
        "--max_completion_length",
        "2048",
        "--reward_funcs",
        "accuracy",
        "format",
        "--beta",
        "0.04",
        "--report_to",
        "wandb",
        "--dataset-name",
        "this_is_not_used",
        "--deepspeed",
        deepspeed,
        "--max_steps",
        str(MAX_STEPS),
    ]


def test_run_grpo_rec_sh(data, tiny_qwen25_dir, tmp_path):
    out = str(tmp_path / "checkpoints" / "rl" / "rec")
    proc = _run(
        _torchrun(2, ["-m", "vlm_r1.grpo_jsonl", *_rec_script_args(data, out, tiny_qwen25_dir, ZERO3, "rec")]),
        tmp_path,
        "rec",
    )
    assert _steps(out) == MAX_STEPS
    info = _run_info(out)
    assert info["world_size"] == 2 and info["distributed_type"] == "DistributedType.DEEPSPEED"
    assert info["task_type"] == "rec" and info["reward_funcs"] == ["iou_reward", "format_reward_rec"]
    assert (info["loss_type"], info["beta"], info["has_ref_model"]) == ("grpo", 0.04, True)
    assert info["generation"] == {
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
        "min_p": None,
        "repetition_penalty": 1.0,
        "max_new_tokens": 2048,
    }
    assert info["smart_resize"]["max_pixels"] == 12845056  # upstream's default, set on the processor
    assert "--bf16 given but this machine has no bf16-capable GPU: training in fp32 instead" in proc.stderr
    assert "flash-attn is not installed: using sdpa instead" in proc.stderr
    log = _debug_blocks(tmp_path, "rec")
    # rank 0 writes its rollouts: 8 per micro-batch x 2 micro-batches x 3 steps, one block per reward
    assert log.count(" Accuracy reward: ") == 8 * 2 * MAX_STEPS
    assert "problem: Please provide the bounding box coordinate" in log
    assert len(_wandb_runs(tmp_path)) == 1


def test_run_grpo_rec_lora_sh(data, tiny_qwen25_dir, tmp_path):
    # om-ai-lab/VLM-R1 run_scripts/run_grpo_rec_lora.sh: the same flags + zero2, lr 1e-5 and LoRA WITHOUT --lora_target_modules
    out = str(tmp_path / "checkpoints" / "rl" / "rec-lora")
    args = _rec_script_args(data, out, tiny_qwen25_dir, ZERO2, "rec-lora") + [
        "--learning_rate",
        "1e-5",
        "--use_peft",
        "true",
        "--lora_r",
        "64",
        "--lora_alpha",
        "128",
        "--lora_dropout",
        "0.05",
        "--lora_task_type",
        "CAUSAL_LM",
        "--freeze_vision_modules",
        "true",
    ]
    _run(_torchrun(1, ["-m", "vlm_r1.grpo_jsonl", *args]), tmp_path, "rec-lora")
    assert _steps(out) == MAX_STEPS
    with open(os.path.join(out, "adapter_config.json")) as f:
        adapter = json.load(f)
    targets = set(adapter["target_modules"])
    assert targets and not any("visual" in t for t in targets)
    assert {"q_proj", "v_proj", "down_proj"} <= {t.rsplit(".", 1)[-1] for t in targets}
    assert not any("lm_head" in t for t in targets)  # TRL 1.16 refuses LoRA on lm_head (upstream included it)
    assert (adapter["r"], adapter["lora_alpha"]) == (64, 128)
    info = _run_info(out)
    assert (info["learning_rate"], info["beta"], info["has_ref_model"]) == (1e-5, 0.04, False)  # PEFT: no copy


def test_run_grpo_gui_sh(data, tiny_qwen25_dir, tmp_path):
    # om-ai-lab/VLM-R1 run_scripts/run_grpo_gui.sh: multi-image GUI-defect data, all_match accuracy, task_type gui
    out = str(tmp_path / "checkpoints" / "rl" / "gui")
    root = data["root"]
    args = [
        "--use_vllm",
        "False",
        "--output_dir",
        out,
        "--resume_from_checkpoint",
        "True",
        "--model_name_or_path",
        tiny_qwen25_dir,
        "--data_file_paths",
        str(root / "gui_multi-image.jsonl"),
        "--image_folders",
        str(root / "gui_multi-image"),
        "--is_reward_customized_from_vlm_module",
        "False",
        "--reward_method",
        "all_match",
        "--task_type",
        "gui",
        "--per_device_train_batch_size",
        "2",
        "--gradient_accumulation_steps",
        "2",
        "--gradient_checkpointing",
        "true",
        "--logging_steps",
        "1",
        "--num_train_epochs",
        "2",
        "--max_steps",
        str(MAX_STEPS),
        "--bf16",
        "--attn_implementation",
        "flash_attention_2",
        "--run_name",
        "gui",
        "--save_steps",
        "400",
        "--num_generations",
        "8",
        "--max_completion_length",
        "2048",
        "--reward_funcs",
        "accuracy",
        "format",
        "--beta",
        "0.04",
        "--report_to",
        "wandb",
        "--dataset-name",
        "not_used",
        "--deepspeed",
        ZERO3,
    ]
    _run(_torchrun(2, ["-m", "vlm_r1.grpo_jsonl", *args]), tmp_path, "gui")
    assert _steps(out) == MAX_STEPS
    info = _run_info(out)
    assert info["reward_funcs"] == ["accuracy_reward", "format_reward"]
    # 2 completions per process and micro-step, 8 generations: a group spans 4 micro-steps x 2 processes
    assert info["global_completions_per_step"] == 8
    log = _debug_blocks(tmp_path, "gui")
    assert "accu_reward_method: all_match" in log or "all_match" in log
    assert (
        "Solution: <answer> Operation No Response </answer>" in log
        or "Solution: <answer> Unexpected Task Result </answer>" in log
    )


def test_multinode_demo_args_yaml(data, tiny_qwen25_dir, tmp_path):
    # om-ai-lab/VLM-R1 run_scripts/multinode_training_args.yaml, turned into flags the way multinode_training_demo.sh's
    # build_train_args does: "key: true" -> --key, "key: false" -> dropped, else --key value. The demo's torchrun
    # target (src/train.py) does not exist upstream (#319): the entry point is ours.
    out = str(tmp_path / "runs" / "multinode")
    yaml_text = "\n".join(
        [
            f"output_dir: {out}",
            f"model_name_or_path: {tiny_qwen25_dir}",
            "dataset_name: Idefics-ai2d",
            f"data_file_paths: {data['root'] / 'ai2d.jsonl'}",
            f"image_folders: {data['coco']}",
            "max_prompt_length: 1024",
            "per_device_train_batch_size: 1",
            "gradient_accumulation_steps: 2",
            "logging_steps: 1",
            "bf16: true",
            "report_to: wandb",
            "gradient_checkpointing: false",
            f"deepspeed: {ZERO3}",
            "attn_implementation: flash_attention_2",
            "max_pixels: 401408",
            f"max_steps: {MAX_STEPS}",
            "run_name: Qwen2.5-VL-3B-Idefics-V3-RSN-ai2d-500steps-multinode",
            "save_steps: 100",
            "save_total_limit: 3",
            "save_only_model: true",
            "num_generations: 8",
        ]
    )
    (tmp_path / "multinode_training_args.yaml").write_text(yaml_text + "\n")
    build = (
        'args=""; while IFS=": " read -r key value; do [[ -z "$key" ]] && continue; '
        'if [[ "$value" == "true" ]]; then args="$args --$key"; elif [[ "$value" == "false" ]]; then continue; '
        'else args="$args --$key $value"; fi; done < multinode_training_args.yaml; echo "$args"'
    )
    flags = subprocess.run(
        ["bash", "-c", build], cwd=str(tmp_path), capture_output=True, text=True, check=True
    ).stdout.split()
    assert "--bf16" in flags and "--gradient_checkpointing" not in flags
    # one node, 4 processes (TRL needs processes x per-device batch x accumulation steps to hold whole groups of 8)
    proc = _run(_torchrun(4, ["-m", "vlm_r1.grpo_jsonl", *flags]), tmp_path, "multinode")
    assert _steps(out) == MAX_STEPS
    info = _run_info(out)
    # no --beta and no --max_completion_length on this command line: upstream's defaults
    assert (info["beta"], info["loss_type"], info["max_completion_length"]) == (0.04, "grpo", 256)
    assert info["generation"]["max_new_tokens"] == 256 and info["generation"]["top_k"] == 50
    assert info["smart_resize"]["max_pixels"] == 401408
    assert info["reward_funcs"] == ["accuracy_reward", "format_reward"]
    assert "--max_prompt_length=1024 has NO effect here" in proc.stderr


def test_grpo_rec_py_command(data, tiny_qwen25_dir, tmp_path):
    # src/open-r1-multimodal/run_scripts/run_grpo_rec.sh: grpo_rec.py with a data config YAML and --image_root
    out = str(tmp_path / "output" / "rec-yaml")
    args = [
        "--deepspeed",
        ZERO3,
        "--output_dir",
        out,
        "--model_name_or_path",
        tiny_qwen25_dir,
        "--dataset_name",
        str(data["root"] / "rec.yaml"),
        "--image_root",
        data["coco"],
        "--max_prompt_length",
        "1024",
        "--num_generations",
        "8",
        "--per_device_train_batch_size",
        "1",
        "--gradient_accumulation_steps",
        "2",
        "--logging_steps",
        "1",
        "--bf16",
        "--torch_dtype",
        "bfloat16",
        "--data_seed",
        "42",
        "--report_to",
        "wandb",
        "--gradient_checkpointing",
        "false",
        "--attn_implementation",
        "flash_attention_2",
        "--num_train_epochs",
        "2",
        "--run_name",
        "rec-yaml",
        "--save_steps",
        "100",
        "--save_only_model",
        "true",
        "--max_steps",
        str(MAX_STEPS),
    ]
    # 4 processes: 4 x 1 x 2 accumulation steps = 8 completions, one whole group per optimiser step (upstream: 8 GPUs)
    proc = _run(_torchrun(4, ["-m", "vlm_r1.grpo_jsonl", *args]), tmp_path, "rec-yaml")
    assert _steps(out) == MAX_STEPS
    info = _run_info(out)
    assert info["task_type"] == "rec" and info["reward_funcs"] == ["iou_reward", "format_reward_rec"]
    assert info["num_train_rows"] == 8  # two annotation files of 4 records
    assert (info["beta"], info["max_completion_length"]) == (0.04, 256)  # no --beta on this command line
    assert "is upstream grpo_rec.py's data config: read as --data_config" in proc.stderr
    assert "dtype bfloat16 but this machine has no bf16-capable GPU: loading the model in float32" in proc.stderr


# ---- GTA1 ----------------------------------------------------------------------------------------------------------
def test_gta1_readme_command(data, tiny_qwen25_dir, tmp_path):
    # GTA1 README.md "[Custom Use] Train Your Model": src/grpo_grounding.py -> -m gui_grounding.train
    out = str(tmp_path / "grounding" / "test")
    root = data["root"]
    args = [
        "--deepspeed",
        ZERO3,
        "--output_dir",
        out,
        "--model_name_or_path",
        tiny_qwen25_dir,
        "--dataset_name",
        str(root / "preprocessing" / "inp.json"),
        "--image_root",
        str(root / "preprocessing"),
        "--max_prompt_length",
        "1024",
        "--max_completion_length",
        "128",
        "--num_generations",
        "8",
        "--per_device_train_batch_size",
        "1",
        "--freeze_vision_modules",
        "true",
        "--reward_funcs",
        "accuracy",
        "--beta",
        "0",
        "--dataloader_num_workers",
        "2",
        "--max_pixels",
        str(4096 * 2160),
        "--gradient_accumulation_steps",
        "32",
        "--logging_steps",
        "1",
        "--bf16",
        "--torch_dtype",
        "bfloat16",
        "--data_seed",
        "42",
        "--report_to",
        "tensorboard",
        "--gradient_checkpointing",
        "true",
        "--attn_implementation",
        "flash_attention_2",
        "--num_train_epochs",
        "2",
        "--run_name",
        "output/test",
        "--save_steps",
        "10",
        "--save_total_limit",
        "4",
        "--save_only_model",
        "false",
        "--max_steps",
        "1",
    ]
    proc = _run(_torchrun(2, ["-m", "gui_grounding.train", *args]), tmp_path, "gta1")
    assert _steps(out) == 1
    info = _run_info(out)
    assert info["task_type"] == "gui_grounding" and info["reward_funcs"] == ["click_reward"]
    assert (info["loss_type"], info["beta"], info["has_ref_model"]) == ("grpo", 0.0, False)
    assert info["generation"] == {
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
        "min_p": None,
        "repetition_penalty": 1.0,
        "max_new_tokens": 128,
    }
    assert info["prompt_mode"] == "non_thinking" and info["box_rounding"] == "gta1"
    assert info["global_completions_per_step"] == 64  # 2 processes x 1 x 32 accumulation steps
    assert "GTA1 reward 'accuracy' -> 'click'" in proc.stderr
