"""DDP rules that need more than the launcher variables: what the job asserts or chose.

Pure, table-tested. Each function adds to what :func:`gpudiag.core.ddp.validate_ddp`
says; :func:`gpudiag.core.check.run_check` wires them in. Sources (torch 2.13
unless said otherwise):

* ``torch/distributed/rendezvous.py::_env_rendezvous_handler`` reads ``RANK`` then
  ``WORLD_SIZE`` (each only when ``init_process_group`` got no ``rank=``/
  ``world_size=``), then ``MASTER_ADDR``, then ``MASTER_PORT``, and raises
  ``ValueError: Error initializing torch.distributed using env:// rendezvous:
  environment variable X expected, but not set`` for the first one unset or empty.
  A script's own ``os.environ['LOCAL_RANK']`` raises ``KeyError: 'LOCAL_RANK'``
  before that.
* ``torch/distributed/run.py``: torchrun's ``--master-addr`` defaults to
  ``127.0.0.1`` and ``--master-port`` to 29500 (static rendezvous); its own options
  come from ``PET_MASTER_ADDR``/``PET_MASTER_PORT``. Inside a torchrun worker
  (``TORCHELASTIC_RUN_ID``) the agent already holds the store's port.
* ``TCPStoreLibUvBackend.cpp``: rank 0 listens on the port on every address and fails
  with ``DistNetworkError: The server socket has failed to listen on any local
  network address. port: P, useIpv6: false, code: -98, name: EADDRINUSE, message:
  address already in use``.
* ``torch/distributed/distributed_c10d.py::_new_process_group_helper``:
  ``if not is_nccl_available(): raise RuntimeError("Distributed package doesn't have
  NCCL built in")``; the Windows and macOS builds have no NCCL (torch docs,
  "Distributed communication package", backends table).
* ``torch.cuda.set_device(k)``: ``invalid device ordinal`` for k >= the visible count,
  a no-op for a negative k. NCCL's ``init.cc`` refuses two ranks on one GPU.
* A rank that touches CUDA before ``set_device`` (``torch.load`` without
  ``map_location``, ``torch.cuda.current_device()``, ``device='cuda'``) creates a
  context on ``cuda:0`` (CUDA C Programming Guide, "Initialization": the primary
  context of the current device, device 0 by default). Lightning's ``devices=[1,2]``
  and accelerate's ``gpu_ids`` pick devices per rank but leave cuda:0 visible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudiag.core.dataparallel import (
    INVALID_ORDINAL,
    cvd_phrase,
    describe_device,
    describe_devices,
    gpu_by_nvml_index,
)
from gpudiag.core.ddp import (
    ENV_RENDEZVOUS_ORDER,
    LAUNCHER_VARS,
    NCCL_NOT_BUILT,
    duplicate_gpu_text,
    env_missing_text,
    parse_env_int,
)
from gpudiag.errors import GpudiagInputError
from gpudiag.model import Finding, PortProbe, Resolution, Severity, Snapshot

CODES: dict[str, str] = {
    "DDP-LAUNCHED-ENV-MISSING": "check --launched, but launcher variables are missing",
    "DDP-PORT-IN-USE": "the rendezvous port is already bound on this host",
    "DDP-NCCL-NOT-BUILT": "backend nccl, but this torch build has no NCCL",
    "DDP-SET-DEVICE-INVALID": "a rank's device is not a visible cuda ordinal",
    "DDP-CUDA0-CONTEXT": "DDP on a device subset without cuda:0: cuda:0 still gets a context",
}

#: torchrun's static-rendezvous default (run.py), also accelerate's and DeepSpeed's.
DEFAULT_MASTER_PORT = 29500
DEFAULT_MASTER_ADDR = "127.0.0.1"
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_script_reads(text: str | None) -> tuple[str, ...]:
    """``--script-reads LOCAL_RANK,RANK`` → the names, in order.

    Raises:
        GpudiagInputError: an entry that is not an environment variable name.
    """
    if text is None or not text.strip():
        return ()
    names = [part.strip() for part in text.split(",")]
    for name in names:
        if not _VAR_NAME.fullmatch(name):
            raise GpudiagInputError(
                f"--script-reads must list environment variable names, not {name!r}"
            )
    return tuple(dict.fromkeys(names))


def launched_findings(
    env: Mapping[str, str],
    *,
    script_reads: Sequence[str] = (),
    init_rank_args: bool = False,
) -> list[Finding]:
    """``check --launched``: every variable the rank will read must be set.

    Args:
        env: the rank's environment.
        script_reads: variables the script reads itself before ``init_process_group``,
            in order (``int(os.environ['LOCAL_RANK'])``).
        init_rank_args: ``init_process_group`` gets ``rank=`` and ``world_size=``, so
            env:// reads only ``MASTER_ADDR`` and ``MASTER_PORT``.
    """
    rendezvous = ("MASTER_ADDR", "MASTER_PORT") if init_rank_args else ENV_RENDEZVOUS_ORDER
    order = list(dict.fromkeys([*script_reads, *rendezvous]))
    missing = [var for var in order if not env.get(var)]
    if not missing:
        return []
    first = missing[0]
    if first in script_reads:
        predicts = (
            f"KeyError: '{first}'"
            if first not in env
            else "ValueError: invalid literal for int() with base 10: ''"
        )
        reader = f"the script reads os.environ['{first}'] before init_process_group"
    else:
        predicts = env_missing_text(first)
        reader = (
            "init_process_group's env:// rendezvous reads "
            + ", ".join(rendezvous)
            + " in that order"
        )
    present = [k for k in (*LAUNCHER_VARS, "TORCHELASTIC_RUN_ID") if env.get(k)]
    under_srun = "SLURM_PROCID" in env
    if present:
        context = f"only {', '.join(present)} {'is' if len(present) == 1 else 'are'} set"
    elif under_srun:
        context = "this is an srun task, but no torchrun variable is set"
    else:
        context = "no launcher variable is set: this looks like a plain `python train.py`"
    hint = ""
    if "LOCAL_RANK" not in script_reads and not env.get("LOCAL_RANK") and first != "LOCAL_RANK":
        hint = (
            " A script that reads os.environ['LOCAL_RANK'] first fails earlier, with "
            "KeyError: 'LOCAL_RANK' (say so with --script-reads LOCAL_RANK)."
        )
    if under_srun:
        fix = (
            "Run torchrun inside srun (srun torchrun --nproc-per-node=<GPUs> train.py), or "
            "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
            "MASTER_ADDR=<first node of $SLURM_JOB_NODELIST> MASTER_PORT=<free port> before "
            "python train.py."
        )
    else:
        fix = (
            "Start the script with torchrun --nproc-per-node=<GPUs> train.py (it sets RANK, "
            "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT in each "
            "rank); for one process without a launcher export RANK=0 WORLD_SIZE=1 "
            "LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500."
        )
    return [
        Finding(
            "DDP-LAUNCHED-ENV-MISSING",
            "error",
            f"--launched says this is a launched rank, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set ({context}). It fails first on "
            f"{first}: {reader}.{hint}",
            fix,
            predicts,
            subject=first,
        )
    ]


@dataclass(frozen=True)
class PortTarget:
    """Where rank 0 will listen: ``address:port``; ``explicit`` when a variable set the port."""

    address: str
    port: int
    explicit: bool


def port_target(env: Mapping[str, str]) -> PortTarget | None:
    """The rendezvous port this process (or the launch it precedes) will bind, if any.

    None inside a torchrun worker (the agent already holds the port), for a rank
    other than 0 (rank 0 binds), and for a port that is invalid or 0 (other rules
    report those; 0 means "any free port").
    """
    if "TORCHELASTIC_RUN_ID" in env:
        return None
    rank = env.get("RANK")
    if rank and parse_env_int(rank) != 0:
        return None
    raw = env.get("MASTER_PORT") or env.get("PET_MASTER_PORT")
    if raw:
        port = parse_env_int(raw)
        if port is None or not 1 <= port <= 65535:
            return None
        explicit = True
    else:
        port, explicit = DEFAULT_MASTER_PORT, False
    address = env.get("MASTER_ADDR") or env.get("PET_MASTER_ADDR") or DEFAULT_MASTER_ADDR
    return PortTarget(address, port, explicit)


def addr_in_use_text(port: int) -> str:
    """The error rank 0's TCPStore raises for a taken port (libuv backend, Linux)."""
    return (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        f"local network address. port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, "
        "message: address already in use"
    )


