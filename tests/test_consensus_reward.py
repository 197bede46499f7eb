"""The label-free ``consensus`` reward (GUI-RCPO): exact rewards on hand-made groups, the frame mapping to original
pixels, group separation, and the cross-process gather (2 gloo processes whose rewards equal one process's)."""

from __future__ import annotations

import os

import pytest

from gui_grounding.models.consensus import MAX_SAMPLES
from gui_grounding.training.rewards import REWARDS, consensus_reward
from tests.helpers.gloo import gloo_ranks


def rows(sample_id: str, texts: list[str], answer_size=(500, 500), image_size=(1000, 1000), **columns) -> list[dict]:
    """One group's rows (one per completion), the columns the gui_grounding task writes."""
    return [
        {
            "completion": t,
            "sample_id": sample_id,
            "answer_size": list(answer_size),
            "image_size": list(image_size),
            "prompt_mode": "non_thinking",
            **columns,
        }
        for t in texts
    ]


def call(row_list: list[dict]) -> list[float]:
    """Call the reward the way TRL does (conversational completions, one list per column)."""
    columns = {key: [r[key] for r in row_list] for key in row_list[0] if key != "completion"}
    out = consensus_reward(
        prompts=[[{"role": "user", "content": f"q {r.get('sample_id')}"}] for r in row_list],
        completions=[[{"role": "assistant", "content": r["completion"]}] for r in row_list],
        completion_ids=[[1, 2, 3]] * len(row_list),
        trainer_state=None,
        **columns,
    )
    assert all(isinstance(v, float) and v in (0.0, 1.0) for v in out)
    return out


def test_registered():
    assert REWARDS["consensus"] is consensus_reward


@pytest.mark.parametrize("adapter", ["gta1", None])
def test_majority_region_pays(adapter):
    # resized 500x500 -> original 1000x1000: (100,100), (102,100), (98,102), (400,400), no answer.
    # regions: [75,125)x[75,125), [77,127)x[75,125), [73,123)x[77,127): 3 votes on [77,123)x[77,125)
    extra = {"adapter": adapter} if adapter else {}
    group = rows("a", ["(50,50)", "(51,50)", "(49,51)", "(200,200)", "garbage"], **extra)
    assert call(group) == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_targets_are_not_read():
    group = rows("a", ["(50,50)", "(51,50)", "(200,200)"], target_boxes_answer=[[190, 190, 210, 210]] * 3)
    assert call(group) == [1.0, 1.0, 0.0]


def test_interleaved_groups_vote_separately():
    a = rows("a", ["(50,50)", "(51,50)", "(49,51)", "(200,200)"])
    b = rows("b", ["(200,200)", "(50,50)", "(201,201)"])
    batch = [a[0], b[0], a[1], b[1], a[2], b[2], a[3]]
    # a: 3 near (100,100) win; b: 2 near (400,400) win. One vote over both would give b's (200,200) 0.0
    assert call(batch) == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert call(a + b) == call(a) + call(b)


def test_unparsable_completions_score_zero():
    group = rows("a", ["(50,50)", "", "(50.5,50)", "(50,50) (51,51)", "<answer>(50,50)</answer>", "(50,50)"])
    assert call(group) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]  # strict GTA1 rule: one integer pair anywhere
    assert call(rows("a", ["nothing", "at all"])) == [0.0, 0.0]
    thinking = rows("a", ["<think>x</think><answer>(50,50)</answer>", "(50,50)"], prompt_mode="thinking")
    assert call(thinking) == [1.0, 0.0]  # thinking mode reads only the <answer> block


def test_box_mode_votes_with_the_box_centre():
    group = rows("a", ["[40,40,60,60]", "[45,45,55,55]", "(50,50)"], prompt_mode="box")
    assert call(group) == [1.0, 1.0, 0.0]  # a bare point is no box answer


