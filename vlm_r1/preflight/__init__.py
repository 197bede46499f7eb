"""Multi-node preflight: before the model loads, every rank checks the rendezvous, one all_reduce on the run's backend
and the free disk for checkpoints, each within a timeout; a failing rank is NAMED (rank, host, node) in the error of
every rank that can still talk to the others (issue 22).

Why: a multi-node run that cannot form its process group (unreachable MASTER_ADDR, a blocked port, a node that never
started, NCCL unable to cross the network) otherwise hangs in ``init_process_group`` or the first collective until
the 30-minute default timeout, and then names no culprit: one of the most reported problems in the VLM-R1 and EasyR1
issue trackers. The preflight turns that into an error within ``--preflight_timeout`` seconds.

Steps, on every rank (the environment is torchrun's: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``; ``GROUP_RANK``/``NODE_RANK`` name the node; the host is ``socket.gethostname()``, or ``VLM_R1_HOSTNAME``
where that is set, e.g. in containers whose hostname means nothing):

1. local disk check (no network): free space (``shutil.disk_usage``) at the output directory (its nearest existing
   parent) against ``--preflight_min_free_gib``, or else an estimate of one checkpoint (:func:`estimate_checkpoint_bytes`);
2. rendezvous: ``MASTER_ADDR`` must resolve (``socket.getaddrinfo``) and the TCP store at ``MASTER_ADDR:MASTER_PORT``
   must answer within the timeout (the store ``init_process_group("env://")`` would use: torchrun's agent store, or
   without torchrun a store hosted by rank 0; :func:`_rendezvous_store`). Each rank then writes its record (host,
   node, local rank, pid, its WORLD_SIZE / MASTER_ADDR:PORT / backend, its disk result) into the store and waits for
   all ``WORLD_SIZE`` records. The records go through the store, not ``all_gather_object``: a collective cannot
   complete while a rank is missing, the store still tells the ranks that arrived which ones did not. Missing ranks,
   ranks whose WORLD_SIZE, MASTER_ADDR:PORT or backend differ from this rank's, and ranks short of disk fail every
   rank, with their names;
3. ``init_process_group(backend, timeout=T)`` on a store prefix of its own (``vlm_r1_preflight/...``, so the training's
   own process group never sees its keys), then with gloo ``monitored_barrier(timeout=T, wait_all_ranks=True)``
   (rank 0 learns which ranks did not arrive), then an ``all_reduce`` of a tensor of ones (on the rank's GPU with
   NCCL) whose completion is polled (``Work.is_completed``) until T seconds have passed: a timed wait that works for
   NCCL too. The sum must equal the world size. Before each collective a rank marks in the store that it reached
   it; on a timeout or error every rank reads the marks, and the ranks that never reached the collective are named.
   When every rank reached it and it still did not complete, the ranks cannot talk over the backend (NCCL: network
   interface, InfiniBand, firewall between the hosts listed);
4. success: the process group is destroyed (the training creates its own with its own timeout, ``--ddp_timeout``);
   the rendezvous store object is kept for the life of the process, so that without torchrun rank 0's store server
   stays up and the training's own ``env://`` rendezvous reuses it (both are ``TCPStore(multi_tenant=True)``).

Used by ``python -m vlm_r1.grpo_jsonl`` and ``python -m gui_grounding.train`` before the arguments are parsed
(``TrainingArguments`` creates the process group while it is parsed): :func:`preflight_from_argv` reads
``--preflight {auto,on,off}`` (auto: on when ``WORLD_SIZE > 1``), ``--preflight_timeout``, ``--preflight_min_free_gib``
(and ``--output_dir``, ``--model_name_or_path``, ``--use_peft``, ``--deepspeed``, ``--use_cpu``, ``--ddp_backend``)
from the command line or the ``--config`` YAML. Other launchers call :func:`run_preflight`, or run the standalone
check first::

    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \\
        -m vlm_r1.preflight --output_dir runs/x --model_name_or_path Qwen/Qwen2.5-VL-7B-Instruct

Imports torch, the standard library, :mod:`groundwork.argtypes` (the number types and the distributed environment's
one reader, :func:`groundwork.argtypes.distributed_env`) and :func:`vlm_r1.launch.input_errors` (the one-line error path)
only.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from groundwork.argtypes import distributed_env, number, with_range
from groundwork.argtypes import value as checked_value
from groundwork.outputs import console_line
from groundwork.records import load_yaml_file, strict_loads
from vlm_r1.launch import input_errors

logger = logging.getLogger(__name__)

MODES = ("auto", "on", "off")
#: default ``--preflight_timeout``: long enough for nodes whose imports are slow on a shared file system, far below the
#: 1800 s ``--ddp_timeout`` a hung run would otherwise wait
DEFAULT_TIMEOUT_S = 300.0
#: environment variable that overrides ``socket.gethostname()`` as the name of this node in reports
HOSTNAME_ENV = "VLM_R1_HOSTNAME"
#: bytes per parameter of AdamW's two fp32 moments (``exp_avg``, ``exp_avg_sq``) in a checkpoint's optimizer state
ADAM_BYTES_PER_PARAM = 8
#: bytes per parameter of DeepSpeed's fp32 master copy of the weights, saved with its optimizer state
DEEPSPEED_MASTER_BYTES_PER_PARAM = 4
_GIB = float(2**30)
#: a failure message names this many ranks in full (rank, host, node, local rank), the rest by number
NAMED_RANKS = 8
#: ``--timeout`` / ``--preflight_timeout``: seconds, finite and > 0; ``--min_free_gib`` / ``--preflight_min_free_gib``:
#: GiB, finite and >= 0 (:mod:`groundwork.argtypes`; the same rule for the flags and the ``--config`` YAML's keys)
TIMEOUT_S = number(min=0, min_open=True, max=7 * 24 * 3600)
FREE_GIB = number(min=0, max=2**40)

# Rendezvous stores kept for the life of the process (see the module docstring, step 4), and a counter so that a
# second preflight in one process (all ranks alike) uses fresh store keys.
_STORES: list[Any] = []
_CALLS = [0]


class PreflightError(RuntimeError):
    """A preflight check failed. ``ranks``: the ranks named as the cause (empty when none could be singled out);
    ``hosts``: their hosts, where known."""

    def __init__(self, message: str, ranks: list[int] | None = None, hosts: list[str] | None = None):
        super().__init__(message)
        self.ranks = list(ranks or [])
        self.hosts = list(hosts or [])
        #: call before exiting: rank 0 hosting the store waits (5 s at most) until the other ranks are done with it
        self.wait_for_others: Any = lambda: None


@dataclass
class PreflightReport:
    """What a passed preflight found (the same on every rank, except ``rank``).

    ``seconds``: wall seconds of each step (``disk``, ``rendezvous``, ``init``, ``barrier`` (gloo), ``all_reduce``)
    and ``total``; ``ranks``: every rank's record (rank, host, node, local_rank, pid, world_size, master, backend,
    disk: {path, free_gib, required_gib, ok, source}).
    """

    rank: int
    world_size: int
    backend: str
    all_reduce_sum: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    ranks: list[dict] = field(default_factory=list)

    def wait_for_others(self) -> None:
        """Call before this process exits (a standalone check): rank 0 hosting the store, without torchrun, waits (5 s
        at most) until the other ranks are done with it. A training process goes on and keeps the store up."""

    def hosts(self) -> dict[str, list[int]]:
        """``{host: [its ranks]}``."""
        out: dict[str, list[int]] = {}
        for record in self.ranks:
            out.setdefault(record["host"], []).append(record["rank"])
        return out

    def summary(self) -> str:
        """One line: world size, backend, hosts, the smallest free disk and the time of each step."""
        hosts = "; ".join(f"{h}: ranks {_ranges(r)}" for h, r in self.hosts().items())
        disks = [r["disk"] for r in self.ranks if r.get("disk")]
        disk = ""
        if disks:
            low = min(disks, key=lambda d: d["free_gib"])
            need = "no requirement" if low["required_gib"] is None else f"need {low['required_gib']:.3g} GiB"
            disk = f", disk: least free {low['free_gib']:.4g} GiB at {low['path']} ({need})"
        steps = ", ".join(f"{k} {v:.3g} s" for k, v in self.seconds.items() if k != "total")
        ar = "" if self.all_reduce_sum is None else f", all_reduce sum {self.all_reduce_sum:g} = world size"
        return (
            f"preflight passed: world size {self.world_size}, backend {self.backend}, {len(self.hosts())} host(s) "
            f"({hosts}){ar}{disk}; {steps}; total {self.seconds.get('total', 0.0):.3g} s"
        )


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


def node_name() -> str:
    """This node's name in reports: ``$VLM_R1_HOSTNAME`` if set, else ``socket.gethostname()``."""
    return os.environ.get(HOSTNAME_ENV) or socket.gethostname()


