"""``--use_vllm`` against vLLM 0.30.0's interface, on CPU, with a fake ``vllm`` (``tests/fakes/vllm``: the real
signatures, deterministic completions, a record of every call).

TRL's own vLLM code runs unchanged (``trl/generation/vllm_generation.py``, ``vllm_client.py``, re-imported with the fake
importable so TRL's ``if is_vllm_available(): from vllm import ...`` lines bind the fake). Colocate mode: TRL builds
``vllm.LLM`` and calls ``generate``. Server mode: TRL's ``VLLMClient`` talks to a fake server through a fake
``requests`` (its HTTP layer); only ``VLLMClient.init_communicator`` is replaced, because it refuses a non-CUDA device
before the NCCL rendezvous (``trl/generation/vllm_client.py:756-760``). Not run: a real vLLM, a GPU.

Pinned: the ``gpu`` extra's vLLM is one TRL accepts; the image token banned in vLLM's terms resolves to exactly the id
HF's ``bad_words_ids`` bans, and the completions lose it (they keep it without the ban); each rollout's images arrive
at the run's budget (``PixelBudget.size_sent``) with as many image tokens as vLLM computes for them; colocate sends G
copies with ``n=1`` and server one request per unique prompt with ``n=G`` (as ``vlm_r1.shared_prompt_trainer``
documents); weight sync names every parameter; a run whose budget vLLM would undo is refused at start-up.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import warnings
from types import SimpleNamespace

import pytest

from tests.helpers.paths import REPO

FAKES = os.path.join(REPO, "tests", "fakes")
#: TRL modules whose module-level ``if is_vllm_available(): from vllm ...`` must see the fake (imported in this order)
TRL_VLLM_MODULES = ("trl.generation.vllm_client", "trl.generation.vllm_generation")
#: the run's budget in these tests (the tiny checkpoint's processor allows 3136..200704)
MAX_PIXELS = 100352
ORIGINAL_SIZES = [(1280, 720), (600, 1000)]


@contextlib.contextmanager
def fake_vllm():
    """The fake ``vllm`` importable (``tests/fakes`` APPENDED to ``sys.path``: a real install would win, and then the
    test is skipped), TRL's vLLM modules re-imported against it; everything put back afterwards."""
    if "vllm" in sys.modules or importlib.util.find_spec("vllm") is not None:
        pytest.skip("a real vllm is importable: the fake is only used where none is")
    saved_env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    saved_path = list(sys.path)
    modules = [importlib.import_module(name) for name in TRL_VLLM_MODULES]
    saved_dicts = [dict(m.__dict__) for m in modules]
    sys.path.append(FAKES)
    try:
        import vllm

        assert vllm.__file__.startswith(FAKES + os.sep), vllm.__file__
        for module in modules:
            importlib.reload(module)
        vllm._fake.reset()
        yield vllm
    finally:
        for module, saved in zip(modules, saved_dicts, strict=True):
            module.__dict__.clear()
            module.__dict__.update(saved)
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]
        sys.path[:] = saved_path
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def fake():
    with fake_vllm() as vllm:
        yield vllm