def test_norm1000_answers_map_to_original_pixels():
    # qwen2-vl answers on the 0-1000 grid; image 1920x1080. x: 500, 530, 531 -> 960, 1017.6, 1019.52: regions
    # [935,985), [992,1042), [994,1044): the last two hold 2 votes. In the answer frame, or with x scaled by 1.08,
    # the three would overlap away from every point, and none would pay.
    common = {"answer_size": (1000, 1000), "image_size": (1920, 1080), "adapter": "qwen2-vl"}
    assert call(rows("a", ["(500,500)", "(530,500)", "(531,500)"], **common)) == [0.0, 1.0, 1.0]
    # y: 500, 547, 548 -> 540, 590.76, 591.84: [515,565), [565,615), [566,616)
    assert call(rows("a", ["(500,500)", "(500,547)", "(500,548)"], **common)) == [0.0, 1.0, 1.0]
    # on a 1000x1000 image (the answer frame's own scale) the three regions [475,525), [505,555), [506,556) share
    # 3 votes on [506,525), which holds none of the three points: a rollout pays only when its own point lies in the
    # majority region, not when its region covers it
    square = {**common, "image_size": (1000, 1000)}
    assert call(rows("a", ["(500,500)", "(530,500)", "(531,500)"], **square)) == [0.0, 0.0, 0.0]
    assert call(rows("a", ["(500,500)", "(510,500)", "(511,500)"], **square)) == [1.0, 1.0, 1.0]  # [486,525)


def test_resized_size_when_there_is_no_answer_size():
    group = [
        {k: v for k, v in r.items() if k != "answer_size"} | {"resized_size": [500, 500]}
        for r in rows("a", ["(50,50)", "(51,50)", "(200,200)"])
    ]
    assert call(group) == [1.0, 1.0, 0.0]


def test_unusable_sizes_cast_no_vote():
    group = rows("a", ["(50,50)", "(200,200)", "(200,200)", "(200,200)"])
    group[2]["image_size"] = [0, 1000]
    group[3]["answer_size"] = [float("nan"), 500]
    # left: (100,100) and (400,400), one vote each and equal areas: the upper one wins
    assert call(group) == [1.0, 0.0, 0.0, 0.0]


def test_more_than_max_samples_in_a_group_score_zero():
    big = rows("big", ["(50,50)"] * (MAX_SAMPLES + 1))
    small = rows("small", ["(50,50)", "(51,51)"])
    assert call(big + small) == [0.0] * (MAX_SAMPLES + 1) + [1.0, 1.0]
    assert call(rows("big", ["(50,50)"] * MAX_SAMPLES)) == [1.0] * MAX_SAMPLES


def test_groups_by_prompt_without_sample_id():
    out = consensus_reward(
        prompts=["p1", "p2", "p1", "p2", "p1"],
        completions=["(50,50)", "(200,200)", "(51,50)", "(50,50)", "(200,200)"],
        answer_size=[[500, 500]] * 5,
        image_size=[[1000, 1000]] * 5,
    )
    # p1: (50,50), (51,50) agree; p2: (200,200) vs (50,50), one vote each: the upper one, (50,50), wins
    assert out == [1.0, 0.0, 1.0, 1.0, 0.0]


def test_configuration_errors_raise():
    with pytest.raises(ValueError, match="image_size"):
        consensus_reward(completions=["(1,1)"], prompts=["p"], answer_size=[[10, 10]])
    with pytest.raises(ValueError, match="sample_id"):
        consensus_reward(completions=["(1,1)"], image_size=[[10, 10]], answer_size=[[10, 10]])
    with pytest.raises(ValueError):
        call(rows("a", ["(1,1)"], prompt_mode="nope"))
    with pytest.raises(ValueError):
        consensus_reward(
            completions=["(1,1)", "(2,2)"], prompts=["p"], image_size=[[10, 10]] * 2, answer_size=[[10, 10]] * 2
        )


# --------------------------------------------------------------------------------------------------------------------
# two processes: a group split across ranks is gathered and voted whole