def port_findings(probe: PortProbe, target: PortTarget) -> list[Finding]:
    """``DDP-PORT-IN-USE`` when the probe found the port taken; nothing otherwise."""
    if probe.status != "in_use":
        return []
    if probe.holders:
        who = "by " + ", ".join(
            f"pid {h.pid}"
            + (f" ({h.name})" if h.name else "")
            + (f": {h.cmdline}" if h.cmdline else "")
            for h in probe.holders
        )
        stop = (
            " or stop "
            + ", ".join(f"pid {h.pid}" for h in probe.holders)
            + (" if it is a leftover job")
        )
    else:
        who = "by a process /proc does not show (another user's, or another container's)"
        stop = ""
    if target.explicit:
        source = f"MASTER_PORT={target.port}"
        severity: Severity = "error"
    else:
        source = (
            f"No MASTER_PORT is set, and the default port {target.port} (torchrun's static "
            "rendezvous: multi-node or --master-addr given; accelerate; DeepSpeed)"
        )
        severity = "warning"
    return [
        Finding(
            "DDP-PORT-IN-USE",
            severity,
            f"{source} is already in use on this host ({target.address} is local) {who}: "
            "rank 0 cannot listen there, and the other ranks may connect to the wrong "
            "process.",
            "Pick a free port: export MASTER_PORT=<free port> or torchrun --master-port "
            "<free port> (on one node, torchrun --standalone picks one itself)" + stop + ".",
            addr_in_use_text(target.port),
            subject="MASTER_PORT",
        )
    ]