def default_backend(use_cpu: bool = False) -> str:
    """The backend the training will use: ``nccl`` with a CUDA device (and not ``--use_cpu``), else ``gloo``."""
    import torch

    return "nccl" if torch.cuda.is_available() and not use_cpu else "gloo"


# ---- disk -----------------------------------------------------------------------------------------------------------
def _safetensors_header(path: str) -> dict:
    """The JSON header of a ``.safetensors`` file (8-byte little-endian length, then the header)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n < 100 * 2**20:
            raise ValueError(f"{path}: not a safetensors file (header length {n})")
        return strict_loads(f.read(n).decode("utf-8"))  # the framing's JSON rule: no NaN, no key twice


def count_parameters(model_path: str) -> tuple[int, int] | None:
    """``(parameters, bytes)`` of the weights in a local checkpoint directory's ``*.safetensors`` files, read from
    their headers (nothing is loaded); None when ``model_path`` is not a local directory with safetensors files (a
    hub name: the estimate is skipped)."""
    if not model_path or not os.path.isdir(model_path):
        return None
    files = sorted(f for f in os.listdir(model_path) if f.endswith(".safetensors"))
    if not files:
        return None
    params = nbytes = 0
    for name in files:
        for key, entry in _safetensors_header(os.path.join(model_path, name)).items():
            if key == "__metadata__":
                continue
            params += math.prod(entry["shape"])
            begin, end = entry["data_offsets"]
            nbytes += end - begin
    return params, nbytes


def estimate_checkpoint_bytes(model_path: str | None, use_peft: bool = False, deepspeed: bool = False) -> int | None:
    """Rough size of one training checkpoint of ``model_path`` (a local directory), in bytes; None when unknown.

    Full fine-tuning: the weights as stored (``bytes`` of :func:`count_parameters`: 2 per parameter in bf16) plus
    AdamW's two fp32 moments (:data:`ADAM_BYTES_PER_PARAM` = 8 per parameter), plus DeepSpeed's fp32 master weights
    (:data:`DEEPSPEED_MASTER_BYTES_PER_PARAM` = 4) with ``--deepspeed``: 10 or 14 bytes per parameter for a bf16
    checkpoint. Frozen parts (``--freeze_vision_modules``) have no optimizer state, so this overestimates them. With
    ``--use_peft`` the checkpoints hold the adapter only; the estimate is then the weights' size, which bounds the
    final save. Override with ``--preflight_min_free_gib``.
    """
    counted = count_parameters(model_path) if model_path else None
    if counted is None:
        return None
    params, nbytes = counted
    if use_peft:
        return nbytes
    return nbytes + params * (ADAM_BYTES_PER_PARAM + (DEEPSPEED_MASTER_BYTES_PER_PARAM if deepspeed else 0))


def check_disk(output_dir: str | None, min_free_gib: float | None = None, estimate_bytes: int | None = None) -> dict:
    """Free space at ``output_dir`` (or its nearest existing parent) against the requirement: ``min_free_gib`` when
    given (0: no requirement), else ``estimate_bytes``. Returns ``{path, free_gib, required_gib, ok, source}``."""
    path = os.path.abspath(output_dir or ".")
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    free = shutil.disk_usage(path).free / _GIB
    if min_free_gib is not None:
        required, source = (float(min_free_gib) or None), "--preflight_min_free_gib"
    elif estimate_bytes:
        required, source = estimate_bytes / _GIB, "estimate of one checkpoint"
    else:
        required, source = None, "no estimate (pass --preflight_min_free_gib)"
    return {
        "path": path,
        "free_gib": free,
        "required_gib": required,
        "ok": required is None or free >= required,
        "source": source,
    }


# ---- the distributed checks -------------------------------------------------------------------------------------------
def _who(record: dict | None, rank: int, local_world: int | None = None) -> str:
    """``rank 3 (host gpu-b, node 1, local rank 1)``; for a rank that never registered, its likely node."""
    if record is None:
        guess = f", node {rank // local_world} if ranks are laid out node by node" if local_world else ""
        return f"rank {rank} (host unknown: it never reached the rendezvous{guess})"
    node = f", node {record['node']}" if record.get("node") not in (None, "") else ""
    return f"rank {rank} (host {record['host']}{node}, local rank {record['local_rank']})"


def _rendezvous_store(addr: str, port: int, rank: int, world: int, timeout: float) -> Any:
    """The TCP store ``init_process_group("env://")`` would use (``torch.distributed.rendezvous._create_c10d_store``):
    a client of torchrun's agent store (``TORCHELASTIC_USE_AGENT_STORE=True``), else a multi-tenant store whose server
    rank 0 hosts. Unlike that function, rank 0's server does not wait for every rank to connect
    (``wait_for_workers=False``), so that a missing rank is found and named by the registration that follows."""
    from torch.distributed import TCPStore

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        return TCPStore(addr, port, world, False, timedelta(seconds=timeout))
    return TCPStore(
        addr,
        port,
        world,
        rank == 0,
        timedelta(seconds=timeout),
        wait_for_workers=False,
        multi_tenant=True,
    )


class _Run:
    """State of one preflight on one rank: its identity, the store and the records."""

    def __init__(self, timeout: float, backend: str):
        env = os.environ
        dist_env = distributed_env(env)  # every variable checked together, one line naming a bad one
        self.timeout = checked_value(TIMEOUT_S, timeout, "timeout")
        self.backend = backend
        self.rank = dist_env.rank
        self.world = dist_env.world_size
        self.local_rank = dist_env.local_rank
        self.local_world = dist_env.local_world_size
        self.node = str(dist_env.node_rank) if dist_env.node_rank is not None else env.get("SLURM_NODEID") or ""
        self.host = node_name()
        self.addr = env.get("MASTER_ADDR")
        self.port = None if dist_env.master_port is None else str(dist_env.master_port)
        self.records: dict[int, dict] = {}
        self.store = None
        self.start = time.perf_counter()

    @property
    def me(self) -> str:
        return f"rank {self.rank} (host {self.host})"

    def name(self, rank: int) -> str:
        return _who(self.records.get(rank), rank, self.local_world)

    def names(self, ranks: list[int], describe: Any = None) -> str:
        """``describe(rank)`` (default :meth:`name`) of the first :data:`NAMED_RANKS` ranks, joined by ``; ``, then
        the others by number (``; and 503 more: rank(s) 9-511``): a message of a 512-rank job stays one readable line."""
        describe = describe or self.name
        text = "; ".join(describe(r) for r in ranks[:NAMED_RANKS])
        rest = ranks[NAMED_RANKS:]
        return f"{text}; and {len(rest)} more: rank(s) {_ranges(rest)}" if rest else text

    def fail(self, message: str, ranks: list[int] = ()) -> PreflightError:
        hosts = [self.records[r]["host"] for r in ranks if r in self.records]
        elapsed = time.perf_counter() - self.start
        return PreflightError(f"preflight failed on {self.me} after {elapsed:.1f} s: {message}", list(ranks), hosts)

    # ---- rendezvous ------------------------------------------------------------------------------------------------
    def rendezvous(self, record: dict) -> None:
        import torch.distributed as dist

        if not self.addr or not self.port:
            raise self.fail(f"WORLD_SIZE={self.world} but MASTER_ADDR/MASTER_PORT are not set (launch with torchrun)")
        try:
            resolved = sorted({a[4][0] for a in socket.getaddrinfo(self.addr, int(self.port), type=socket.SOCK_STREAM)})
        except (OSError, ValueError) as err:
            raise self.fail(f"MASTER_ADDR={self.addr!r} MASTER_PORT={self.port!r} does not resolve: {err}") from err
        try:
            store = _rendezvous_store(self.addr, int(self.port), self.rank, self.world, self.timeout)
        except Exception as err:  # noqa: BLE001 - any failure here means the store cannot be reached
            role = "could not start the store on" if self.rank == 0 else "could not reach the store at"
            raise self.fail(
                f"{role} MASTER_ADDR:MASTER_PORT = {self.addr}:{self.port} ({', '.join(resolved)}) within "
                f"{self.timeout:g} s: {err}. Is the node of rank 0 up, and is port {self.port} open from this node?"
            ) from err
        _STORES.append(store)  # kept alive: see the module docstring, step 4
        store.set_timeout(timedelta(seconds=self.timeout))
        _CALLS[0] += 1
        self.store = dist.PrefixStore(f"vlm_r1_preflight/{_CALLS[0]}", store)
        self.store.set(f"rank/{self.rank}", json.dumps(record))
        if self.store.add("arrived", 1) >= self.world:
            self.store.set("all_arrived", "1")
        try:
            self.store.wait(["all_arrived"], timedelta(seconds=self.timeout))
        except Exception as err:  # noqa: BLE001 - a timeout, or the store went away
            self._read_records()
            if self.rank in self.records:
                self.check_settings()  # a rank with another WORLD_SIZE counts arrivals differently
            missing = [r for r in range(self.world) if r not in self.records]
            if missing:
                raise self.fail(
                    f"{len(missing)} of {self.world} rank(s) did not reach the rendezvous at {self.addr}:{self.port} "
                    f"within {self.timeout:g} s: {self.names(missing)}. Present: {self.names(sorted(self.records))}",
                    missing,
                ) from err
            raise self.fail(f"waiting for the other ranks at the rendezvous: {err}") from err
        if not self._read_records():
            raise self.fail(
                f"the rendezvous store at {self.addr}:{self.port} stopped answering while the records were read: the "
                f"process hosting it (rank 0 without torchrun, torchrun's agent on the first node) exited?"
            )
        # settings first: a rank with a larger WORLD_SIZE can see "all arrived" set by a rank with a smaller one, and
        # then misses ranks that never existed; the differing setting is the cause to name
        self.check_settings()
        missing = [r for r in range(self.world) if r not in self.records]
        if missing:
            raise self.fail(
                f"{self.world} processes arrived but rank(s) {_ranges(missing)} did not: two processes share a RANK?",
                missing,
            )

    def _read_records(self) -> bool:
        """Read the records present into ``self.records``; False when the store stopped answering."""
        for r in range(self.world):
            if r in self.records:
                continue
            try:
                if self.store.check([f"rank/{r}"]):
                    self.records[r] = strict_loads(self.store.get(f"rank/{r}").decode("utf-8"))
            except Exception:  # noqa: BLE001 - the store is gone: name what is known
                return False
        return True

    def count_finished(self) -> None:
        """Tell the store this rank no longer needs it (passed or failed)."""
        if self.store is not None:
            try:
                self.store.add("finished", 1)
            except Exception:  # noqa: BLE001 - the store is gone already
                pass

    def wait_for_others(self) -> None:
        """Rank 0 hosting the store's server (no torchrun): before this process exits, wait until every rank that
        reached the rendezvous has finished with the store (:meth:`count_finished`) or ``min(timeout, 5)`` seconds
        passed, so that no rank loses the store while it still reads the records or marks. Other ranks (and torchrun's
        agent store) return at once."""
        if self.store is None or self.rank != 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
            return
        deadline = time.monotonic() + min(self.timeout, 5.0)
        try:
            arrived = min(self.world, self.store.add("arrived", 0))  # a rank that never came needs no store
            while self.store.add("finished", 0) < arrived and time.monotonic() < deadline:
                time.sleep(0.05)
        except Exception:  # noqa: BLE001
            pass

    def check_records(self) -> None:
        """Every rank has this rank's settings and enough disk; else every rank fails naming the odd ones."""
        self.check_settings()
        short = [r for r, rec in sorted(self.records.items()) if not rec["disk"]["ok"]]
        if short:
            details = self.names(
                short,
                lambda r: (
                    f"{self.name(r)}: {self.records[r]['disk']['free_gib']:.4g} GiB free at "
                    f"{self.records[r]['disk']['path']}, needs {self.records[r]['disk']['required_gib']:.4g} GiB "
                    f"({self.records[r]['disk']['source']})"
                ),
            )
            raise self.fail(f"not enough free disk for checkpoints: {details}", short)

    def check_settings(self) -> None:
        """The records read so far have this rank's WORLD_SIZE, MASTER_ADDR:MASTER_PORT and backend."""
        mine = self.records[self.rank]
        for key, label in (("world_size", "WORLD_SIZE"), ("master", "MASTER_ADDR:MASTER_PORT"), ("backend", "backend")):
            odd = [r for r, rec in sorted(self.records.items()) if rec[key] != mine[key]]
            if odd:
                values = self.names(odd, lambda r, k=key: f"{self.name(r)}: {self.records[r][k]}")
                raise self.fail(f"{label} differs: this rank has {mine[key]}, {values}", odd)

    # ---- collectives -----------------------------------------------------------------------------------------------
    def _mark(self, stage: str) -> None:
        self.store.set(f"{stage}/{self.rank}", "1")

    def _diagnose(self, stage: str, err: BaseException | str) -> PreflightError:
        """The error of a collective that failed or timed out: the ranks that never reached it, by name."""
        grace = time.monotonic() + min(2.0, self.timeout / 4)  # a rank marking a moment late is not missing
        missing: list[int] = []
        try:
            while True:
                missing = [r for r in range(self.world) if not self.store.check([f"{stage}/{r}"])]
                if not missing or time.monotonic() > grace:
                    break
                time.sleep(0.05)
        except Exception as store_err:  # noqa: BLE001
            return self.fail(
                f"{stage} failed ({err}) and the rendezvous store at {self.addr}:{self.port} no longer answers "
                f"({store_err}): the process hosting it (rank 0 without torchrun, torchrun's agent on the first node: "
                f"{self.name(0)}) is gone?",
                [0],
            )
        if missing:
            return self.fail(
                f"{stage} did not complete within {self.timeout:g} s: {len(missing)} rank(s) never reached it: "
                f"{self.names(missing)} ({err})",
                missing,
            )
        hosts = ", ".join(sorted({rec["host"] for rec in self.records.values()}))
        hint = (
            "check NCCL_SOCKET_IFNAME / NCCL_IB_* and firewalls between the hosts; rerun with NCCL_DEBUG=INFO"
            if self.backend == "nccl"
            else "check GLOO_SOCKET_IFNAME and firewalls between the hosts"
        )
        return self.fail(
            f"every rank reached the {stage} but it did not complete within {self.timeout:g} s ({err}): the ranks "
            f"cannot talk to each other over {self.backend} (hosts {hosts}); {hint}"
        )

    def collectives(self, seconds: dict[str, float]) -> float:
        import torch
        import torch.distributed as dist

        start = time.perf_counter()
        device = torch.device("cpu")
        if self.backend == "nccl":
            device = torch.device("cuda", self.local_rank % max(1, torch.cuda.device_count()))
            torch.cuda.set_device(device)
        dist.init_process_group(
            self.backend,
            store=dist.PrefixStore("pg", self.store),
            rank=self.rank,
            world_size=self.world,
            timeout=timedelta(seconds=self.timeout),
        )
        seconds["init"] = time.perf_counter() - start

        if self.backend == "gloo":
            start = time.perf_counter()
            self._mark("barrier")
            try:
                dist.monitored_barrier(timeout=timedelta(seconds=self.timeout), wait_all_ranks=True)
            except Exception as err:  # noqa: BLE001 - rank 0's message names the ranks that did not arrive
                raise self._diagnose("barrier", err) from err
            seconds["barrier"] = time.perf_counter() - start

        start = time.perf_counter()
        ones = torch.ones(1, device=device)
        try:
            work = dist.all_reduce(ones, async_op=True)
            self._mark("all_reduce")
            deadline = time.monotonic() + self.timeout
            while not work.is_completed():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"all_reduce not complete after {self.timeout:g} s")
                time.sleep(0.01)
            work.wait()
            total = float(ones.item())
        except Exception as err:  # noqa: BLE001
            raise self._diagnose("all_reduce", err) from err
        seconds["all_reduce"] = time.perf_counter() - start
        if total != float(self.world):
            raise self.fail(f"all_reduce of ones gave {total:g}, expected the world size {self.world}")
        dist.destroy_process_group()
        return total


