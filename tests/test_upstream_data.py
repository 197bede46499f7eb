"""Upstream VLM-R1 data on our core: hostile lines in iter_records, pass-through record keys as reward columns (union
of keys, JSON text for mixed kinds, reserved names), DefaultTask reason codes, and a custom reward that receives an
extra key's per-rollout values end to end (``python -m vlm_r1.grpo_jsonl``)."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from PIL import Image

from groundwork.records import RecordError, iter_records
from tests.helpers.proc import child_env, run
from tests.helpers.records import conversation, task_script_args
from tests.helpers.train import tiny_train_argv
from vlm_r1 import data as vdata
from vlm_r1.data import json_text_columns, rows_to_dataset
from vlm_r1.modules import get_vlm_module, load_processor
from vlm_r1.upstream.tasks import DefaultTask

# --------------------------------------------------------------------------------------------------------------------
# iter_records: every hostile line is one error, its neighbours are read


def test_iter_records_hostile_jsonl_lines(tmp_path):
    path = tmp_path / "h.jsonl"
    lines = [
        b'\xef\xbb\xbf{"a": 1}',  # 1 UTF-8 byte-order mark: ignored
        b'{"b": "\xff\xfe"}',  # 2 not UTF-8
        b"[" * 100_000,  # 3 nested too deeply for the parser
        b'{"n": ' + b"9" * 5000 + b"}",  # 4 more digits than Python converts
        b"",  # blank: skipped, not counted
        b"[1, 2]",  # 6 not an object
        b'{"nan": NaN, "s": "\\ud800"}',  # 7 NaN is not JSON (strict): an error
        b'{"big": 1e999}',  # 8 beyond the float range: an error, not inf
        b'{"s": "\\ud800", "n": ' + b"9" * 400 + b"}",  # 9 legal JSON, kept (text and boxes are checked later)
        b'{"c": 3}\r',  # 10 CRLF line ending
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = list(iter_records(str(path)))
    refs = ["1", "2", "3", "4", "6", "7", "8", "9", "10"]  # a list with no object in it is one bad record
    assert [(ref, index) for ref, index, _ in out] == [(f"{path}:{n}", i) for i, n in enumerate(refs)]
    items = [item for _, _, item in out]
    assert items[0] == {"a": 1} and items[8] == {"c": 3}
    assert [item.message if isinstance(item, RecordError) else None for item in items[1:5]] == [
        "not valid UTF-8",
        "invalid JSON: nested too deeply",
        items[3].message,
        "not a JSON object",
    ]
    assert items[3].message.startswith("invalid JSON: Exceeds the limit (4300 digits)")
    assert items[5].message.startswith("invalid JSON: NaN is not a JSON value")
    assert items[6].message.startswith("invalid JSON: number 1e999 is out of range")
    assert items[7] == {"s": "\ud800", "n": int("9" * 400)}


def test_iter_records_json_files(tmp_path):
    good = tmp_path / "good.json"
    good.write_bytes(b'\xef\xbb\xbf[{"a": 1}, 5, {"b": 2}]')
    assert [(ref, i, item if isinstance(item, dict) else item.message) for ref, i, item in iter_records(str(good))] == [
        (f"{good}:[0]", 0, {"a": 1}),
        (f"{good}:[1]", 1, "not a JSON object"),
        (f"{good}:[2]", 2, {"b": 2}),
    ]
    # a list element that does not parse is one error; the elements around it are read (never a lost neighbour)
    for name, content, message in (
        ("utf.json", b'[{"a": "\xff"}]', "not valid UTF-8"),
        ("deep.json", b"[" * 100_000, "invalid JSON: nested too deeply"),
        ("bad.json", b'[{"a": 1},', "invalid JSON: empty list element"),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        out = [item for _, _, item in iter_records(str(path))]
        assert out[-1].message.startswith(message) and out[:-1] in ([], [{"a": 1}])
    # a single object that does not parse is one error named by the file
    one = tmp_path / "one.json"
    one.write_bytes(b'{"a": NaN}')
    ((ref, _, item),) = iter_records(str(one))
    assert ref == f"{one}:1" and item.message.startswith("invalid JSON: NaN")


def test_iter_records_json_list_recovers_after_a_bad_element(tmp_path):
    valid = [{"i": i, "s": 'x,]}"\\'} for i in range(5)]
    body = [
        json.dumps(valid[0]),
        '{"a": NaN}',
        json.dumps(valid[1]),
        '{"a": ' + "9" * 5000 + "}",
        json.dumps(valid[2]),
        "[" * 50_000 + "]" * 50_000,
        '{"z": [1, 2}',
        json.dumps(valid[3]),
        '{"b": 1e999}',
        json.dumps(valid[4]),
    ]
    path = tmp_path / "list.json"
    path.write_bytes(b"\xef\xbb\xbf[" + ",\n".join(body).encode() + b"]")
    out = list(iter_records(str(path)))
    assert [ref for ref, _, _ in out] == [f"{path}:[{i}]" for i in range(len(body))]
    kept = [item for _, _, item in out if isinstance(item, dict)]
    assert kept == valid  # every valid record after a bad one is read
    assert sum(isinstance(item, RecordError) for _, _, item in out) == 5  # each bad element is one error


# --------------------------------------------------------------------------------------------------------------------
# pass-through columns


@pytest.fixture
def image_dir(tmp_path):
    Image.new("RGB", (64, 48), "white").save(tmp_path / "a.png")
    return tmp_path


def _write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def test_default_task_keeps_every_extra_key_as_a_column(image_dir, tiny_qwen25_dir, caplog):
    records = [
        {"id": 1, "image": "a.png", "conversations": conversation(), "meta": {"src": "web", "w": 3}, "score": 1},
        {
            "id": "b",
            "image": "a.png",
            "conversations": conversation(),
            "meta": "plain",
            "score": 2.5,
            "only_here": [1, 2],
            "accu_reward_method": "all_match",
        },
        {
            "image": "a.png",
            "conversations": conversation(),
            "meta": None,
            "huge": 10**30,
            "problem": "not mine",
            "prompt": "x",
            "image_path": "/etc/passwd",
            "solution": "s",
            "completions": 1,
            "images": ["z.png"],
            "trainer_state": 0,
            "nested": {"a": {"b": [1]}},
        },
    ]
    path = _write(image_dir / "d.jsonl", records)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = DefaultTask().build_dataset(
            task_script_args([path], reward_method_list=["yes_no"]),
            load_processor(tiny_qwen25_dir),
            get_vlm_module(tiny_qwen25_dir),
        )
    rows = ds.with_format(None).to_list()
    assert ds.column_names == [
        "prompt",
        "image_path",
        "problem",
        "solution",
        "accu_reward_method",
        "id",
        "meta",
        "score",
        "only_here",
        "huge",
        "nested",
    ]
    # the union of the keys (upstream kept only the first line's), None where a record lacks one
    assert [r["only_here"] for r in rows] == [None, [1, 2], None]
    assert [r["score"] for r in rows] == [1.0, 2.5, None]  # Arrow: ints and floats in one column are floats
    assert [r["nested"] for r in rows] == [None, None, {"a": {"b": [1]}}]
    # mixed kinds (object / string) and a 100-bit integer: JSON text in every row, with a warning naming the key
    assert [r["meta"] for r in rows] == ['{"src": "web", "w": 3}', '"plain"', None]
    assert [r["huge"] for r in rows] == [None, None, str(10**30)]
    assert json_text_columns(ds) == ["meta", "huge"]
    assert "default: record key 'meta' holds values Arrow cannot keep in one column (dict, str;" in caplog.text
    assert "default: record key 'huge' holds values Arrow cannot keep in one column (int;" in caplog.text
    # the task's own columns win over record keys of the same name (warned once per key); accu_reward_method is the
    # one the record sets, as upstream
    assert [r["accu_reward_method"] for r in rows] == ["yes_no", "all_match", "yes_no"]
    assert rows[2]["problem"] == "q" and rows[2]["solution"] == "<answer> a </answer>"
    assert rows[2]["image_path"] == [str(image_dir / "a.png")]
    for key in ("completions", "image_path", "images", "problem", "prompt", "solution", "trainer_state"):
        assert f"default: record key {key!r} dropped from 1 record(s): the name is reserved" in caplog.text
    assert [r["id"] for r in rows] == ["1", "b", f"{path}:3"]
    # from image_path, not the record; resized once by the run's budget as the processor would (64x48 = 3,072 px is
    # under min_pixels 3,136: both sides round up to 56)
    assert len(ds[2]["images"]) == 1 and ds[2]["images"][0].size == (56, 56)


def test_extra_columns_are_capped(monkeypatch, caplog):
    monkeypatch.setattr(vdata, "MAX_EXTRA_COLUMNS", 3)
    log = logging.getLogger("t_cap")
    with caplog.at_level(logging.WARNING, logger="t_cap"):
        ds = rows_to_dataset([{"id": str(i)} for i in range(5)], [{f"k{i}": i} for i in range(5)], what="w", logger=log)
    assert ds.column_names == ["id", "k0", "k1", "k2"]
    assert "w: 5 distinct pass-through record keys; keeping the first 3, dropping 2 (first dropped: ['k3', 'k4'])" in (
        caplog.text
    )


@pytest.mark.parametrize(
    "record, reason, message",
    [
        ({"image": "a.png"}, "missing_key", "missing key 'conversations' (a grpo_jsonl record needs"),
        (
            {"image": "a.png", "conversations": [{"value": "q"}]},
            "unparseable_record",
            "conversations must be a list of",
        ),
        ({"image": "a.png", "conversations": "q"}, "unparseable_record", "conversations must be a list of"),
        (
            {"image": "a.png", "conversations": conversation(question=["q"])},
            "bad_question",
            "must be a string, got list",
        ),
        ({"image": 5, "conversations": conversation()}, "bad_image", "image must be a path or a list of paths, got 5"),
        (
            {"image": ["a.png", None], "conversations": conversation()},
            "bad_image",
            "image must be a path or a list of paths",
        ),
        (
            {"image": "a.png", "conversations": conversation(), "accu_reward_method": 5},
            "bad_accu_reward_method",
            "accu_reward_method must be a string, got 5",
        ),
        (
            {"image": "a.png", "conversations": conversation(question="\ud800")},
            "bad_text",
            "question is not valid Unicode",
        ),
        ({"image": "a\udcff.png", "conversations": conversation()}, "bad_text", "image is not valid Unicode"),
        ({"image": "missing.png", "conversations": conversation()}, "missing_image", "missing image"),
        ("not json", "unparseable_record", "invalid JSON"),
        ("[" * 100_000, "unparseable_record", "invalid JSON: nested too deeply"),
    ],
)
def test_default_task_bad_records_are_counted_by_reason(record, reason, message, image_dir, tiny_qwen25_dir, caplog):
    good = {"image": "a.png", "conversations": conversation()}
    path = _write(image_dir / "d.jsonl", [good, record, good])
    processor, module = load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    with caplog.at_level(logging.WARNING, logger="vlm_r1.tasks"):
        ds = DefaultTask().build_dataset(task_script_args([path]), processor, module)
    assert len(ds) == 2  # the neighbours are kept
    assert f"default: skipped records: {{'{reason}': 1}} (kept 2)" in caplog.text
    assert f"default: first {reason}: {path}:2: " in caplog.text and message in caplog.text
    with pytest.raises(ValueError, match=rf"^{path}:2: {reason}: ") as err:
        DefaultTask().build_dataset(task_script_args([path], strict_data=True), processor, module)
    assert message in str(err.value)


def test_default_task_odd_but_valid_answers_are_kept(image_dir, tiny_qwen25_dir):
    records = [
        {"image": "a.png", "conversations": conversation(answer="nan")},
        {"image": "a.png", "conversations": conversation(answer=10**400)},
        {"image": [], "conversations": conversation(question="text only")},
        {"conversations": conversation(question="no image key"), "accu_reward_method": None},
    ]
    path = _write(image_dir / "d.jsonl", records)
    with open(path, "a") as f:  # NaN is not JSON: this line is skipped (strict JSON), its neighbours are kept
        f.write('{"image": "a.png", "conversations": [{"value": "q"}, {"value": NaN}]}\n')
    ds = DefaultTask().build_dataset(
        task_script_args([path]), load_processor(tiny_qwen25_dir), get_vlm_module(tiny_qwen25_dir)
    )
    rows = ds.with_format(None).to_list()
    assert len(rows) == 4
    assert [r["solution"] for r in rows[:2]] == ["<answer> nan </answer>", f"<answer> {10**400} </answer>"]  # str()
    assert [r["image_path"] for r in rows[2:]] == [[], []]
    assert rows[3]["accu_reward_method"] == "default"  # null counts as absent


# --------------------------------------------------------------------------------------------------------------------
# end to end: a module:function reward receives the extra key's per-rollout values

SPY = """
import json, os


