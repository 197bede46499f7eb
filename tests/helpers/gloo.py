"""Two (or more) real processes in one gloo process group, for the tests of code that gathers across ranks.

``from tests.helpers.gloo import gloo_ranks``: ``results, exit_codes = gloo_ranks(body, tmp_path)``.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
from collections.abc import Callable
from typing import Any


def _rank_entry(body: Callable[[int], Any], rank: int, init: str, world_size: int, out) -> None:
    """One rank: join the group (60 s to meet the others), put ``(rank, body(rank))`` on ``out``, leave the group."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size, timeout=timeout)
    try:
        out.put((rank, body(rank)))
    finally:
        dist.destroy_process_group()


def gloo_ranks(body: Callable[[int], Any], folder, world_size: int = 2) -> tuple[dict[int, Any], list]:
    """Run ``body(rank)`` in ``world_size`` spawned processes that share one gloo process group (rendezvous through
    the file ``folder/pg``) and return ``({rank: body's return value}, [exit code per rank])``.

    ``body`` must be a module-level function (spawned processes import it by name) and its value picklable. Waits 60 s
    for each result; a rank still running 30 s after that is killed, so a hang fails the test instead of blocking
    the suite (``queue.Empty``, or an exit code other than 0)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    init = f"file://{os.path.join(folder, 'pg')}"
    procs = [ctx.Process(target=_rank_entry, args=(body, rank, init, world_size, out)) for rank in range(world_size)]
    for p in procs:
        p.start()
    try:
        results = dict(out.get(timeout=60) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    return results, [p.exitcode for p in procs]
