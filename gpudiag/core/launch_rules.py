"""Findings about the launcher itself: which one, disagreeing launchers, rendezvous
under MPI, and DeepSpeed's device flags.

Pure: reads a :class:`~gpudiag.launch.reader.Launch` (``gpudiag.launch.table``
cites every launcher's variables). ``gpudiag.core.ddp`` calls these from
``validate_ddp``; ``gpudiag.core.check`` calls :func:`deepspeed_findings`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from gpudiag.core.ddp_env import ENV_RENDEZVOUS_ORDER, env_missing_text
from gpudiag.findings.texts import STORE_TIMEOUT
from gpudiag.launch.deepspeed import DeepSpeedDevices
from gpudiag.launch.reader import Launch, LauncherView
from gpudiag.launch.table import MPI_FAMILY, SETS_TORCH_ENV, SPAWNS_WORKERS, SPECS
from gpudiag.model import Finding, Severity

_TIMEOUT = STORE_TIMEOUT


def _pair(view: LauncherView, rank_field: str, size_field: str | None, label: str) -> str | None:
    """``rank 1 of 4 (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE)``, from what is known."""
    rank, rank_var = view.value(rank_field), view.spec.var(rank_field)
    if rank is None or rank_var is None:
        return None
    size = view.value(size_field) if size_field else None
    size_var = view.spec.var(size_field) if size_field else None
    if size is None or size_var is None:
        return f"{label} {rank} ({rank_var})"
    return f"{label} {rank} of {size} ({rank_var}/{size_var})"


def launcher_finding(launch: Launch) -> Finding | None:
    """DDP-LAUNCHER: names the launcher and what its variables say."""
    if launch.launcher is None or launch.view is None:
        return None
    if launch.launcher in ("torchrun", "slurm", "env") and not launch.chosen:
        # torchrun's and srun's ranks are described by the DDP findings' own
        # variable names (LOCAL_WORLD_SIZE, SLURM_PROCID...), as before this model.
        return None
    view = launch.view
    rendezvous = (
        f"MASTER_ADDR={launch.master_addr}, MASTER_PORT={launch.master_port}"
        if launch.master_addr and launch.master_port is not None
        else "MASTER_ADDR/MASTER_PORT not both set"
    )
    if launch.chosen and launch.launcher in SETS_TORCH_ENV:
        rendezvous = "the launcher sets MASTER_ADDR and MASTER_PORT itself"
    if launch.chosen:
        spec = view.spec
        gives = ", ".join(
            v for v in (spec.rank, spec.world_size, spec.local_rank, spec.local_world_size) if v
        )
        message = (
            f"Evaluating a launch by {view.spec.title} before it starts (--launcher "
            f"{launch.launcher}): each rank will get {gives}; torch's env:// rendezvous: "
            f"{rendezvous}."
        )
    else:
        facts = [
            _pair(view, "rank", "world_size", "rank"),
            _pair(view, "local_rank", "local_world_size", "local rank"),
            _pair(view, "node_rank", None, "node"),
        ]
        said = ", ".join(f for f in facts if f) or "no rank (not a launched rank)"
        outer = [SPECS[o.name].title for o in launch.others if o.name != "env"]
        message = (
            f"Launched by {view.spec.title}: {said}"
            + (f"; inside {', '.join(outer)}" if outer else "")
            + f"; torch's env:// rendezvous: {rendezvous}."
        )
    return Finding(
        code="DDP-LAUNCHER",
        severity="info",
        message=message,
        fix=None,
        predicts=None,
        subject=launch.launcher,
    )


def problem_findings(launch: Launch, skip: Collection[str]) -> list[Finding]:
    """DDP-BAD-ENV warnings for launcher variables gpudiag could not use (not in ``skip``)."""
    out = []
    for p in launch.problems:
        if p.var in skip:
            continue
        shown = repr(p.raw) if len(p.raw) <= 40 else f"{p.raw[:20]!r}... ({len(p.raw)} characters)"
        out.append(
            Finding(
                code="DDP-BAD-ENV",
                severity="warning",
                message=f"{p.var}={shown} is {p.reason}: gpudiag ignores it, and a script that "
                "int()s it fails or picks the wrong rank.",
                fix=f"Unset {p.var} and let the launcher set it.",
                subject=p.var,
            )
        )
    return out


def _pair_fields(a: LauncherView, b: LauncherView) -> tuple[str, ...]:
    """The fields worth comparing between two launchers (none for known nestings)."""
    names = {a.name, b.name}
    if "slurm" in names and names & (SPAWNS_WORKERS | {"env"}):
        # torchrun/DeepSpeed/Horovod start their own workers inside a Slurm task
        # (DDP-SLURM-NESTED), and RANK vs SLURM_PROCID is DDP-SLURM-MISMATCH.
        return ()
    if "slurm" in names:
        # mpirun inside an allocation: MPI ranks are not Slurm's task ids (Open MPI
        # starts its daemons with srun), but the job size should be the allocation's.
        return ("world_size",)
    return ("world_size", "rank", "local_world_size", "local_rank")


def mismatch_findings(launch: Launch) -> list[Finding]:
    """DDP-LAUNCHER-MISMATCH for every pair of launchers whose counts disagree."""
    if launch.view is None:
        return []
    views = [launch.view, *launch.others] if not launch.chosen else list(launch.others)
    out: list[Finding] = []
    for i, a in enumerate(views):
        for b in views[i + 1 :]:
            for field_name in _pair_fields(a, b):
                va, vb = a.value(field_name), b.value(field_name)
                var_a, var_b = a.spec.var(field_name), b.spec.var(field_name)
                if va is None or vb is None or va == vb or var_a == var_b:
                    continue
                out.append(_mismatch(a, b, field_name, va, vb))
    return out


def _mismatch(a: LauncherView, b: LauncherView, field_name: str, va: int, vb: int) -> Finding:
    var_a, var_b = a.spec.var(field_name), b.spec.var(field_name)
    torch_reads = "env" in (a.name, b.name) and field_name in ("rank", "world_size")
    severity: Severity = "error" if torch_reads else "warning"
    if field_name == "world_size":
        effect = (
            "the ranks torch waits for are not the processes that were started; rendezvous "
            "waits for ranks that never come and times out"
            if torch_reads
            else "the MPI job does not fill the Slurm allocation it runs in (or oversubscribes "
            "it), so ranks and GPUs do not line up with what Slurm gave each node"
            if {a.name, b.name} & {"slurm"}
            else "the two launchers do not describe the same job"
        )
    elif torch_reads:
        effect = (
            "torch uses RANK, so this rank takes another rank's place (a RANK exported "
            "once in the job script gives every rank the same value)"
        )
    else:
        effect = "the two launchers do not place this process alike"
    mpi = a if a.name in MPI_FAMILY else b if b.name in MPI_FAMILY else None
    other = a if mpi is b else b
    if "env" in (a.name, b.name) and mpi is not None:
        fix = (
            f"Set {var_a if a.name == 'env' else var_b} from {mpi.spec.var(field_name)} in "
            "each rank (a wrapper or the script), not once for the whole job."
        )
    elif "slurm" in (a.name, b.name) and mpi is not None:
        fix = (
            "Start as many MPI ranks as Slurm tasks (mpirun without -n inside the allocation "
            "uses it), or start the script with srun alone."
        )
    else:
        fix = f"Unset the variables {other.spec.title} did not set, or start one launcher only."
    return Finding(
        code="DDP-LAUNCHER-MISMATCH",
        severity=severity,
        message=f"{var_a}={va} from {a.spec.title} but {var_b}={vb} from {b.spec.title}: {effect}.",
        fix=fix,
        predicts=_TIMEOUT if field_name == "world_size" and torch_reads else None,
        subject=var_a,
    )


def rendezvous_findings(launch: Launch, env: Mapping[str, str]) -> list[Finding]:
    """Under (or before) an MPI launch: torch's env:// variables MPI does not set."""
    name = launch.launcher
    if name not in MPI_FAMILY or launch.view is None:
        return []
    missing = [v for v in ENV_RENDEZVOUS_ORDER if not env.get(v)]
    if not missing:
        return []
    view = launch.view
    rank_var, size_var = view.spec.rank, view.spec.world_size
    addr_missing = [v for v in missing if v.startswith("MASTER_")]
    title = view.spec.title
    mapping = (
        f"set RANK/WORLD_SIZE from {rank_var}/{size_var} in each rank, or pass "
        f"rank=int(os.environ['{rank_var}']), world_size=int(os.environ['{size_var}']) to "
        "init_process_group"
    )
    if launch.chosen:
        return [
            Finding(
                code="DDP-LAUNCHER-ENV-MISSING",
                severity="warning",
                message=f"{title} does not set torch's {', '.join(missing)}: "
                "init_process_group(init_method='env://') needs them in every rank.",
                fix=(f"Export them: {view.spec.export}; " if addr_missing else "") + f"{mapping}.",
                predicts=env_missing_text(missing[0]),
                subject=missing[0],
            )
        ]
    where = f"Running under {title} as rank {view.rank} of {view.world_size}"
    if addr_missing:
        return [
            Finding(
                code="DDP-LAUNCHER-ENV-MISSING",
                severity="error",
                message=f"{where}, but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                "not "
                f"set: {title} does not set them, so init_process_group(init_method='env://') "
                "cannot rendezvous.",
                fix=f"Export them to every rank: {view.spec.export}; {mapping}.",
                predicts=env_missing_text(missing[0]),
                subject=missing[0],
            )
        ]
    return [
        Finding(
            code="DDP-LAUNCHER-ENV-MISSING",
            severity="warning",
            message=f"{where}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
            "set, "
            f"and env:// reads them; {title} gives {rank_var} and {size_var} instead.",
            fix=f"{mapping[0].upper()}{mapping[1:]}.",
            predicts=env_missing_text(missing[0]),
            subject=missing[0],
        )
    ]