def spy(completions, **kwargs):
    with open(os.environ["SPY_OUT"], "a") as f:
        f.write(json.dumps({k: kwargs[k] for k in ("id", "meta", "note", "accu_reward_method")}) + "\\n")
    return [0.0] * len(completions)
"""


@pytest.mark.slow  # ~13 s: a CLI training run
def test_custom_reward_receives_extra_columns_end_to_end(image_dir, tiny_qwen25_dir, tmp_path):
    records = [
        {
            "id": "r0",
            "image": "a.png",
            "conversations": conversation("<image>What?", "A"),
            "meta": {"k": 1},
            "note": "x",
        },
        {"id": "r1", "image": "a.png", "conversations": conversation("<image>Why?", "B"), "meta": "text"},
    ]
    path = _write(image_dir / "d.jsonl", records)
    (tmp_path / "spy_rewards.py").write_text(SPY)
    out, spy_out = str(tmp_path / "run"), str(tmp_path / "spy.jsonl")
    spy = dict(task_type=None, image_folders=str(image_dir), reward_funcs="spy_rewards:spy", num_generations=4)
    own = dict(per_device_train_batch_size=4, max_completion_length=4, freeze_vision_modules=None)
    cmd = [sys.executable, "-m", "vlm_r1.grpo_jsonl", *tiny_train_argv(tiny_qwen25_dir, path, out, **spy, **own)]
    env = child_env(threads=1, pythonpath=[tmp_path], SPY_OUT=spy_out)
    proc = run(cmd, env=env)
    assert "record key 'meta' holds values Arrow cannot keep in one column (dict, str;" in proc.stderr
    with open(spy_out) as f:
        calls = [json.loads(line) for line in f]
    assert len(calls) == 2  # one reward call per step, 4 rollouts of one prompt each
    expected = {"r0": ('{"k": 1}', "x"), "r1": ('"text"', None)}
    for call in calls:
        assert len(call["id"]) == 4 and len(set(call["id"])) == 1  # the 4 rollouts of one record
        rid = call["id"][0]
        assert call["meta"] == [expected[rid][0]] * 4 and call["note"] == [expected[rid][1]] * 4
        assert call["accu_reward_method"] == ["default"] * 4