def run_preflight(
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    backend: str | None = None,
    output_dir: str | None = None,
    min_free_gib: float | None = None,
    estimate_bytes: int | None = None,
) -> PreflightReport:
    """Run the preflight on this rank (every rank of the job must call it); see the module docstring for the steps.

    Args:
        timeout: seconds each step may take (rendezvous, init, barrier, all_reduce).
        backend: ``nccl`` or ``gloo``; default :func:`default_backend`.
        output_dir: where checkpoints go (the disk check looks at its nearest existing parent).
        min_free_gib: free GiB required there (0: none); default ``estimate_bytes``.
        estimate_bytes: the size of one checkpoint (:func:`estimate_checkpoint_bytes`); None: no requirement.

    Returns:
        The :class:`PreflightReport`. With ``WORLD_SIZE`` 1 only the disk is checked.

    Raises:
        PreflightError: naming the failing rank(s) and host(s). A collective may still be pending in this process
            then: exit the process (:func:`preflight_from_argv` and the CLI call ``os._exit``) rather than go on.
    """
    backend = backend or default_backend()  # imports torch: not part of the timings
    total_start = time.perf_counter()
    run = _Run(timeout, backend)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    disk = check_disk(output_dir, min_free_gib, estimate_bytes)
    seconds["disk"] = time.perf_counter() - start
    record = {
        "rank": run.rank,
        "host": run.host,
        "node": run.node,
        "local_rank": run.local_rank,
        "pid": os.getpid(),
        "world_size": run.world,
        "master": f"{run.addr}:{run.port}",
        "backend": backend,
        "disk": disk,
    }
    report = PreflightReport(rank=run.rank, world_size=run.world, backend=backend, seconds=seconds)
    report.wait_for_others = run.wait_for_others
    if run.world <= 1:
        run.records = {run.rank: record}
        run.check_records()
        report.ranks = [record]
        seconds["total"] = time.perf_counter() - total_start
        return report
    try:
        start = time.perf_counter()
        run.rendezvous(record)
        seconds["rendezvous"] = time.perf_counter() - start
        run.check_records()
        report.all_reduce_sum = run.collectives(seconds)
    except PreflightError as err:
        run.count_finished()
        err.wait_for_others = run.wait_for_others
        raise
    run.count_finished()
    report.ranks = [run.records[r] for r in range(run.world)]
    seconds["total"] = time.perf_counter() - total_start
    return report


