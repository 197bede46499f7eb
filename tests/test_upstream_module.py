"""A VLM module written for upstream VLM-R1 (only its eight abstract methods, ``__init__(self)``), registered through
the ``vlm_r1.modules`` entry-point group, is found and instantiates; the methods we added have working defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.helpers.paths import REPO

# Upstream-style module (omm/src/open_r1/vlm_modules/vlm_module.py interface), written here from the interface only.
PLUGIN = textwrap.dedent("""
    from transformers import Qwen2_5_VLForConditionalGeneration, AutoProcessor
    from vlm_r1.modules import VLMBaseModule

    class UpstreamStyleQwenModule(VLMBaseModule):
        def __init__(self):
            super().__init__()

        def get_vlm_key(self):
            return "qwen"

        def get_model_class(self, model_id, model_init_kwargs):
            return Qwen2_5_VLForConditionalGeneration

        def get_processing_class(self):
            return AutoProcessor

        def get_vision_modules_keywords(self):
            return ["visual"]

        def get_custom_multimodal_keywords(self):
            return ["pixel_values", "image_grid_thw"]

        def get_non_generate_params(self):
            return []

        def get_custom_processing_keywords(self):
            return [("image_processor", "max_pixels"), ("image_processor", "min_pixels")]

        def prepare_prompt(self, processing_class, inputs):
            return [processing_class.apply_chat_template(x["prompt"], tokenize=False, add_generation_prompt=True)
                    for x in inputs]

        def prepare_model_inputs(self, processing_class, prompts_text, images, return_tensors="pt", padding=True,
                                 padding_side="left", add_special_tokens=False):
            batch = processing_class(text=prompts_text, images=images, return_tensors=return_tensors,
                                     padding=padding, padding_side=padding_side,
                                     add_special_tokens=add_special_tokens)
            return batch, []
""")


def test_upstream_module_subclass_registered_by_entry_point(tmp_path, tiny_qwen25_dir):
    site = tmp_path / "site"
    (site / "upstream_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "upstream_plugin.py").write_text(PLUGIN)
    (site / "upstream_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: upstream-plugin\nVersion: 0.1\n"
    )
    (site / "upstream_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[vlm_r1.modules]\nqwen2_5_vl = upstream_plugin:UpstreamStyleQwenModule\n"
    )
    code = textwrap.dedent(f"""
        import json
        from vlm_r1.modules import get_vlm_module
        from vlm_r1.modules.qwen import Qwen2VLModule
        m = get_vlm_module({tiny_qwen25_dir!r})
        # the plugin's own processor class (AutoProcessor) needs torchvision, absent on CPU: load with the built-in
        proc = Qwen2VLModule("qwen2_5_vl").load_processor({tiny_qwen25_dir!r}, max_pixels=100352)
        print(json.dumps({{"cls": type(m).__name__, "model_type": m.model_type, "key": m.get_vlm_key(),
                          "resize": list(m.get_image_resize_params(proc)),
                          "banned": m.get_banned_token_ids(proc),
                          "image_pad": proc.tokenizer.convert_tokens_to_ids("<|image_pad|>"),
                          "template": m.get_question_template("rec"), "embeds": m.is_embeds_input(),
                          "post_init": m.post_model_init(None, proc),
                          "shared_prompt_hook": m.shared_prompt_positions_fn(None) is not None}}))
    """)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cls"] == "UpstreamStyleQwenModule"
    assert out["model_type"] == "qwen2_5_vl"
    assert out["key"] == "qwen"
    assert out["resize"] == [28, 3136, 100352]
    assert out["banned"] == [out["image_pad"]]
    assert out["template"] == "{Question}"
    assert out["embeds"] is False and out["post_init"] is None
    # no shared-prompt hook by default: --shared_prompt true then runs naive and says so (vlm_r1/shared_prompt_trainer)
    assert out["shared_prompt_hook"] is False
