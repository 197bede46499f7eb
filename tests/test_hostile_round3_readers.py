"""Hostile input, round 3 (issue 28): the reader classes.

1. Duplicate keys: every JSON record reader (``groundwork.records.iter_records``, ``strict_loads``, ``lax_loads``) and every
   side-file reader (``load_json_file``, ``load_yaml_file``: data_config, recipe ``--config``, calibration, DeepSpeed
   JSON, run info, metrics.json) refuses an object holding a key twice, at any depth, naming the key (per record: a
   ``duplicate_key`` reject, its neighbours read).
2. Side files go through the regular-file rule (``groundwork.records.read_side_file``): a FIFO, ``/dev/zero``, a folder, a
   symlink to ``/dev/zero`` and a huge sparse file are one clear error, at once (a thread join is the hang detector).
3. Reader bypasses: the predictions resume, ``compare``'s scores.jsonl and ``convert``'s front end read through
   ``iter_records``.
"""

from __future__ import annotations

import json
import os
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from groundwork.records import (
    DuplicateKeyError,
    RecordError,
    iter_records,
    lax_loads,
    load_json_file,
    load_yaml_file,
    read_side_file,
    strict_loads,
)
from groundwork.validate import short_repr
from vlm_r1.data import load_data_config

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------------------------------------------------
# 1. duplicate keys


def _nested(i: int, depth: int) -> str:
    """A record's JSON text: {"id": i, "v": {"n1": {"n2": ... {"leaf": i}}}} nested ``depth`` levels."""
    inner = f'{{"leaf": {i}}}'
    for level in range(depth, 0, -1):
        inner = f'{{"n{level}": {inner}}}'
    return f'{{"id": {i}, "v": {inner}}}'


def _with_duplicate(i: int, depth: int, at: int, key: str) -> str:
    """:func:`_nested` with ``key`` given twice in the object at level ``at`` (0: the record itself)."""
    pair = f"{json.dumps(key)}: 1, {json.dumps(key)}: 2, "
    inner = f'{{{pair if at == depth + 1 else ""}"leaf": {i}}}'
    for level in range(depth, 0, -1):
        inner = f'{{{pair if at == level else ""}"n{level}": {inner}}}'
    return f'{{{pair if at == 0 else ""}"id": {i}, "v": {inner}}}'


_KEYS = st.text(min_size=1, max_size=12).map(lambda k: "x_" + k)
_RECORDS = st.lists(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 5), _KEYS), min_size=1, max_size=12)


@FAST
@given(records=_RECORDS, framing=st.sampled_from(["jsonl", "list", "crlf"]))
def test_a_key_twice_at_any_depth_is_one_reject_naming_it_and_neighbours_are_read(tmp_path, records, framing):
    texts, expected = [], []
    for i, (bad, depth, at, key) in enumerate(records):
        if bad:
            texts.append(_with_duplicate(i, depth, min(at, depth + 1), key))
            expected.append(("duplicate_key", key))
        else:
            texts.append(_nested(i, depth))
            expected.append(json.loads(texts[-1]))
    if framing == "list":
        path, body = tmp_path / "r.json", "[\n" + ",\n".join(texts) + "\n]\n"
    else:
        path, body = tmp_path / "r.jsonl", ("\r\n" if framing == "crlf" else "\n").join(texts) + "\n"
    path.write_text(body, encoding="utf-8")
    got = list(iter_records(str(path)))
    assert len(got) == len(records)  # each bad record is exactly one reject; every good one comes back, in order
    for (_, _, item), want in zip(got, expected, strict=True):
        if isinstance(want, dict):
            assert item == want
        else:
            assert isinstance(item, RecordError) and item.reason == "duplicate_key"
            assert item.message == f"invalid JSON: duplicate key {short_repr(want[1])}"
    assert [index for _, index, _ in got] == list(range(len(records)))