# ---- the training entry points' hook ------------------------------------------------------------------------------------
def _bool(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "y", "on")


def preflight_mode(value: Any) -> str:
    """``--preflight``'s value as one of :data:`MODES`; YAML's unquoted ``on``/``off`` (read as booleans) and
    true/false spellings map to ``on``/``off``; anything else is returned lower-cased (and then refused)."""
    text = str(value).strip().lower()
    return {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}.get(text, text)


#: the training settings the preflight reads
SETTING_NAMES = (
    "preflight",
    "preflight_timeout",
    "preflight_min_free_gib",
    "output_dir",
    "model_name_or_path",
    "use_peft",
    "deepspeed",
    "use_cpu",
    "ddp_backend",
)


def settings_from_argv(argv: list[str], parsed: Any = None) -> dict:
    """The preflight's settings from a training command line and its ``--config`` YAML (the command line wins):
    ``preflight``, ``preflight_timeout``, ``preflight_min_free_gib``, ``output_dir``, ``model_name_or_path``,
    ``use_peft``, ``deepspeed``, ``use_cpu``, ``ddp_backend``. Defaults: those of ``vlm_r1.configs.VLMGRPOConfig``.

    ``parsed``: the training command line already parsed (:class:`vlm_r1.command_line.CommandLine`): its values are
    taken as they are, nothing is parsed again (the entry points' one parse); without it (``python -m
    vlm_r1.preflight`` beside a training command line) a small parser reads just these flags."""
    if parsed is not None:
        return _settings({k: v for k in SETTING_NAMES if (v := parsed.value(k)) is not None})
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config")
    for name in ("preflight", "preflight_timeout", "preflight_min_free_gib", "output_dir", "model_name_or_path"):
        parser.add_argument(f"--{name}")
    for name in ("use_peft", "use_cpu"):
        parser.add_argument(f"--{name}", nargs="?", const="true")
    for name in ("deepspeed", "ddp_backend"):
        parser.add_argument(f"--{name}")
    given = {k: v for k, v in vars(parser.parse_known_args(argv)[0]).items() if v is not None}
    values: dict[str, Any] = {}
    if given.get("config"):
        try:
            loaded = load_yaml_file(given["config"], "--config")
        except ValueError:
            loaded = None  # the argument parser that follows reports it
        if isinstance(loaded, dict):
            values.update(loaded)
    values.update(given)
    return _settings(values)


