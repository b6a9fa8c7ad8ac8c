"""``gpudiag check``: every validator, combined into one :class:`Report`.

Which validators run (decided by the lead, documented in ``docs/check.md``):

* environment (CUDA_VISIBLE_DEVICES resolution, inventory, Slurm) and health:
  always;
* DataParallel: only when a DataParallel option is given;
* DDP: when a DDP option is given or a launcher variable (``RANK``,
  ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
  ``MASTER_PORT``, ``SLURM_*``) is present in ``env``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from gpudiag.core.dataparallel import (
    cvd_phrase,
    describe_devices,
    gpu_by_nvml_index,
    validate_dataparallel,
)
from gpudiag.core.ddp import has_launcher_env
from gpudiag.core.health import health_findings
from gpudiag.core.host import kineto_findings, with_host_findings
from gpudiag.core.launch_rules import deepspeed_findings
from gpudiag.core.precision import precision_findings
from gpudiag.core.prelaunch import ddp_findings
from gpudiag.core.rank_devices import set_device_roles
from gpudiag.errors import GpudiagInputError
from gpudiag.launch.deepspeed import deepspeed_devices
from gpudiag.launch.table import canonical_launcher, present_launchers

if TYPE_CHECKING:
    from gpudiag.core.visibility import DriverAsker
from gpudiag.model import SEVERITIES, Finding, Resolution, Snapshot

if TYPE_CHECKING:
    from gpudiag.core.port import PortProber

CODES: dict[str, str] = {
    "CHECK-EXPECT-GPUS": "the number of visible GPUs differs from --expect-gpus",
}

#: Version of the ``gpudiag check --json`` document (``docs/check.md``).
REPORT_SCHEMA = "gpudiag-check/1"


class _FromSnapshot(enum.Enum):
    TOKEN = "from-snapshot"


#: Default of ``visible``/``order``: take the value recorded in the snapshot's env.
FROM_SNAPSHOT: Final = _FromSnapshot.TOKEN

_EMPTY_ENV: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Report:
    """The outcome of a check.

    Attributes:
        ok: True when no finding has severity ``error``.
        resolution: which physical devices are cuda:0, cuda:1, … for the job.
        findings: every finding, in check order (environment, DataParallel, DDP, health).
        checks: the validators that ran (``environment``, ``dataparallel``, ``ddp``, ``health``).
        snapshot: the machine checked (for rendering; not part of equality).
    """

    ok: bool
    resolution: Resolution
    findings: tuple[Finding, ...]
    checks: tuple[str, ...] = ()
    snapshot: Snapshot | None = field(default=None, compare=False, repr=False)

    def count(self, severity: str) -> int:
        """How many findings have that severity."""
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The findings of severity ``error``."""
        return tuple(f for f in self.findings if f.severity == "error")

    def exit_code(self, *, strict: bool = False) -> int:
        """0 clean (warnings allowed), 1 errors, or warnings under ``strict``."""
        if self.count("error") or (strict and self.count("warning")):
            return 1
        return 0

    def to_json(self) -> dict[str, object]:
        """The ``gpudiag check --json`` document (schema in ``docs/check.md``)."""
        visible: list[dict[str, object]] = []
        for dev in self.resolution.devices:
            item = dev.to_json()
            gpu = (
                gpu_by_nvml_index(self.snapshot, dev.nvml_index)
                if self.snapshot is not None
                else None
            )
            item["name"] = gpu.name if gpu is not None else None
            visible.append(item)
        return {
            "schema": REPORT_SCHEMA,
            "ok": self.ok,
            "cuda_visible_devices": self.resolution.spec,
            "cuda_device_order": self.resolution.order,
            "certain": self.resolution.certain,
            "cuinit_error": self.resolution.cuinit_error,
            "visible": visible,
            "checks": list(self.checks),
            "counts": {s: self.count(s) for s in SEVERITIES},
            "findings": [f.to_json() for f in self.findings],
        }