def nccl_findings(snapshot: Snapshot, resolution: Resolution, backend: str | None) -> list[Finding]:
    """``DDP-NCCL-NOT-BUILT``: backend nccl (given, or torch's default with GPUs) and no NCCL."""
    n = len(resolution.devices)
    if (backend or ("nccl" if n > 0 else "gloo")) != "nccl":
        return []
    torch = snapshot.torch
    platform = snapshot.host.platform if snapshot.host is not None else None
    available = torch.nccl_available if torch is not None else None
    if available is None and platform in ("Windows", "Darwin"):
        available = False
    if available is not False:
        return []
    if n == 0 and torch is not None and torch.cpu_only:
        return []  # DDP-NCCL-NO-GPU already predicts the same error for a CPU build
    version = f"torch {torch.version}" if torch is not None and torch.version else "this torch"
    if platform == "Windows":
        why = f"{version} on Windows has no NCCL (PyTorch's Windows builds never include it)"
    elif platform == "Darwin":
        why = f"{version} on macOS has neither CUDA nor NCCL"
    elif torch is not None and torch.cpu_only:
        why = f"{version} is a CPU-only build, without NCCL"
    else:
        why = f"{version} was built without NCCL (torch.distributed.is_nccl_available() is False)"
    return [
        Finding(
            "DDP-NCCL-NOT-BUILT",
            "error",
            f"The DDP backend is nccl{'' if backend else ' (torch default with GPUs)'}, but "
            f"{why}, so init_process_group('nccl') fails before any rank connects.",
            "Use backend='gloo' (gpudiag check --backend gloo), e.g. "
            "init_process_group('gloo' if sys.platform == 'win32' else 'nccl'); or run on "
            "Linux with a CUDA build of torch (its wheels bundle NCCL).",
            NCCL_NOT_BUILT,
            subject="backend",
        )
    ]


def _duplicates(
    chosen: Sequence[int], resolution: Resolution, snapshot: Snapshot, what: str
) -> list[Finding]:
    ranks_of: dict[int, list[int]] = {}
    for rank, ordinal in enumerate(chosen):
        ranks_of.setdefault(max(ordinal, 0), []).append(rank)
    out: list[Finding] = []
    for ordinal, ranks in ranks_of.items():
        if len(ranks) < 2:
            continue
        dev = resolution.devices[ordinal]
        gpu = gpu_by_nvml_index(snapshot, dev.nvml_index)
        out.append(
            Finding(
                "DDP-DUPLICATE-GPU",
                "error",
                f"Local ranks {', '.join(map(str, ranks))} all use {describe_device(dev, snapshot)}"
                f" ({what}); NCCL refuses two ranks on one GPU.",
                "Give each local rank its own GPU: torch.cuda.set_device(local_rank), or list "
                f"{len(chosen)} distinct cuda ordinals.",
                duplicate_gpu_text(gpu.pci_bus_id if gpu else None).replace(
                    "rank 1 and rank 0", f"rank {ranks[1]} and rank {ranks[0]}"
                ),
                subject=dev.uuid,
            )
        )
    return out