# ---- the pin -----------------------------------------------------------------------------------------------------
def test_gpu_extra_pins_a_vllm_trl_accepts(fake):
    """setup.py's ``gpu`` extra pins the vLLM the fake mirrors; TRL 1.16.0 accepts it without its range warning
    (``trl/import_utils.py:101-115``: 0.22.0 <= version <= 0.31.0), and would warn for the version ``vllm>=0.11``
    resolved to (0.33.0)."""
    import ast

    from packaging.specifiers import SpecifierSet
    from trl.import_utils import is_vllm_available

    tree = ast.parse(open(os.path.join(REPO, "setup.py"), encoding="utf-8").read())
    extras = next(
        ast.literal_eval(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXTRAS"
    )
    (spec,) = [r for r in extras["gpu"] if r.startswith("vllm")]
    assert spec == "vllm==0.30.0" and fake.__version__ == "0.30.0"
    allowed = SpecifierSet(spec.removeprefix("vllm"))
    assert [v for v in ("0.21.0", "0.22.0", "0.30.0", "0.31.0", "0.33.0") if v in allowed] == ["0.30.0"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert is_vllm_available() is True
    fake.__version__ = "0.33.0"
    with pytest.warns(UserWarning, match="from 0.22.0 to 0.31.0"):
        is_vllm_available()


def test_fake_leaves_nothing_behind():
    """After the context the fake is gone: no ``vllm`` module, ``tests/fakes`` off the path, TRL's module back to its
    own import-time state."""
    import trl.generation.vllm_generation as gen

    before = set(gen.__dict__)
    with fake_vllm() as vllm:
        assert sys.path[-1] == FAKES and "LLM" in gen.__dict__ and gen.LLM is vllm.LLM
    assert "vllm" not in sys.modules and FAKES not in sys.path and set(gen.__dict__) == before


# ---- the ban, in vLLM's terms ------------------------------------------------------------------------------------
def test_ban_resolves_to_the_image_token_as_hf_bans_it(fake, tiny_qwen25_dir):
    """``--ban_vision_tokens`` with ``--use_vllm``: ``bad_words=["<|image_pad|>"]``, which vLLM's tokenization rule
    (the fake's ``update_from_tokenizer``) turns into ``[[image_token_id]]``: the ``bad_words_ids`` HF generation gets."""
    from vlm_r1.modules import get_vlm_module
    from vlm_r1.trainer import banned_generation_kwargs

    module = get_vlm_module(tiny_qwen25_dir)
    processor = module.load_processor(tiny_qwen25_dir)
    hf = banned_generation_kwargs(SimpleNamespace(generation_kwargs=None, use_vllm=False), module, processor)
    gen = banned_generation_kwargs(SimpleNamespace(generation_kwargs={"seed": 3}, use_vllm=True), module, processor)
    assert gen == {"seed": 3, "bad_words": ["<|image_pad|>"]}
    params = fake.SamplingParams(**gen)
    params.update_from_tokenizer(processor.tokenizer)
    assert params.bad_words_token_ids == hf["bad_words_ids"] == [[processor.image_token_id]] == [[12]]


def test_ban_refused_when_vllm_would_ban_another_sequence():
    from vlm_r1.vllm_rollouts import vllm_bad_words

    class SplitsSpecials:  # a tokenizer that does not keep the token whole
        def convert_ids_to_tokens(self, ids):
            return ["<img>" for _ in ids]

        def encode(self, text, add_special_tokens=False):
            return [1, 2, 3]

    with pytest.raises(ValueError, match=r"token 7 \('<img>'\) encodes to \[1, 2, 3\], not \[7\]"):
        vllm_bad_words(SplitsSpecials(), [7])


# ---- TRL's generation paths against the fake ---------------------------------------------------------------------
def _rollout_inputs(model_dir, G):
    """The tiny checkpoint, its processor at the run's budget, and TRL's generation inputs: two screenshots of
    ORIGINAL_SIZES resized as the data transform resizes them, each prompt G times (TRL's RepeatSampler order)."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText

    from groundwork import pixel_budget
    from vlm_r1.modules import get_vlm_module

    module = get_vlm_module(model_dir)
    processor = module.load_processor(model_dir)
    budget = pixel_budget.resolve(
        [("test", {"max_pixels": MAX_PIXELS}), ("checkpoint", module.processor_budget(processor))],
        limits=module.image_limits(),
    )
    budget.apply(processor, module)
    images = [pixel_budget.resize_for_model(Image.new("RGB", size, (40, 90, 200)), budget) for size in ORIGINAL_SIZES]
    prompts = []
    for n, image in enumerate(images):
        messages = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": f"q{n}"}]}]
        ids = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        prompts.append(list(ids["input_ids"][0]))
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32)
    rows = [i for i in range(len(prompts)) for _ in range(G)]
    return module, processor, budget, model, [prompts[i] for i in rows], [[images[i]] for i in rows]


def _generation(model, processor, mode, generation_kwargs, **kwargs):
    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration

    return VLLMGeneration(
        model=model,
        accelerator=Accelerator(cpu=True),
        processing_class=processor,
        mode=mode,
        max_completion_length=8,
        logprobs=0,
        generation_kwargs=generation_kwargs,
        **kwargs,
    )


def test_colocate_rollouts(fake, tiny_qwen25_dir):
    """Colocate mode through TRL: the LLM TRL builds, G copies with ``n=1``, each with its image at the run's budget
    (and as many image tokens as vLLM computes for it), the ban applied, the weights synced by name."""
    from vlm_r1.trainer import banned_generation_kwargs

    G = 2
    module, processor, budget, model, prompt_ids, images = _rollout_inputs(tiny_qwen25_dir, G)
    gen_kwargs = banned_generation_kwargs(SimpleNamespace(generation_kwargs=None, use_vllm=True), module, processor)
    generation = _generation(model, processor, "colocate", gen_kwargs)
    (init,) = fake._fake.RECORD["inits"]
    assert init["model"] == model.name_or_path == tiny_qwen25_dir
    assert (init["distributed_executor_backend"], init["logprobs_mode"], init["max_num_batched_tokens"]) == (
        "external_launcher",
        "processed_logprobs",
        4096,
    )
    assert init["mm_processor_kwargs"] is None  # TRL passes none: the checkpoint's processor decides (see below)

    generation.sync_weights()
    assert [name for name, _ in fake._fake.RECORD["weights"]] == [name for name, _ in model.named_parameters()]

    got_prompts, completions, logprobs, _ = generation.generate(prompt_ids, images, num_generations=G)
    (call,) = fake._fake.RECORD["generate"]
    sent = [budget.size_sent(*size) for size in ORIGINAL_SIZES]
    assert sent == [(420, 224), (224, 392)]
    assert [r["image_sizes"] for r in call["requests"]] == [[sent[0]], [sent[0]], [sent[1]], [sent[1]]]
    assert [r["prompt_token_ids"] for r in call["requests"]] == prompt_ids == got_prompts
    assert [(r["params"].n, r["params"].max_tokens, r["params"].logprobs) for r in call["requests"]] == [(1, 8, 0)] * 4
    assert {tuple(r["params"].bad_words) for r in call["requests"]} == {("<|image_pad|>",)}
    image_id = processor.image_token_id
    assert len(completions) == 4 and all(image_id not in c for c in completions)
    assert [len(lp) for lp in logprobs] == [len(c) for c in completions]

    # without the ban the fake "model" emits the image token first: the ban above is what removed it
    fake._fake.reset()
    _, unbanned, _, _ = _generation(model, processor, "colocate", {}).generate(prompt_ids, images, num_generations=G)
    assert [c[0] for c in unbanned] == [image_id] * 4
    assert [c[1:] for c in unbanned] == [c[:-1] for c in completions]  # 8 tokens: the banned run reaches EOS
    assert [c[-1] for c in completions] == [processor.tokenizer.eos_token_id] * 4


def test_vllm_counts_image_tokens_from_the_image_size(fake, tiny_qwen25_dir):
    """The fake refuses a prompt whose image-token run is not what vLLM computes for the image it is given: the
    original 1280x720 screenshot (vLLM would resize it to the checkpoint's 200704 bound) with a prompt built at the
    run's 100352 budget."""
    from PIL import Image

    _, processor, _, model, prompt_ids, _ = _rollout_inputs(tiny_qwen25_dir, 1)
    generation = _generation(model, processor, "colocate", {})
    original = Image.new("RGB", ORIGINAL_SIZES[0])
    with pytest.raises(ValueError, match=r"runs \[120\] do not match .* vLLM expects \[252\] tokens"):
        generation.generate(prompt_ids[:1], [[original]], num_generations=1)


def serve_fake(monkeypatch, model_dir, max_pixels):
    """A fake ``vllm serve MODEL --mm-processor-kwargs '{"min_pixels": 3136, "max_pixels": MAX}'`` behind TRL's
    ``VLLMClient`` (its ``requests`` replaced); ``init_communicator`` stubbed: TRL's refuses a CPU device before the
    NCCL rendezvous (``trl/generation/vllm_client.py:756-760``)."""
    import trl.generation.vllm_client as client_module
    from vllm._fake_http import FakeServer

    server = FakeServer(model_dir, mm_processor_kwargs={"min_pixels": 3136, "max_pixels": max_pixels})
    monkeypatch.setattr(client_module, "requests", server.requests_module())

    def init_communicator(self, device=0):
        from vllm.distributed.weight_transfer.nccl_common import trainer_init

        info = {"master_address": "127.0.0.1", "master_port": self.group_port, "rank_offset": 1, "world_size": 2}
        self._post(f"{self.base_url}/init_weight_transfer_engine", json={"init_info": info})
        self.communicator = trainer_init(info)

    monkeypatch.setattr(client_module.VLLMClient, "init_communicator", init_communicator)
    return server


def test_server_rollouts(fake, tiny_qwen25_dir, monkeypatch):
    """Server mode through TRL's ``VLLMClient`` and a fake ``vllm serve`` started with the run's bounds: each unique
    prompt rendered and generated once with ``n=G`` and the ban, images at the run's budget, completions back in
    TRL's row order, weights streamed by name."""
    from vlm_r1.trainer import banned_generation_kwargs

    G = 3
    module, processor, budget, model, prompt_ids, images = _rollout_inputs(tiny_qwen25_dir, G)
    serve_fake(monkeypatch, tiny_qwen25_dir, MAX_PIXELS)
    gen_kwargs = banned_generation_kwargs(SimpleNamespace(generation_kwargs=None, use_vllm=True), module, processor)
    generation = _generation(model, processor, "server", gen_kwargs, server_base_url="http://fake-vllm:8000")
    fake._fake.RECORD["http"].clear()

    generation.sync_weights()
    http = fake._fake.RECORD["http"]
    assert [(m, p) for m, p, _ in http] == [
        ("POST", "/start_weight_update"),
        ("POST", "/update_weights"),
        ("POST", "/finish_weight_update"),
        ("POST", "/reset_prefix_cache"),
    ]
    names = [name for name, _ in model.named_parameters()]
    assert http[1][2]["update_info"]["names"] == names
    assert [name for name, _ in fake._fake.RECORD["weights"]] == names

    http.clear()
    got_prompts, completions, _, _ = generation.generate(prompt_ids, images, num_generations=G)
    # TRL's client sends the requests of one stage from a thread pool (trl/generation/vllm_client.py:492,612): the
    # order in which they arrive is not fixed, so each is matched to its prompt
    paths = [p for _, p, _ in http]
    assert paths == ["/v1/chat/completions/render"] * 2 + ["/inference/v1/generate"] * 2
    requests = [body for _, p, body in http if p == "/inference/v1/generate"]
    assert sorted(r["token_ids"] for r in requests) == sorted(prompt_ids[::G])
    assert [r["sampling_params"]["n"] for r in requests] == [G, G]
    assert {tuple(r["sampling_params"]["bad_words"]) for r in requests} == {("<|image_pad|>",)}
    assert requests[0]["sampling_params"]["output_kind"] == 2
    sent = [budget.size_sent(*size) for size in ORIGINAL_SIZES]
    by_prompt = {
        tuple(r["prompt_token_ids"]): r["image_sizes"] for c in fake._fake.RECORD["generate"] for r in c["requests"]
    }
    assert by_prompt == {tuple(ids): [s] for ids, s in zip(prompt_ids[::G], sent, strict=True)}
    assert got_prompts == prompt_ids and len(completions) == 2 * G
    assert all(processor.image_token_id not in c for c in completions)


# ---- start-up refusals -------------------------------------------------------------------------------------------
def test_budget_problem_rule():
    from vlm_r1.vllm_rollouts import vllm_budget_problem

    assert vllm_budget_problem((3136, 100352), (3136, 200704)) is None
    assert vllm_budget_problem((3136, 200704), (3136, 200704)) is None
    assert vllm_budget_problem((None, None), (3136, 200704)) is None  # no smart_resize frame: not checked
    assert vllm_budget_problem((3136, 401408), (3136, 200704)) == (
        "the run resizes images to 3,136..401,408 pixels but vLLM re-resizes them with the checkpoint's image "
        "processor (3,136..200,704 pixels; TRL's colocate mode passes vLLM no mm_processor_kwargs), so the prompt's "
        "image tokens would not match vLLM's"
    )
    assert vllm_budget_problem((1000, 100352), (3136, 200704)) is not None


def test_colocate_run_refused_at_start_up_when_vllm_would_resize(tiny_qwen25_dir):
    """``check_vllm_start``: a colocate run above the checkpoint's bound is refused naming the fix; the same budget in
    server mode (the server's ``--mm-processor-kwargs`` decide) and a run without vLLM pass."""
    from groundwork import pixel_budget
    from vlm_r1.modules import get_vlm_module
    from vlm_r1.vllm_rollouts import check_vllm_start

    module = get_vlm_module(tiny_qwen25_dir)
    big = pixel_budget.PixelBudget(factor=28, min_pixels=3136, max_pixels=401408)
    ok = pixel_budget.PixelBudget(factor=28, min_pixels=3136, max_pixels=MAX_PIXELS)
    args = SimpleNamespace(use_vllm=True, vllm_mode="colocate")
    if importlib.util.find_spec("vllm") is None:  # no vLLM at all: refused first, with the install line
        with pytest.raises(SystemExit, match=r"--use_vllm true needs vLLM \(GPU only\): pip install -e \.\[gpu\]"):
            check_vllm_start(args, module, tiny_qwen25_dir, ok)
    check_vllm_start(SimpleNamespace(use_vllm=False, vllm_mode="colocate"), module, tiny_qwen25_dir, big)
    with fake_vllm():
        with pytest.raises(ValueError, match=r"Use --max_pixels <= 200704 and --min_pixels >= 3136"):
            check_vllm_start(args, module, tiny_qwen25_dir, big)
        check_vllm_start(SimpleNamespace(use_vllm=True, vllm_mode="server"), module, tiny_qwen25_dir, big)
        check_vllm_start(args, module, tiny_qwen25_dir, ok)


# ---- a whole training step -----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "shared"), [("colocate", False), ("colocate", True), ("server", True)])
def test_cli_training_step(fake, tiny_qwen25_dir, tmp_path, monkeypatch, mode, shared):
    """``python -m vlm_r1.grpo_jsonl --use_vllm true --vllm_mode MODE --ban_vision_tokens true`` (in process, ~7-20 s
    each), with and without ``--shared_prompt``: one step trains on the fake's rollouts, each screenshot at the run's
    budget, the image token banned; colocate sends G copies with ``n=1``, server each unique prompt once with ``n=G``
    (``vlm_r1.shared_prompt_trainer.VLLM_NOTE``); shared prompting stays active (its log-prob passes)."""
    from groundwork.pixel_budget import PixelBudget
    from tests.helpers.proc import PLUGINS
    from tests.helpers.train import sample_subset, step_logs, tiny_train_argv
    from vlm_r1 import grpo_jsonl as grpo

    sys.path.insert(0, PLUGINS)
    try:
        data = sample_subset(tmp_path / "train.jsonl", 2)
        out = tmp_path / "run"
        argv = tiny_train_argv(
            tiny_qwen25_dir,
            data,
            str(out),
            max_steps=1,
            per_device_train_batch_size=8,
            num_generations=4,
            beta=0,
            dtype="float32",
            bf16=False,
            loss_type="dapo",
            disable_tqdm=True,
            use_vllm=True,
            vllm_mode=mode,
            vllm_server_base_url="http://fake-vllm:8000" if mode == "server" else None,
            ban_vision_tokens=True,
            shared_prompt=shared,
        )
        if mode == "server":
            serve_fake(monkeypatch, tiny_qwen25_dir, 100352)
        grpo.main(argv)
    finally:
        sys.path.remove(PLUGINS)
    (history,) = step_logs(out)
    assert history["step"] == 1 and history["rewards/click_reward/mean"] >= 0.0
    info = json.loads((out / "vlm_r1_run.json").read_text())
    assert info["generation_kwargs"] == {"bad_words": ["<|image_pad|>"]}
    assert info["shared_prompt"]["active"] is shared
    calls = fake._fake.RECORD["generate"]  # colocate: one call, 8 rows, n=1; server: one call per unique prompt, n=4
    requests = [r for call in calls for r in call["requests"]]
    with open(data, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    budget = PixelBudget(factor=28, min_pixels=3136, max_pixels=100352)  # TINY_GRPO's --max_pixels
    sizes = {budget.size_sent(r["image_width"], r["image_height"]) for r in records}
    assert sizes == {(420, 224)}  # both records are 1280x720 screenshots
    if mode == "colocate":
        assert len(calls) == 1 and [(r["params"].n, r["image_sizes"]) for r in requests] == [(1, [(420, 224)])] * 8
    else:
        assert len(calls) == 2 and [(r["params"].n, r["image_sizes"]) for r in requests] == [(4, [(420, 224)])] * 2
    assert {tuple(r["params"].bad_words) for r in requests} == {("<|image_pad|>",)}
