"""Findings about the values of torch's and Slurm's launcher variables.

Pure: each variable is read by the one launcher reader
(:func:`gpudiag.launch.ints.read_int`, ranges in :data:`gpudiag.launch.ints.RANGES`);
this module words what torch (``torch/distributed/rendezvous.py``, torch 2.13) and
training scripts do with a value gpudiag cannot use: ``DDP-ENV-EMPTY``,
``DDP-BAD-ENV``, ``DDP-ENV-RANGE``. :func:`gpudiag.core.ddp.validate_ddp` calls it.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.launch.ints import RANGE_TEXT, RANGES, parse_env_int, read_int
from gpudiag.launch.reader import parse_tasks_per_node
from gpudiag.model import Finding, Severity

LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
ENV_RENDEZVOUS_ORDER = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SLURM_INT_VARS = (
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
)
_INT_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_PORT",
    *SLURM_INT_VARS,
)
#: Every variable whose value gpudiag checks (an empty value is a finding).
ENV_VARS = (*LAUNCHER_VARS, *SLURM_INT_VARS)
#: Read by torch or by every DDP script: a bad value inside a launch is an error.
TORCH_READS = frozenset(LAUNCHER_VARS)
#: Those torch itself int()s (env:// rendezvous; LOCAL_RANK in get_node_local_rank and
#: DeviceMesh), so the int() error is the predicted text.
_PREDICTS_INT = frozenset(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"))


def env_missing_text(var: str) -> str:
    """The ValueError env:// rendezvous raises for a missing variable."""
    return (
        "ValueError: Error initializing torch.distributed using env:// rendezvous: "
        f"environment variable {var} expected, but not set"
    )


def _show(raw: str) -> str:
    """``repr`` of a value, shortened so a 5000-character value cannot flood the report."""
    if len(raw) <= 40:
        return repr(raw)
    return f"{raw[:20]!r}... ({len(raw)} characters)"


def env_severity(var: str, in_launch: bool) -> Severity:
    """Errors only for variables torch reads, and only inside a launch (RANK set)."""
    return "error" if in_launch and var in TORCH_READS else "warning"


def read_ints(env: Mapping[str, str], in_launch: bool, out: list[Finding]) -> dict[str, int]:
    """Strictly parsed launcher integers; a finding for each empty or malformed one."""
    values: dict[str, int] = {}
    for var in ENV_VARS:
        raw = env.get(var)
        if raw is None:
            continue
        level = env_severity(var, in_launch)
        if raw == "":
            out.append(_empty_finding(var, level))
            continue
        if var not in _INT_VARS:
            continue
        if var == "SLURM_NTASKS_PER_NODE":
            raw_node = env.get("SLURM_NODEID")
            node_id = parse_env_int(raw_node) if raw_node else None
            tasks = parse_tasks_per_node(raw, node_id)
            if isinstance(tasks, bool):
                continue  # valid, but differs per node and this node is unknown
            if tasks is not None:
                values[var] = tasks
                continue
            out.append(
                Finding(
                    code="DDP-BAD-ENV",
                    severity="warning",
                    message=f"{var}={_show(raw)} is not a Slurm task count (Slurm writes N, or "
                    "N(xM) "
                    "for N tasks on each of M nodes); torch does not read it, so gpudiag "
                    "ignores it.",
                    fix=f"Unset {var} or let sbatch/srun set it (--ntasks-per-node).",
                    subject=var,
                )
            )
            continue
        text = read_int(raw)
        if text.value is not None:
            values[var] = text.value
            continue
        int_error = text.int_error
        if text.kind == "too_long":
            # Only digits, but more than any rank, size or port can have.
            out.append(
                Finding(
                    code="DDP-ENV-RANGE",
                    severity=level,
                    message=f"{var} has {len(raw.lstrip('+-'))} digits: far out of range (it must "
                    "be "
                    f"{RANGE_TEXT[var]}).",
                    fix=f"Unset {var} or set it to {RANGE_TEXT[var]}; let torchrun or srun set it.",
                    predicts=int_error if var in _PREDICTS_INT else None,
                    subject=var,
                )
            )
        elif text.kind == "python_only":
            # Python's int() takes it (' 3', '1_0', '٣'): torch would too.
            out.append(
                Finding(
                    code="DDP-BAD-ENV",
                    severity="warning",
                    message=f"{var}={_show(raw)} is not a plain integer (ASCII digits, optional "
                    "sign): "
                    "Python's int() accepts it, so torch may too, but shells and Slurm do not; "
                    "gpudiag ignores it.",
                    fix=f"Set {var} to plain digits, or let torchrun or srun set it.",
                    subject=var,
                )
            )
        else:
            if var in TORCH_READS:
                reader = " (torch and training scripts int() it)"
                if not in_launch:
                    reader += "; torchrun replaces it in each worker, but a rank started "
                    reader += "without torchrun would fail"
            else:
                reader = "; torch does not read it, so gpudiag ignores it"
            out.append(
                Finding(
                    code="DDP-BAD-ENV",
                    severity=level,
                    message=f"{var}={_show(raw)} is not an integer{reader}.",
                    fix=f"Unset {var} or set it to an integer; let torchrun or srun set it.",
                    predicts=int_error if var in _PREDICTS_INT else None,
                    subject=var,
                )
            )
    return values