def _two_group_batch() -> tuple[list[dict], list[tuple[int, int]]]:
    """16 rows: group x (8) split 3/5 and group y (8) split 5/3 across two ranks; each rank's local majority differs
    from the whole group's, so a vote without the gather gives other rewards."""
    near, far = ["(50,50)", "(51,50)", "(50,51)", "(49,50)", "(50,49)"], ["(200,200)", "(201,200)", "(200,201)"]
    x = rows("x", near[:3] + near[3:] + far)  # rank 0: 3 near; rank 1: 2 near + 3 far -> 5 near win
    y = rows("y", far + ["(400,10)", "no answer"] + ["(400,11)", "(399,10)", "(400,9)"])
    # rank 0: 3 far + 1 near (400,10) + an unparsable one; rank 1: 3 near (400,10) -> 4 near win
    batch = x[:3] + y[:5] + x[3:] + y[5:]
    return batch, [(0, 8), (8, 16)]


def _rank_body(rank: int) -> tuple:
    """On each of 2 gloo ranks: the rewards of this rank's slice, and the error of a call whose rows are broken on
    rank 1 only."""
    batch, slices = _two_group_batch()
    lo, hi = slices[rank]
    mine = batch[lo:hi]
    rewards = call(mine)
    if rank == 1:  # a configuration error on one rank is raised on both, after the gather: nobody hangs
        mine = [{**r, "prompt_mode": "nope"} for r in mine]
    try:
        call(mine)
        error = None
    except ValueError as err:
        error = str(err)
    return rewards, error


def test_two_processes_gather_split_groups(tmp_path):
    batch, slices = _two_group_batch()
    whole = call(batch)
    # x: 5 near (100,100) win, 3 far lose; y: (800,20), (800,22), (798,20), (800,18) win, 3 far and "no answer" lose
    assert whole == [1.0] * 3 + [0.0, 0.0, 0.0, 1.0, 0.0] + [1.0, 1.0, 0.0, 0.0, 0.0] + [1.0, 1.0, 1.0]
    # without the gather each rank would vote on its own slice and disagree
    assert call(batch[:8]) + call(batch[8:]) != whole

    results, exit_codes = gloo_ranks(_rank_body, tmp_path)
    assert exit_codes == [0, 0]
    for rank, (lo, hi) in enumerate(slices):
        assert results[rank][0] == whole[lo:hi]
    assert "nope" in results[1][1]
    assert results[0][1].startswith("reward 'consensus' failed on process 1")


@pytest.mark.slow
def test_torchrun_grpo_with_groups_split_across_two_processes(tiny_qwen25_dir, tmp_path):
    """The reward's gather under real TRL: 2 processes, 6 completions each, groups of 4 (3 groups over 12 rows, so
    group 2 is split 2/2 across the processes); the run finishes (no process left waiting in the collective) and logs
    the consensus reward every step."""
    import json

    from tests.helpers.paths import REPO
    from tests.helpers.proc import child_env, run
    from tests.test_train_pipeline import _grpo_args

    data = tmp_path / "train.jsonl"
    with open(os.path.join(REPO, "data", "web_sample", "train.jsonl"), encoding="utf-8") as f:
        data.write_text("".join([line for line in f if line.strip()][:6]))
    out = str(tmp_path / "ddp")
    args = _grpo_args(
        tiny_qwen25_dir,
        str(data),
        out,
        2,
        extra=[
            "--reward_funcs",
            "consensus",
            "click",
            "--reward_weights",
            "1",
            "0",
            "--per_device_train_batch_size",
            "6",
            "--num_generations",
            "4",
            "--save_strategy",
            "no",
        ],
    )
    run(["bash", "run_scripts/train_grpo.sh", *args], env=child_env(NPROC_PER_NODE=2))
    with open(os.path.join(out, "vlm_r1_run.json")) as f:
        info = json.load(f)
    assert info["world_size"] == 2 and info["global_completions_per_step"] == 12
    with open(os.path.join(out, "logs.jsonl")) as f:
        steps = [json.loads(line) for line in f if '"rewards/consensus_reward/mean"' in line]
    assert [s["step"] for s in steps] == [1, 2]