def _settings(values: dict) -> dict:
    """:func:`settings_from_argv`'s result from the given ``values`` (strings from a command line, or parsed values)."""
    min_free = values.get("preflight_min_free_gib")
    return {
        "preflight": preflight_mode(values.get("preflight", "auto")),
        "preflight_timeout": checked_value(
            TIMEOUT_S, values.get("preflight_timeout", DEFAULT_TIMEOUT_S), "--preflight_timeout"
        ),
        "preflight_min_free_gib": None
        if min_free in (None, "None", "none", "")
        else checked_value(FREE_GIB, min_free, "--preflight_min_free_gib"),
        "output_dir": values.get("output_dir") or "trainer_output",
        "model_name_or_path": values.get("model_name_or_path"),
        "use_peft": _bool(values.get("use_peft", False)),
        "deepspeed": bool(values.get("deepspeed")),
        "use_cpu": _bool(values.get("use_cpu", False)),
        "ddp_backend": values.get("ddp_backend"),
    }


def _exit_failed(err: PreflightError) -> None:
    """Log the failure (one line, written whole: :func:`groundwork.outputs.console_line`), flush, and leave at once
    (a pending collective or its watchdog must not keep the process)."""
    console_line(f"PREFLIGHT FAILED: {err}")  # every rank at once, on one stderr: one write per line
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    err.wait_for_others()
    os._exit(1)