def run_check(
    snapshot: Snapshot,
    *,
    visible: str | _FromSnapshot | None = FROM_SNAPSHOT,
    order: str | _FromSnapshot | None = FROM_SNAPSHOT,
    device_ids: Sequence[int] | None = None,
    output_device: int | None = None,
    set_device: int | None = None,
    module_device: str | None = None,
    batch_size: int | None = None,
    dataparallel: bool = False,
    nproc_per_node: int | None = None,
    backend: str | None = None,
    amp: str | None = None,
    expect_gpus: int | None = None,
    env: Mapping[str, str] = _EMPTY_ENV,
    driver: DriverAsker | None = None,
    launcher: str | None = None,
    deepspeed_include: str | None = None,
    deepspeed_exclude: str | None = None,
    launched: bool = False,
    script_reads: Sequence[str] = (),
    init_rank_args: bool = False,
    set_device_per_rank: Sequence[int] | None = None,
    local_rank: int | None = None,
    ddp_devices: Sequence[int] | None = None,
    tf32: bool = False,
    model_dtype: str | None = None,
    port_prober: PortProber | None = None,
) -> Report:
    """Check a job's GPU configuration against a machine.

    Args:
        snapshot: the machine.
        visible: ``CUDA_VISIBLE_DEVICES`` to evaluate (None = unset);
            default: the snapshot's recorded value.
        order: ``CUDA_DEVICE_ORDER`` to evaluate; default: the snapshot's.
        device_ids, output_device, set_device, module_device, batch_size:
            DataParallel inputs (:func:`~gpudiag.core.dataparallel.validate_dataparallel`).
        dataparallel: validate DataParallel even when none of its options is given
            (torch's defaults: all visible devices).
        nproc_per_node, backend: DDP inputs (:func:`~gpudiag.core.ddp.validate_ddp`).
        amp: ``bf16`` or ``fp16`` when the job uses autocast.
        expect_gpus: the number of GPUs the job must see, or None.
        env: launcher variables (torchrun, Slurm); the live environment in the CLI.
        driver: asks the CUDA driver to confirm the mapping (live machines only);
            None keeps the rules' answer.
        launcher: evaluate a launch by this launcher before it starts (``torchrun``,
            ``deepspeed``, ``openmpi``...; :mod:`gpudiag.launch.table`).
        deepspeed_include, deepspeed_exclude: DeepSpeed's ``--include``/``--exclude``
            (imply ``launcher='deepspeed'``); with ``nproc_per_node`` as ``--num_gpus``
            they decide the workers' ``CUDA_VISIBLE_DEVICES``.
        launched: the job asserts it runs inside a launcher (``check --launched``):
            missing launcher variables are errors.
        script_reads: variables the script reads itself before ``init_process_group``,
            in order (``LOCAL_RANK``): the first missing one is the predicted error.
        init_rank_args: ``init_process_group`` gets ``rank=``/``world_size=``.
        set_device_per_rank: one ``torch.cuda.set_device`` ordinal per local rank.
        local_rank: the local rank a single ``set_device`` describes (default: the
            environment's ``LOCAL_RANK`` when it equals ``set_device``; otherwise every
            rank calls ``set_device(set_device)``).
        ddp_devices: the cuda ordinals the DDP ranks use (Lightning ``devices=[1,2]``,
            accelerate ``gpu_ids``); local rank r uses ``ddp_devices[r]``.
        tf32: the job switches TF32 on.
        model_dtype: the dtype the model was trained in (``bf16``/``fp16``/``fp32``).
        port_prober: binds the rendezvous port for an instant (live only); None skips
            the port check (a snapshot cannot know which ports are taken).

    Raises:
        GpudiagInputError: an invalid option value.
    """
    from gpudiag.core.inventory import inventory_findings
    from gpudiag.core.visibility import resolve_checked, slurm_findings

    if expect_gpus is not None and expect_gpus < 0:
        raise GpudiagInputError(f"--expect-gpus must be 0 or more, got {expect_gpus}")
    spec = snapshot.cuda_visible_devices if isinstance(visible, _FromSnapshot) else visible
    dev_order = snapshot.cuda_device_order if isinstance(order, _FromSnapshot) else order
    launcher = _launcher_option(launcher, deepspeed_include, deepspeed_exclude)
    launcher_findings: list[Finding] = []
    if launcher == "deepspeed" and present_launchers(env)[:1] != ["deepspeed"]:
        # Before DeepSpeed starts: its runner rewrites CUDA_VISIBLE_DEVICES.
        ds = deepspeed_devices(
            len(snapshot.gpus),
            spec,
            include=deepspeed_include,
            exclude=deepspeed_exclude,
            num_gpus=nproc_per_node,
        )
        launcher_findings += deepspeed_findings(ds, spec)
        if ds.spec is not None:
            spec = ds.spec
            if nproc_per_node is None:
                nproc_per_node = len(ds.spec.split(","))
    resolution = resolve_checked(spec, dev_order, snapshot, driver)
    checks = ["environment"]

    findings: list[Finding] = list(resolution.findings)
    findings += launcher_findings
    same_env = spec == snapshot.cuda_visible_devices and dev_order == snapshot.cuda_device_order
    findings += inventory_findings(snapshot, resolution if same_env else None)
    findings += slurm_findings(env, resolution, snapshot)
    n = len(resolution.devices)
    if expect_gpus is not None and expect_gpus != n:
        findings.append(
            Finding(
                "CHECK-EXPECT-GPUS",
                "error",
                f"Expected {expect_gpus} GPU(s) but {n} are visible {cvd_phrase(resolution)}"
                + (f": {describe_devices(resolution.devices, snapshot)}." if n else "."),
                "Check the job's GPU request (--gpus / --gres), CUDA_VISIBLE_DEVICES and "
                "gpudiag list.",
                None,
                "CUDA_VISIBLE_DEVICES",
            )
        )

    findings = with_host_findings(findings, snapshot)
    findings += kineto_findings(env, snapshot)

    dp_set_device, ddp_set_device = set_device_roles(
        set_device, set_device_per_rank, local_rank, nproc_per_node, env
    )
    ddp_asked = (
        launched or ddp_devices is not None or set_device_per_rank is not None or bool(script_reads)
    )
    run_ddp = (
        nproc_per_node is not None
        or backend is not None
        or launcher is not None
        or has_launcher_env(env)
        or ddp_asked
    )
    other_dp = (device_ids, output_device, module_device, batch_size)
    dp_asked = dataparallel or any(o is not None for o in other_dp)
    if dp_asked or (dp_set_device is not None and not run_ddp):
        checks.append("dataparallel")
        findings += validate_dataparallel(
            resolution,
            snapshot,
            device_ids=device_ids,
            output_device=output_device,
            set_device=dp_set_device,
            module_device=module_device,
            batch_size=batch_size,
        )
    elif dp_set_device is not None:
        # A DDP rank's set_device: no DataParallel follows it, so only the set_device step
        # of the DataParallel rules applies (an invalid or negative ordinal).
        findings += [
            f
            for f in validate_dataparallel(
                resolution,
                snapshot,
                device_ids=None,
                output_device=None,
                set_device=dp_set_device,
                module_device=None,
                batch_size=None,
            )
            # With no GPU visible, set_device itself is where the script fails first.
            if f.code.startswith("DP-SET-DEVICE-") or f.code == "DP-NO-VISIBLE-GPU"
        ]
    if run_ddp:
        checks.append("ddp")
        findings += ddp_findings(
            resolution,
            snapshot,
            env=env,
            nproc_per_node=nproc_per_node,
            backend=backend,
            ddp_set_device=ddp_set_device,
            launched=launched,
            script_reads=script_reads,
            init_rank_args=init_rank_args,
            set_device_per_rank=set_device_per_rank,
            ddp_devices=ddp_devices,
            port_prober=port_prober,
            launcher=launcher,
        )
    checks.append("health")
    findings += health_findings(snapshot, resolution, amp=amp)
    findings += precision_findings(
        snapshot, resolution, tf32=tf32, amp=amp, model_dtype=model_dtype
    )

    final = _dedupe(findings)
    return Report(
        ok=not any(f.severity == "error" for f in final),
        resolution=resolution,
        findings=tuple(final),
        checks=tuple(checks),
        snapshot=snapshot,
    )


def _launcher_option(launcher: str | None, include: str | None, exclude: str | None) -> str | None:
    """``--launcher`` as a canonical name; DeepSpeed's flags imply DeepSpeed.

    Raises:
        GpudiagInputError: an unknown launcher, or DeepSpeed's flags with another one.
    """
    name = canonical_launcher(launcher) if launcher is not None else None
    if include is not None or exclude is not None:
        if name not in (None, "deepspeed"):
            raise GpudiagInputError(
                "--deepspeed-include/--deepspeed-exclude need --launcher deepspeed, "
                f"not {launcher!r}"
            )
        name = "deepspeed"
    return name


def _dedupe(findings: Sequence[Finding]) -> list[Finding]:
    # HEALTH-GPU-LOST says what a lost GPU does to the job's numbering; the
    # inventory's SRC-NVML-GPU-LOST about the same GPU would repeat it.
    lost = {f.subject for f in findings if f.code == "HEALTH-GPU-LOST"}
    seen: set[tuple[str, str | None, str]] = set()
    out: list[Finding] = []
    for f in findings:
        if f.code == "SRC-NVML-GPU-LOST" and f.subject in lost:
            continue
        key = (f.code, f.subject, f.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out
