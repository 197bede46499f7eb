"""Record and completion shapes the task and reward tests build by hand.

``from tests.helpers.records import assistant, conversation, task_script_args``:

* :func:`assistant`: a conversational completion, as TRL hands it to a reward function.
* :func:`conversation`: an upstream VLM-R1 record's ``conversations`` (one human turn, one gpt turn).
* :func:`task_script_args`: the parsed script arguments a task's ``build_dataset`` reads, without a command line.
"""

from __future__ import annotations

from types import SimpleNamespace


def assistant(text: str) -> list:
    """``[{"role": "assistant", "content": text}]``: one completion in TRL's conversational form."""
    return [{"role": "assistant", "content": text}]


def conversation(question: str = "<image>q", answer="a") -> list:
    """An upstream record's ``conversations``: the human turn (``<image>`` marks where each image goes) and the gpt
    turn (the solution the rewards compare with)."""
    return [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]


def task_script_args(files, **kw) -> SimpleNamespace:
    """What ``Task.build_dataset`` reads of ``GRPOScriptArguments``: the data files, no image folders, no reward
    methods, lenient reading, no task type, the non-thinking prompt; ``kw`` over it."""
    base = dict(
        data_file_list=files,
        image_folder_list=None,
        reward_method_list=None,
        strict_data=False,
        task_type=None,
        prompt_mode="non_thinking",
    )
    base.update(kw)
    return SimpleNamespace(**base)