def ranks_fix(launch: Launch | None, n: int) -> str:
    """The start of DDP-TOO-MANY-RANKS' fix, in the launcher's own terms."""
    if launch is None or launch.launcher in (None, "torchrun", "env"):
        return f"Use --nproc-per-node {n} (one rank per visible GPU)"
    return f"Start {n} rank(s) per node, one per visible GPU ({launch.start_command(n)})"


def deepspeed_findings(ds: DeepSpeedDevices, user_visible: str | None) -> list[Finding]:
    """DDP-DEEPSPEED-DEVICES / DDP-DEEPSPEED-REFUSED for a DeepSpeed launch to come."""
    if ds.error is not None:
        return [
            Finding(
                code="DDP-DEEPSPEED-REFUSED",
                severity="error",
                message=f"DeepSpeed's runner refuses to start ({ds.how}).",
                fix="Give --include or --exclude (slots are the machine's GPU indices, "
                "localhost:0,1), or --num_gpus, not several; or only export "
                "CUDA_VISIBLE_DEVICES with integer indices.",
                predicts=ds.error,
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    assert ds.spec is not None
    if ds.ignored is not None and ds.ignored != ds.spec:
        return [
            Finding(
                code="DDP-DEEPSPEED-DEVICES",
                severity="warning",
                message=f"DeepSpeed ignores CUDA_VISIBLE_DEVICES={ds.ignored} because {ds.how} is "
                f"given, and sets CUDA_VISIBLE_DEVICES={ds.spec} in every worker: slots count "
                "the machine's GPUs, not the ones you made visible.",
                fix=f"Drop the export and pass --include localhost:{ds.ignored}, or drop "
                "--include/--exclude/--num_gpus and keep the export.",
                predicts=None,
                subject="CUDA_VISIBLE_DEVICES",
            )
        ]
    before = f" (it was {user_visible})" if user_visible and user_visible != ds.spec else ""
    if ds.ignored is not None:
        before = f" (it ignores CUDA_VISIBLE_DEVICES={ds.ignored}, which happens to match)"
    return [
        Finding(
            code="DDP-DEEPSPEED-DEVICES",
            severity="info",
            message=f"DeepSpeed's runner sets CUDA_VISIBLE_DEVICES={ds.spec} in every worker from "
            f"{ds.how}{before}; each worker then uses cuda:LOCAL_RANK within those.",
            fix=None,
            predicts=None,
            subject="CUDA_VISIBLE_DEVICES",
        )
    ]
