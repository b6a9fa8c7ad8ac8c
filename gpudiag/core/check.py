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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gpudiag.core.dataparallel import (
    cvd_phrase,
    describe_devices,
    gpu_by_nvml_index,
    validate_dataparallel,
)
from gpudiag.core.ddp import has_launcher_env
from gpudiag.core.health import health_findings
from gpudiag.core.host import kineto_findings, with_host_findings
from gpudiag.core.intent import as_the_job_intends
from gpudiag.core.launch_rules import deepspeed_findings
from gpudiag.core.network import network_findings
from gpudiag.core.precision import precision_findings
from gpudiag.core.prelaunch import ddp_findings
from gpudiag.core.rank_devices import set_device_roles
from gpudiag.core.request import FROM_SNAPSHOT as FROM_SNAPSHOT
from gpudiag.core.request import CheckRequest, _FromSnapshot
from gpudiag.core.topology import nccl_uses_shm, topology_findings
from gpudiag.launch.deepspeed import deepspeed_devices
from gpudiag.launch.table import present_launchers

if TYPE_CHECKING:
    from gpudiag.core.visibility import DriverAsker
from gpudiag.model import SEVERITIES, Finding, Resolution, Snapshot

if TYPE_CHECKING:
    from gpudiag.core.port import PortProber

#: Version of the ``gpudiag check --json`` document (``docs/check.md``).
REPORT_SCHEMA = "gpudiag-check/1"


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
    request: CheckRequest | None = None,
    *,
    env: Mapping[str, str] = _EMPTY_ENV,
    driver: DriverAsker | None = None,
    port_prober: PortProber | None = None,
    **fields: Any,
) -> Report:
    """Check a job's GPU configuration against a machine.

    Args:
        snapshot: the machine.
        request: what the job asks for (:class:`~gpudiag.core.request.CheckRequest`);
            or give its fields as keywords instead (``device_ids=[0, 1]``), as tests do.
        env: launcher variables (torchrun, Slurm); the live environment in the CLI.
        driver: asks the CUDA driver to confirm the mapping (live machines only);
            None keeps the rules' answer.
        port_prober: binds the rendezvous port for an instant (live only); None skips
            the port check (a snapshot cannot know which ports are taken).

    Raises:
        RequestError: an invalid request field (keywords), or ``set_device_per_rank``
            with no value for the environment's ``LOCAL_RANK``.
    """
    if request is None:
        request = CheckRequest(**fields)
    elif fields:
        raise TypeError(f"run_check() got a request and fields: {', '.join(sorted(fields))}")
    request.rank_set_device(env)
    r = request
    from gpudiag.core.inventory import inventory_findings
    from gpudiag.core.visibility import resolve_checked, slurm_findings

    spec = snapshot.cuda_visible_devices if isinstance(r.visible, _FromSnapshot) else r.visible
    dev_order = snapshot.cuda_device_order if isinstance(r.order, _FromSnapshot) else r.order
    launcher = r.launcher  # canonical; DeepSpeed's include/exclude imply deepspeed
    nproc_per_node = r.nproc_per_node
    expect_gpus = r.expect_gpus
    launcher_findings: list[Finding] = []
    if launcher == "deepspeed" and present_launchers(env)[:1] != ["deepspeed"]:
        # Before DeepSpeed starts: its runner rewrites CUDA_VISIBLE_DEVICES.
        ds = deepspeed_devices(
            len(snapshot.gpus),
            spec,
            include=r.deepspeed_include,
            exclude=r.deepspeed_exclude,
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
                code="CHECK-EXPECT-GPUS",
                severity="error",
                message=f"Expected {expect_gpus} GPU(s) but {n} are visible "
                f"{cvd_phrase(resolution)}"
                + (f": {describe_devices(resolution.devices, snapshot)}." if n else "."),
                fix="Check the job's GPU request (--gpus / --gres), CUDA_VISIBLE_DEVICES and "
                "gpudiag list.",
                predicts=None,
                subject="CUDA_VISIBLE_DEVICES",
            )
        )

    findings = with_host_findings(findings, snapshot)
    findings += kineto_findings(env, snapshot)

    dp_set_device, ddp_set_device = set_device_roles(
        r.set_device, r.set_device_per_rank, r.local_rank, nproc_per_node, env
    )
    ddp_asked = (
        r.launched
        or r.ddp_devices is not None
        or r.set_device_per_rank is not None
        or bool(r.script_reads)
    )
    run_ddp = (
        nproc_per_node is not None
        or r.backend is not None
        or launcher is not None
        or has_launcher_env(env)
        or ddp_asked
    )
    other_dp = (r.device_ids, r.output_device, r.module_device, r.batch_size)
    dp_asked = r.dataparallel or any(o is not None for o in other_dp)
    if dp_asked or (dp_set_device is not None and not run_ddp):
        checks.append("dataparallel")
        findings += validate_dataparallel(
            resolution,
            snapshot,
            device_ids=r.device_ids,
            output_device=r.output_device,
            set_device=dp_set_device,
            module_device=r.module_device,
            batch_size=r.batch_size,
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
            backend=r.backend,
            ddp_set_device=ddp_set_device,
            launched=r.launched,
            script_reads=r.script_reads,
            init_rank_args=r.init_rank_args,
            set_device_per_rank=r.set_device_per_rank,
            ddp_devices=r.ddp_devices,
            port_prober=port_prober,
            launcher=launcher,
        )
        # The network NCCL and the rendezvous will use (issue 19): only for a DDP job.
        findings += network_findings(snapshot, env, nproc_per_node=nproc_per_node)
    checks.append("health")
    findings += health_findings(snapshot, resolution, amp=r.amp)
    findings += precision_findings(
        snapshot, resolution, tf32=r.tf32, amp=r.amp, model_dtype=r.model_dtype
    )
    findings += topology_findings(
        snapshot,
        resolution,
        nproc_per_node=nproc_per_node,
        num_workers=r.num_workers,
        nccl_shm=nccl_uses_shm(snapshot, env, r.backend),
    )

    findings = as_the_job_intends(findings, r, resolution, env)
    final = _dedupe(findings)
    return Report(
        ok=not any(f.severity == "error" for f in final),
        resolution=resolution,
        findings=tuple(final),
        checks=tuple(checks),
        snapshot=snapshot,
    )


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