def test_duplicate_key_examples_strict_lax_and_pretty_printed(tmp_path):
    with pytest.raises(DuplicateKeyError, match="duplicate key 'b'"):
        strict_loads('{"a": {"b": 1, "b": 2}}')
    with pytest.raises(DuplicateKeyError, match="duplicate key 'value'"):
        lax_loads('[{"from": "gpt", "value": "a", "value": "b"}]')
    assert lax_loads('{"a": NaN}')["a"] != lax_loads('{"a": NaN}')["a"]  # lax: NaN still a float
    # a pretty-printed object holding a key twice is ONE error covering all its lines; the next record is read
    path = tmp_path / "p.json"
    path.write_text('{\n  "box": [1, 2, 3, 4],\n  "box": [5, 6, 7, 8]\n}\n{"ok": 1}\n')
    got = [
        (ref.rsplit("/", 1)[-1], x if isinstance(x, dict) else (x.reason, x.message))
        for ref, _, x in iter_records(str(path))
    ]
    assert got == [("p.json:1", ("duplicate_key", "invalid JSON: duplicate key 'box'")), ("p.json:5", {"ok": 1})]


def test_convert_and_training_loader_reject_duplicate_key_records(tmp_path):
    from PIL import Image

    from gui_grounding.data.convert import convert
    from gui_grounding.data.schema import load_samples

    Image.new("RGB", (100, 80)).save(tmp_path / "a.png")
    good = '{"image": "a.png", "bbox": [10, 10, 500, 500], "conversations": [{"from": "human", "value": "<image>x"}, {"from": "gpt", "value": ""}]}'
    bad = '{"image": "a.png", "bbox": [10, 10, 500, 500], "bbox": [0, 0, 1000, 1000], "conversations": []}'
    data = tmp_path / "d.json"
    data.write_text(f"[{good}, {bad}]")
    report = convert("gta1", [str(data)], str(tmp_path), str(tmp_path / "o.jsonl"), progress=False)
    assert (report.samples, dict(report.reasons)) == (1, {"duplicate_key": 1})
    rejects = [json.loads(line) for line in open(tmp_path / "o.rejects.jsonl")]
    assert [(r["ref"], r["reason"], r["message"]) for r in rejects] == [
        (f"{data}:[1]", "duplicate_key", "invalid JSON: duplicate key 'bbox'")
    ]
    canon = tmp_path / "c.jsonl"
    rec = {
        "sample_id": "s",
        "image_path": "a.png",
        "instruction": "x",
        "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 5, "y_max": 5},
    }
    canon.write_text(json.dumps(rec) + "\n" + json.dumps(rec)[:-1] + ', "sample_id": "t"}\n')
    samples, rep = load_samples([str(canon)])
    assert [s.sample_id for s in samples] == ["s"] and [r[1] for r in rep.rejects] == ["duplicate_key"]


@FAST
@given(depth=st.integers(0, 3), key=st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))
@example(depth=1, key="no")  # YAML reads `no` as False: the message names the key as written
@example(depth=0, key="null")
def test_yaml_side_files_refuse_a_key_twice_at_any_depth(tmp_path, depth, key):
    lines, indent = [], ""
    for level in range(depth):
        lines.append(f"{indent}n{level}:")
        indent += "  "
    lines += [f"{indent}{key}: 1", f"{indent}other: 0", f"{indent}{key}: 2"]
    path = tmp_path / "c.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DuplicateKeyError) as err:
        load_yaml_file(str(path), "--config")
    assert str(err.value) == f"--config {path}: duplicate key {key!r} (line {depth + 3})"


def test_yaml_merge_keys_still_override_and_data_config_and_recipe_name_the_key(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n")
    assert load_yaml_file(str(path), "recipe") == {"base": {"x": 1, "y": 2}, "m": {"x": 3, "y": 2}}
    (tmp_path / "a.jsonl").write_text("{}\n")
    mix = tmp_path / "mix.yaml"
    mix.write_text("datasets:\n  - json_path: a.jsonl\n    sampling_strategy: all\n    sampling_strategy: first:1\n")
    with pytest.raises(ValueError, match=r"^data_config .*mix.yaml: duplicate key 'sampling_strategy' \(line 4\)$"):
        load_data_config(str(mix))
    from vlm_r1.command_line import check_side_files

    recipe = tmp_path / "r.yaml"
    recipe.write_text("learning_rate: 1.0e-6\nnum_generations: 8\nlearning_rate: 1.0\n")
    with pytest.raises(SystemExit) as exc:
        check_side_files(["--config", str(recipe)])
    assert str(exc.value.code) == f"--config {recipe}: duplicate key 'learning_rate' (line 3)"
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 2, "stage": 3}}')
    recipe.write_text(f"deepspeed: {ds}\n")
    for argv in (["--config", str(recipe)], ["--deepspeed", str(ds)], [f"--deepspeed={ds}"]):
        with pytest.raises(SystemExit) as exc:
            check_side_files(argv)
        assert str(exc.value.code) == f"--deepspeed {ds}: invalid JSON: duplicate key 'stage'"


