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

import dataclasses
from collections.abc import Mapping, Sequence

from gpudiag.core.ddp import (
    ENV_RENDEZVOUS_ORDER,
    LAUNCHER_VARS,
    NCCL_NOT_BUILT,
    env_missing_text,
    validate_ddp,
)
from gpudiag.core.port import PortProber, port_findings, port_target
from gpudiag.core.rank_devices import device_subset_findings, per_rank_set_device_findings
from gpudiag.launch.reader import read_launch
from gpudiag.launch.table import SPECS
from gpudiag.model import Finding, Resolution, Snapshot


def launched_findings(
    env: Mapping[str, str],
    *,
    script_reads: Sequence[str] = (),
    init_rank_args: bool = False,
    launcher: str | None = None,
) -> list[Finding]:
    """``check --launched``: every variable the rank will read must be set.

    Args:
        env: the rank's environment.
        launcher: ``check --launcher``; else the launcher whose variables are set
            (:func:`gpudiag.launch.reader.read_launch`).
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
    # MPI, Horovod, DeepSpeed or accelerate started this rank: not a plain python.
    started_by = read_launch(env, launcher).launcher
    title = (
        SPECS[started_by].title if started_by not in (None, "torchrun", "slurm", "env") else None
    )
    if title is not None:
        context = f"{title} started this rank, but does not set them for torch's env://"
    elif present:
        context = f"only {', '.join(present)} {'is' if len(present) == 1 else 'are'} set"
    elif under_srun:
        context = "this is an srun task, but no torchrun variable is set"
    else:
        context = "no launcher variable is set: this looks like a plain `python train.py`"
    hint = ""
    if not script_reads and "LOCAL_RANK" not in env:
        # Unknown script: most DDP scripts read LOCAL_RANK before init_process_group, so
        # name both failures; --script-reads picks one.
        hint = (
            " A script that reads os.environ['LOCAL_RANK'] first fails earlier, with "
            "KeyError: 'LOCAL_RANK' (say so with --script-reads LOCAL_RANK)."
        )
        predicts += (
            "; or, where the script reads os.environ['LOCAL_RANK'] first: KeyError: 'LOCAL_RANK'"
        )
    if title is not None:
        fix = (
            f"Export MASTER_ADDR and MASTER_PORT to every rank and map RANK, WORLD_SIZE and "
            f"LOCAL_RANK from {title}'s own variables before init_process_group (`gpudiag "
            "explain DDP-LAUNCHER-ENV-MISSING` shows how for each launcher), or start the "
            "ranks with torchrun."
        )
    elif under_srun:
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
            code="DDP-LAUNCHED-ENV-MISSING",
            severity="error",
            message=f"--launched says this is a launched rank, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set ({context}). It fails first on "
            f"{first}: {reader}.{hint}",
            fix=fix,
            predicts=predicts,
            subject=first,
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
    if available is None and (
        platform in ("Windows", "Darwin") or (torch is not None and torch.cpu_only)
    ):
        available = False  # no such build has NCCL; older snapshots lack nccl_available
    if available is not False:
        return []
    if torch is not None and torch.cpu_only and (n == 0 or backend is None):
        # n == 0: DDP-NCCL-NO-GPU already predicts it. backend None: torch 2.13's
        # BackendConfig picks the backend of torch._C._get_accelerator(), which is the
        # CPU (gloo) for a CPU build, so no NCCL is asked for.
        return []
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
            code="DDP-NCCL-NOT-BUILT",
            severity="error",
            message=f"The DDP backend is nccl{'' if backend else ' (torch default with GPUs)'}, "
            "but "
            f"{why}, so init_process_group('nccl') fails before any rank connects.",
            fix="Use backend='gloo' (gpudiag check --backend gloo), e.g. "
            "init_process_group('gloo' if sys.platform == 'win32' else 'nccl'); or run on "
            "Linux with a CUDA build of torch (its wheels bundle NCCL).",
            predicts=NCCL_NOT_BUILT,
            subject="backend",
        )
    ]


def ddp_findings(
    resolution: Resolution,
    snapshot: Snapshot,
    *,
    env: Mapping[str, str],
    nproc_per_node: int | None,
    backend: str | None,
    ddp_set_device: int | None,
    launched: bool,
    script_reads: Sequence[str],
    init_rank_args: bool,
    set_device_per_rank: Sequence[int] | None,
    ddp_devices: Sequence[int] | None,
    port_prober: PortProber | None,
    launcher: str | None = None,
) -> list[Finding]:
    """All DDP findings: :func:`validate_ddp`, then this module's rules, the per-rank
    device rules (:mod:`gpudiag.core.rank_devices`) and the port check
    (:mod:`gpudiag.core.port`, only with a ``port_prober``)."""
    nproc = nproc_per_node
    if nproc is None and ddp_devices is not None:
        nproc = len(ddp_devices)
    if nproc is None and set_device_per_rank is not None:
        nproc = len(set_device_per_rank)
    out = validate_ddp(
        resolution,
        snapshot,
        env=env,
        nproc_per_node=nproc,
        backend=backend,
        set_device=ddp_set_device,
        launcher=launcher,
    )
    if ddp_set_device is not None:
        hint = (
            " If --set-device describes only one rank, say which (--local-rank R), or give "
            "one value per local rank (--set-device 0,1,2,3)."
        )
        out = [
            dataclasses.replace(f, fix=(f.fix or "") + hint) if f.code == "DDP-DUPLICATE-GPU" else f
            for f in out
        ]
    out += nccl_findings(snapshot, resolution, backend)
    if set_device_per_rank is not None:
        out += per_rank_set_device_findings(resolution, snapshot, set_device_per_rank, backend)
    if ddp_devices is not None:
        # validate_ddp plans local rank r on cuda:r; with a subset rank r uses ddp_devices[r].
        out = [f for f in out if f.code != "DDP-PLAN"]
        out += device_subset_findings(resolution, snapshot, ddp_devices, backend)
    if launched:
        mine = launched_findings(
            env, script_reads=script_reads, init_rank_args=init_rank_args, launcher=launcher
        )
        if mine:
            superseded = ("DDP-NOT-LAUNCHED", "DDP-LAUNCHER-ENV-MISSING")
            out = [f for f in out if f.code not in superseded] + mine
        else:
            out = [f for f in out if f.code != "DDP-NOT-LAUNCHED"]
    elif script_reads:
        out = [_first_read(f, env, script_reads) for f in out]
    target = port_target(env) if port_prober is not None else None
    if port_prober is not None and target is not None:
        out += port_findings(port_prober(target.address, target.port), target)
    return out


def _first_read(finding: Finding, env: Mapping[str, str], script_reads: Sequence[str]) -> Finding:
    """DDP-NOT-LAUNCHED predicts the variable the script itself reads first, if missing."""
    if finding.code != "DDP-NOT-LAUNCHED":
        return finding
    for var in script_reads:
        if var not in env:
            return dataclasses.replace(finding, predicts=f"KeyError: '{var}'")
        if not env[var]:
            break
    return finding