def _invalid(
    chosen: Sequence[int], resolution: Resolution, snapshot: Snapshot, option: str
) -> list[Finding]:
    n = len(resolution.devices)
    bad = [(rank, k) for rank, k in enumerate(chosen) if k >= n]
    if not bad or n == 0:
        return []
    ranks = ", ".join(f"local rank {r} -> cuda:{k}" for r, k in bad)
    return [
        Finding(
            "DDP-SET-DEVICE-INVALID",
            "error",
            f"{option}: {ranks}, but only {n} GPU(s) are visible {cvd_phrase(resolution)}: "
            f"{describe_devices(resolution.devices, snapshot)}; torch.cuda.set_device fails "
            "in those ranks.",
            f"Use cuda ordinals 0..{n - 1} (they count the visible GPUs, not nvidia-smi's), "
            "or make more GPUs visible.",
            INVALID_ORDINAL,
            subject=f"cuda:{bad[0][1]}",
        )
    ]


def per_rank_set_device_findings(
    resolution: Resolution, snapshot: Snapshot, values: Sequence[int], backend: str | None
) -> list[Finding]:
    """``--set-device K0,K1,…``: local rank r calls ``torch.cuda.set_device(K_r)``."""
    out = _invalid(values, resolution, snapshot, f"--set-device {','.join(map(str, values))}")
    n = len(resolution.devices)
    if out or n == 0:
        return out
    if (backend or "nccl") == "nccl":
        out += _duplicates(values, resolution, snapshot, "--set-device; negative is a no-op")
    return out


def device_subset_findings(
    resolution: Resolution,
    snapshot: Snapshot,
    subset: Sequence[int],
    backend: str | None,
) -> list[Finding]:
    """DDP over chosen cuda ordinals (Lightning ``devices=[1,2]``, accelerate ``gpu_ids``)."""
    devices = resolution.devices
    n = len(devices)
    out = _invalid(subset, resolution, snapshot, f"--ddp-devices {','.join(map(str, subset))}")
    if out or n == 0:
        return out
    if (backend or "nccl") == "nccl":
        out += _duplicates(subset, resolution, snapshot, "--ddp-devices")
    if out:
        return out
    chosen = [devices[k] for k in subset]
    plan = "; ".join(
        f"local rank {r} -> {describe_device(d, snapshot)}" for r, d in enumerate(chosen)
    )
    out.append(
        Finding(
            "DDP-PLAN",
            "info",
            f"{len(subset)} rank(s) on the chosen devices (--ddp-devices) "
            f"{cvd_phrase(resolution)}: {plan}.",
            None,
        )
    )
    if 0 in subset or any(d.mig_uuid is not None for d in chosen):
        return out
    if resolution.spec is None:
        entries = [str(d.cuda_ordinal) for d in chosen]
    else:
        entries = [d.entry or str(d.nvml_index) for d in chosen]
    cvd = ",".join(e.strip() for e in entries)
    k = len(subset)
    out.append(
        Finding(
            "DDP-CUDA0-CONTEXT",
            "warning",
            f"The ranks use {', '.join(f'cuda:{i}' for i in subset)}, but every rank still "
            f"sees {describe_device(devices[0], snapshot)}: whatever touches CUDA before "
            "torch.cuda.set_device (torch.load without map_location, "
            "torch.cuda.current_device(), device='cuda', dist.barrier() without device_ids) "
            "creates a CUDA context (some hundred MiB) on it in every rank.",
            f"Hide the other GPUs instead of picking a subset: CUDA_VISIBLE_DEVICES={cvd} "
            f"with Lightning devices={k} (or accelerate --gpu_ids all --num_processes {k}); "
            f"the chosen GPUs then are cuda:0..cuda:{k - 1} and nothing lands on physical GPU "
            f"{devices[0].nvml_index}.",
            f"no error: nvidia-smi lists every rank's process on physical GPU "
            f"{devices[0].nvml_index} too (a few hundred MiB each); when that GPU is busy: "
            "torch.OutOfMemoryError: CUDA out of memory.",
            subject=devices[0].uuid,
        )
    )
    return out