def test_json_side_files_refuse_a_key_twice(tmp_path):
    from groundwork.pixel_budget import recorded_budget
    from gui_grounding.ops.estimate import zero_config
    from gui_grounding.ops.memory_calibration import load_calibration

    cal = tmp_path / "cal.json"
    cal.write_text('{"activation_factor": 1.0, "activation_factor": 9.0}')
    with pytest.raises(ValueError, match=r"^calibration .*cal.json: invalid JSON: duplicate key 'activation_factor'$"):
        load_calibration(str(cal))
    with pytest.raises(ValueError, match=r"^DeepSpeed config .*cal.json: invalid JSON: duplicate key"):
        zero_config(str(cal))
    (tmp_path / "vlm_r1_run.json").write_text('{"pixel_budget": {"max_pixels": 1, "max_pixels": 2}}')
    with pytest.raises(
        ValueError, match="cannot read the recorded pixel budget: run info .*duplicate key 'max_pixels'"
    ):
        recorded_budget(str(tmp_path))


# --------------------------------------------------------------------------------------------------------------------
# 2. side files that are not regular files


def _side_targets(tmp_path) -> dict:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    os.symlink("/dev/zero", link)
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)  # 1 TiB, no block written
    return {
        "fifo": str(fifo),
        "dev_zero": "/dev/zero",
        "folder": str(tmp_path),
        "link": str(link),
        "sparse": str(sparse),
    }