def _empty_finding(var: str, severity: Severity) -> Finding:
    if var in ENV_RENDEZVOUS_ORDER:
        effect = (
            "init_process_group(init_method='env://') treats an empty value as unset "
            "(it tests `not value`)"
        )
        predicts: str | None = env_missing_text(var)
    elif var in TORCH_READS:
        effect = "int() of it fails in torch and in training scripts"
        predicts = "ValueError: invalid literal for int() with base 10: ''"
        if var not in _PREDICTS_INT:
            effect, predicts = "a script that int()s it fails", None
    else:
        effect, predicts = "torch does not read it, so gpudiag ignores it", None
    return Finding(
        code="DDP-ENV-EMPTY",
        severity=severity,
        message=f"{var} is set to an empty string: {effect}.",
        fix=f"Unset {var} or give it a value; let torchrun or srun set it.",
        predicts=predicts,
        subject=var,
    )


def range_findings(v: dict[str, int], in_launch: bool, out: list[Finding]) -> int | None:
    """Drop out-of-range values from ``v`` with a finding each; return a negative LOCAL_RANK."""
    negative_local_rank: int | None = None
    for var, (low, high) in RANGES.items():
        if var not in v or low <= v[var] <= high:
            continue
        value = v.pop(var)
        if var == "LOCAL_RANK" and value < 0:
            negative_local_rank = value
            continue
        predicts = None
        if var == "MASTER_PORT":
            predicts = f"ValueError: port must have value from 0 to 65535 but was {value}."
        out.append(
            Finding(
                code="DDP-ENV-RANGE",
                severity=env_severity(var, in_launch),
                message=f"{var}={value} is out of range: it must be {RANGE_TEXT[var]}"
                + (
                    "."
                    if var in TORCH_READS
                    else "; torch does not read it, so gpudiag ignores it."
                ),
                fix=f"Set {var} to {RANGE_TEXT[var]}, or let torchrun or srun set it.",
                predicts=predicts,
                subject=var,
            )
        )
    if v.get("MASTER_PORT") == 0:
        out.append(
            Finding(
                code="DDP-ENV-RANGE",
                severity="warning",
                message="MASTER_PORT=0: torch accepts it, but rank 0's store then listens on a "
                "random "
                "port that the other ranks cannot know, so only a single-rank job works.",
                fix="Set MASTER_PORT to a fixed free port (e.g. 29500) on every rank.",
                subject="MASTER_PORT",
            )
        )
    pairs = (
        ("RANK", "WORLD_SIZE"),
        ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
    )
    for rank_var, size_var in pairs:
        if rank_var in v and size_var in v and v[rank_var] >= v[size_var]:
            torch_pair = rank_var in TORCH_READS
            out.append(
                Finding(
                    code="DDP-ENV-RANGE",
                    severity=env_severity(rank_var, in_launch),
                    message=f"{rank_var}={v[rank_var]} but {size_var}={v[size_var]}: ranks run "
                    "from 0 "
                    f"to {size_var}-1"
                    + (
                        ", so this rank does not belong to the group and rendezvous cannot "
                        "complete."
                        if rank_var == "RANK"
                        else "."
                        if torch_pair
                        else "; torch does not read them."
                    ),
                    fix=f"Let torchrun or srun set {rank_var} and {size_var} instead of exporting "
                    "them by hand.",
                    subject=rank_var,
                )
            )
    if "LOCAL_WORLD_SIZE" in v and "WORLD_SIZE" in v and v["LOCAL_WORLD_SIZE"] > v["WORLD_SIZE"]:
        out.append(
            Finding(
                code="DDP-ENV-RANGE",
                severity=env_severity("LOCAL_WORLD_SIZE", in_launch),
                message=f"LOCAL_WORLD_SIZE={v['LOCAL_WORLD_SIZE']} but "
                f"WORLD_SIZE={v['WORLD_SIZE']}: "
                "a node cannot run more ranks than the whole job has.",
                fix="Let torchrun set WORLD_SIZE and LOCAL_WORLD_SIZE (--nnodes, "
                "--nproc-per-node).",
                subject="LOCAL_WORLD_SIZE",
            )
        )
    return negative_local_rank
