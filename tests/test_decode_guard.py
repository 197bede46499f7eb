"""The 64 Mpx decode guard has its own name (issue 19): ``groundwork.validate.DECODE_PIXEL_LIMIT``,
``ImageChecker(max_image_pixels=...)`` and ``gui-grounding convert --max-image-pixels N``; the old flag ``--max-pixels``
still works for one release and logs a one-line deprecation warning. It is unrelated to the model's smart_resize
``max_pixels`` (``groundwork.pixel_budget``).
"""

from __future__ import annotations

import json
import logging

import pytest

from groundwork import validate
from gui_grounding.cli import main

DEPRECATION = (
    "convert: --max-pixels is deprecated: use --max-image-pixels (the decode guard on the original image; the "
    "model's smart_resize max_pixels is a training/eval flag)"
)


def test_decode_pixel_limit_is_64_mpx_and_the_old_name_is_gone():
    assert validate.DECODE_PIXEL_LIMIT == 64_000_000
    assert not hasattr(validate, "DEFAULT_MAX_PIXELS")
    assert validate.ImageChecker("header").max_image_pixels == 64_000_000


@pytest.mark.parametrize("flag", ["--max-image-pixels", "--max-pixels"])
@pytest.mark.parametrize("limit, reasons", [(3071, {"image_too_large": 1}), (3072, {})])
def test_convert_decode_guard_flag(tmp_path, make_image, caplog, flag, limit, reasons):
    make_image(64, 48, "a.png", folder=tmp_path / "root")  # 3072 pixels: rejected above, kept at exactly N
    data = tmp_path / "d.jsonl"
    rec = {
        "instruction": "click",
        "image_path": "a.png",
        "target_bbox": {"x_min": 1, "y_min": 1, "x_max": 5, "y_max": 5},
    }
    data.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "o.jsonl"
    with caplog.at_level(logging.WARNING, logger="gui_grounding.data.convert"):
        main(
            [
                "convert",
                "--format",
                "canonical",
                str(data),
                "--image-root",
                str(tmp_path / "root"),
                "--out",
                str(out),
                "--verify-images",
                "header",
                flag,
                str(limit),
            ]
        )
    summary = json.loads((tmp_path / "o.summary.json").read_text())
    assert (summary["max_image_pixels"], summary["reasons"], summary["samples"]) == (limit, reasons, 1 - len(reasons))
    assert "max_pixels" not in summary
    rejects = [json.loads(x) for x in (tmp_path / "o.rejects.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejects] == list(reasons)
    if reasons:
        assert rejects[0]["message"].endswith("over the limit of 3071")
    warnings = [r.getMessage() for r in caplog.records if r.name == "gui_grounding.data.convert"]
    assert warnings == ([DEPRECATION] if flag == "--max-pixels" else [])


def test_convert_help_names_the_decode_guard_and_marks_the_old_flag_deprecated(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["convert", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--max-image-pixels N, --max-pixels N decode guard: reject an image whose header declares more than N" in text
    )
    assert "Not the model's smart_resize max_pixels. --max-pixels is its deprecated old name" in text