def _no_hang(fn):
    """Run ``fn`` in a thread; the join timeout only detects a hang (a FIFO open that blocks), it times nothing."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            box["error"] = err

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the reader blocked"
    return box


def _readers(tmp_path):
    from gui_grounding.ops.estimate import zero_config
    from gui_grounding.ops.memory_calibration import load_calibration
    from vlm_r1.command_line import check_side_files

    return {
        "calibration": load_calibration,
        "deepspeed": zero_config,
        "json": lambda p: load_json_file(p, "side file"),
        "yaml": lambda p: load_yaml_file(p, "--config"),
        "data_config": load_data_config,
        "recipe": lambda p: check_side_files(["--config", p]),
        "deepspeed_flag": lambda p: check_side_files(["--deepspeed", p]),
    }


@pytest.mark.parametrize(
    "reader", ["calibration", "deepspeed", "json", "yaml", "data_config", "recipe", "deepspeed_flag"]
)
def test_side_files_that_are_not_regular_files_are_one_error_at_once(tmp_path, reader):
    fn = _readers(tmp_path)[reader]
    for kind, path in _side_targets(tmp_path).items():
        box = _no_hang(lambda path=path: fn(path))
        err = box.get("error")
        assert isinstance(err, (ValueError, SystemExit)), (kind, box)
        text = str(err.code if isinstance(err, SystemExit) else err)
        assert "\n" not in text and path in text, (kind, text)
        if kind == "sparse":
            assert f": {1 << 40:,} bytes, more than the " in text and "-byte limit" in text
        else:
            assert "not a regular file" in text, (kind, text)


def test_read_side_file_caps_size_and_names_bad_utf8(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * 100)
    with pytest.raises(ValueError, match=r"^x .*big.json: 102 bytes, more than the 10-byte limit$"):
        read_side_file(str(big), "x", max_bytes=10)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: \xff\n")
    with pytest.raises(ValueError, match=r"^--config .*bad.yaml: not valid UTF-8 \(byte 3\)$"):
        load_yaml_file(str(bad), "--config")
    gz = tmp_path / "c.json"
    gz.write_bytes(b"\x1f\x8b\x08\x00rest")
    with pytest.raises(ValueError, match="gzip-compressed .*not JSON text"):
        load_json_file(str(gz), "calibration")


def test_estimate_cli_refuses_dev_zero_calibration_in_one_line():
    from gui_grounding.cli import main

    with pytest.raises(SystemExit) as exc:  # the CLI's one line, exit status 1 (sys.exit of a message)
        main(["estimate", "--calibration", "/dev/zero", "--nproc-per-node", "8"])
    message = str(exc.value.code)
    assert message.startswith("gui-grounding estimate: error: ValueError: calibration /dev/zero: not a regular file")
    assert "\n" not in message


# --------------------------------------------------------------------------------------------------------------------
# 3. the reader bypasses: resume, compare, convert


def test_resume_reads_cr_only_files_drops_torn_and_duplicate_key_lines(tmp_path):
    from gui_grounding.eval.backends import prepare_resume

    path = tmp_path / "preds.jsonl"
    lines = [
        '{"sample_id": "a", "point": [1, 2], "raw_response": "x"}',
        '{"sample_id": "b", "point": [3, 4], "point": null}',  # a key twice: unreadable, predicted again
        '{"sample_id": "c", "point": null}',
    ]
    path.write_bytes(("\r".join(lines) + '\r{"sample_id": "d", "poi').encode())  # CR-only; a torn last line
    assert prepare_resume(str(path)) == {"a", "c"}
    assert path.read_text() == (
        '{"sample_id": "a", "point": [1, 2], "raw_response": "x"}\n{"sample_id": "c", "point": null}\n'
    )
    assert prepare_resume(str(path)) == {"a", "c"}  # now canonical: left as is
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    box = _no_hang(lambda: prepare_resume(str(fifo)))
    assert "not a regular file" in str(box["error"]) and str(fifo) in str(box["error"])


def test_compare_rejects_bad_scores_lines_per_line_and_goes_on(tmp_path):
    from gui_grounding.eval.compare import compare_runs, read_run

    def run(name, lines):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({"benchmark": "canonical"}))
        (folder / "scores.jsonl").write_text("\r".join(lines) + "\r")  # CR-only lines
        return str(folder)

    good = [json.dumps({"sample_id": s, "correctness": "correct", "point": [1, 2]}) for s in "abc"]
    a = read_run(run("a", good))
    b = read_run(
        run(
            "b",
            [
                good[0],
                "not json",
                '{"sample_id": "b", "correctness": "wrong", "correctness": "correct", "point": null}',
                good[2],
                json.dumps({"sample_id": "c", "correctness": "maybe", "point": None}),
            ],
        )
    )
    assert list(b["scores"]) == ["a", "c"]
    assert [(ref.rsplit(":", 1)[-1], reason) for ref, reason, _ in b["rejected"]] == [
        ("2", "unparseable_record"),
        ("3", "duplicate_key"),
        ("5", "bad_correctness"),
    ]
    doc = compare_runs(a, b, intersect=True)
    assert doc["num_samples"] == 2 and doc["rejected_lines"]["b"]["count"] == 3
    assert doc["rejected_lines"]["b"]["reasons"] == {"unparseable_record": 1, "duplicate_key": 1, "bad_correctness": 1}


def test_convert_front_end_is_the_record_reader(tmp_path):
    from gui_grounding.data.convert import iter_input

    path = tmp_path / "l.json"
    path.write_text('[{"a": 1}, {"a": 2, "a": 3}, {"b": NaN}, {"c": "\\ud800"}, 7, {"d": 4}]')
    got = [(ref, x if isinstance(x, dict) else x.reason) for ref, _, x in iter_input(str(path))]
    assert got == [(r, x if isinstance(x, dict) else x.reason) for r, _, x in iter_records(str(path))]
    assert [x for _, x in got] == [
        {"a": 1},
        "duplicate_key",
        "unparseable_record",
        {"c": "\ud800"},  # kept as read (bad_text for the converter's text check), never altered to "?"
        "unparseable_record",
        {"d": 4},
    ]


def test_a_json_list_on_one_line_is_read_in_bounded_memory(tmp_path, monkeypatch):
    import groundwork.records as data_mod

    monkeypatch.setattr(data_mod, "JSON_LIST_CHUNK_CHARS", 64)
    path = tmp_path / "one_line.json"
    recs = [{"i": i, "s": "x" * (i % 7)} for i in range(500)]
    path.write_text(json.dumps(recs))  # json.dump writes a list on one line
    sizes = []
    real_more = data_mod._Text.more

    def more(self, at_least=0):
        sizes.append(len(self.buf))
        return real_more(self, at_least)

    monkeypatch.setattr(data_mod._Text, "more", more)
    assert [x for _, _, x in data_mod.iter_records(str(path))] == recs
    assert max(sizes) < 64 * 4  # compacted inside the line: a chunk plus the current element, not the file