def preflight_from_argv(argv: list[str], parsed: Any = None) -> PreflightReport | None:
    """The training entry points' hook: run the preflight if ``--preflight`` asks for it (auto: ``WORLD_SIZE > 1``),
    before anything creates the process group or loads the model; on failure log ``PREFLIGHT FAILED: ...`` and exit
    with status 1. Returns the report, or None when skipped (also with ``--help``)."""
    if "-h" in argv or "--help" in argv:
        return None
    s = settings_from_argv(argv, parsed)
    if s["preflight"] not in MODES:
        raise SystemExit(f"--preflight {s['preflight']!r}: choose one of {', '.join(MODES)}")
    world = distributed_env().world_size
    if s["preflight"] == "off" or (s["preflight"] == "auto" and world <= 1):
        return None
    backend = s["ddp_backend"] if s["ddp_backend"] in ("nccl", "gloo") else default_backend(s["use_cpu"])
    estimate = None
    if s["preflight_min_free_gib"] is None:
        try:
            estimate = estimate_checkpoint_bytes(s["model_name_or_path"], s["use_peft"], s["deepspeed"])
        except (OSError, ValueError, KeyError) as err:
            logger.warning("preflight: no checkpoint size estimate for %s: %s", s["model_name_or_path"], err)
    try:
        report = run_preflight(
            timeout=s["preflight_timeout"],
            backend=backend,
            output_dir=s["output_dir"],
            min_free_gib=s["preflight_min_free_gib"],
            estimate_bytes=estimate,
        )
    except PreflightError as err:
        _exit_failed(err)
    logger.info("%s", report.summary())
    return report


