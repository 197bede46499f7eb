"""The core stays GUI-agnostic and thin (issue 13): ``vlm_r1`` never imports the ``gui_grounding`` plugin, and no core
call site uses upstream's compatibility methods (``UpstreamModuleMixin``), which exist only so upstream module
subclasses instantiate."""

from __future__ import annotations

import ast
import os

from vlm_r1.modules.base import UpstreamModuleMixin, VLMBaseModule

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(REPO, "vlm_r1")


def _core_files():
    for root, _, files in os.walk(CORE):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def test_core_never_imports_the_plugin():
    offenders = []
    for path in _core_files():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{os.path.relpath(path, REPO)}:{node.lineno}" for n in names
                          if n == "gui_grounding" or n.startswith("gui_grounding.")]  # fmt: skip
    assert offenders == []


def test_compat_methods_are_never_called_by_the_core():
    compat = {n for n in vars(UpstreamModuleMixin) if not n.startswith("_")}
    assert compat == {"get_vlm_key", "is_embeds_input", "get_custom_multimodal_keywords", "get_non_generate_params",
                      "prepare_prompt", "get_eos_token_id"}  # fmt: skip
    calls = []
    for path in _core_files():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in compat:
                calls.append(f"{os.path.relpath(path, REPO)}:{node.lineno} {node.func.attr}")
    assert calls == []
    # the abstract surface a family must implement is three methods
    assert VLMBaseModule.__abstractmethods__ == {"get_model_class", "get_vision_modules_keywords",
                                                 "prepare_model_inputs"}  # fmt: skip


def test_upstream_style_module_still_instantiates():
    class Minimal(VLMBaseModule):
        model_types = ("toy_vl",)

        def get_model_class(self, model_id, model_init_kwargs):
            return object

        def get_vision_modules_keywords(self):
            return ["visual"]

        def prepare_model_inputs(self, processing_class, prompts_text, images, **kwargs):
            return {}, []

    m = Minimal()
    assert (m.get_vlm_key(), m.is_embeds_input(), m.get_custom_multimodal_keywords(), m.get_non_generate_params()) == (
        "toy_vl", False, [], [])  # fmt: skip
    assert m.shared_prompt_positions_fn(None) is None and m.get_custom_processing_keywords() == []