# ---- python -m vlm_r1.preflight -----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vlm_r1.preflight",
        description="Multi-node preflight, run on every rank (torchrun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT "
        "set by hand): rendezvous, an all_reduce on the backend, free disk for checkpoints, each within --timeout "
        "seconds. A failing rank is named (rank, host, node). Exit status 0 when every check passed, 1 otherwise.",
    )
    parser.add_argument(
        "--timeout",
        type=TIMEOUT_S,
        default=DEFAULT_TIMEOUT_S,
        help=with_range(
            f"Seconds each step may take (rendezvous, init, barrier, all_reduce). Default {DEFAULT_TIMEOUT_S:g}.",
            TIMEOUT_S,
        ),
    )
    parser.add_argument(
        "--backend",
        choices=["auto", "nccl", "gloo"],
        default="auto",
        help="Process-group backend; auto: nccl with a CUDA device, else gloo (what the training uses).",
    )
    parser.add_argument(
        "--output_dir",
        default=None,
        help="Where checkpoints will go; its free space is checked (nearest existing parent). Default: the current "
        "directory.",
    )
    parser.add_argument(
        "--min_free_gib",
        type=FREE_GIB,
        default=None,
        help=with_range(
            "Free GiB required at --output_dir on every rank (0: none). Default: the estimate of one checkpoint "
            "from --model_name_or_path, else none.",
            FREE_GIB,
        ),
    )
    parser.add_argument(
        "--model_name_or_path",
        default=None,
        help="Local checkpoint directory: its safetensors headers give the parameter count for the checkpoint "
        "size estimate (weights + 8 bytes/parameter of AdamW moments, + 4 with --deepspeed; weights only with "
        "--use_peft).",
    )
    parser.add_argument("--use_peft", action="store_true", help="LoRA run: estimate the weights' size only.")
    parser.add_argument("--deepspeed", action="store_true", help="DeepSpeed run: add its fp32 master weights.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON (rank 0) after the summary.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m vlm_r1.preflight``: rank 0 prints the summary (and ``--json`` the report); exit 0 or 1; 2 with one
    line for a bad flag or distributed environment (:func:`vlm_r1.launch.input_errors`)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with input_errors("vlm_r1.preflight"):
        distributed_env()  # checked before anything connects
    estimate = None
    if args.min_free_gib is None and args.model_name_or_path:
        estimate = estimate_checkpoint_bytes(args.model_name_or_path, args.use_peft, args.deepspeed)
    try:
        report = run_preflight(
            timeout=args.timeout,
            backend=None if args.backend == "auto" else args.backend,
            output_dir=args.output_dir,
            min_free_gib=args.min_free_gib,
            estimate_bytes=estimate,
        )
    except PreflightError as err:
        _exit_failed(err)
    if report.rank == 0:
        print(report.summary(), flush=True)
        if args.json:
            print(json.dumps(asdict(report), default=str), flush=True)
    report.wait_for_others()
    return 0
