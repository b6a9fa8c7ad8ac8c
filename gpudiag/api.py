"""Python API: :func:`check` and :func:`guard` for the top of training scripts.

Neither imports torch nor initialises CUDA in the caller's process: live facts
come from :func:`gpudiag.machine.load_machine`, which asks torch in a child
process. ``guard`` only *looks* at a torch the script already imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag import import_env
from gpudiag.core.check import Report, run_check
from gpudiag.core.request import FIELDS, FROM_SNAPSHOT, CheckRequest, RequestError, _FromSnapshot
from gpudiag.model import Finding, Snapshot, uuid_key

#: ``CUDA_VISIBLE_DEVICES`` when the gpudiag package was first imported: the best
#: guess of the value CUDA read at initialisation (see :func:`guard`).
CVD_AT_IMPORT: str | None = import_env.CVD_AT_IMPORT


class GpuConfigError(RuntimeError):
    """The GPU configuration would fail; the message lists each error and its fix."""

    def __init__(self, report: Report, *, strict: bool = False) -> None:
        self.report = report
        bad = [
            f
            for f in report.findings
            if f.severity == "error" or (strict and f.severity == "warning")
        ]
        lines = [f"gpudiag found {len(bad)} problem(s) in the GPU configuration:"]
        for f in bad:
            lines.append(f"- [{f.severity}] {f.code}: {f.message}")
            if f.predicts:
                lines.append(f"  predicts: {f.predicts}")
            if f.fix:
                lines.append(f"  fix: {f.fix}")
        super().__init__("\n".join(lines))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_arguments(function: str, arguments: Mapping[str, Any]) -> None:
    """Checks the arguments of :func:`check`/:func:`guard` that are not part of the
    :class:`CheckRequest` (the machine, the environment, flags), in Python's terms.

    Raises:
        TypeError: an argument of the wrong type, naming the parameter.
    """

    def fail(name: str, wanted: str) -> None:
        value = arguments[name]
        raise TypeError(
            f"{function}(): {name} must be {wanted}, not {type(value).__name__} {_shown(value)}"
        )

    snapshot = arguments.get("snapshot")
    if snapshot is not None and not isinstance(snapshot, (str, os.PathLike, Snapshot)):
        fail("snapshot", "a file path (str or os.PathLike), a Snapshot or None")
    for name in ("strict", "deep"):
        if name in arguments and not isinstance(arguments[name], bool):
            fail(name, "True or False")
    env = arguments.get("env")
    if env is not None and (
        not isinstance(env, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        fail("env", "a mapping of str to str (like os.environ) or None")


def _python_error(function: str, exc: RequestError) -> Exception:
    """The request's error in Python's terms: the keyword, TypeError or ValueError."""
    kind = TypeError if isinstance(exc, TypeError) else ValueError
    return kind(f"{function}(): {exc.worded(str, python=True)}")


def build_request(function: str, arguments: Mapping[str, Any]) -> CheckRequest:
    """The :class:`CheckRequest` from :func:`check`'s / :func:`guard`'s keywords.

    Raises:
        TypeError: an argument of the wrong type, naming the parameter.
        ValueError: a value outside its choices or range.
    """
    validate_arguments(function, arguments)
    try:
        return CheckRequest(**{name: arguments[name] for name in FIELDS if name in arguments})
    except RequestError as exc:
        raise _python_error(function, exc) from None


def _machine(snapshot: str | os.PathLike[str] | Snapshot | None, deep: bool = False) -> Snapshot:
    if isinstance(snapshot, Snapshot):
        return snapshot
    from gpudiag.machine import load_machine

    # Without deep, torch is imported (in a child) only when its installed build
    # points at a problem: a job start should not pay seconds for torch twice.
    return load_machine(
        None if snapshot is None else os.fspath(snapshot), torch="deep" if deep else "auto"
    )


def check(
    *,
    snapshot: str | os.PathLike[str] | Snapshot | None = None,
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
    env: Mapping[str, str] | None = None,
    deep: bool = False,
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
    num_workers: int | None = None,
) -> Report:
    """Run ``gpudiag check`` from Python; keywords are :class:`CheckRequest` fields.

    Args:
        snapshot: a snapshot file path, a :class:`Snapshot`, or None for this machine.
        env: launcher variables; default ``os.environ``.
        deep: also import torch in a child process (``gpudiag check --deep``).

    Returns:
        The :class:`Report` (``report.ok``, ``report.findings``, ``report.to_json()``).

    Raises:
        TypeError: an argument of the wrong type (the message names it).
        ValueError: a value outside its choices, e.g. ``backend="mpi"``.
        gpudiag.snapshot.SnapshotError: an unreadable or malformed snapshot file.
    """
    request = build_request("gpudiag.check", locals())
    return _check("gpudiag.check", request, snapshot, env, deep)


def _check(
    function: str,
    request: CheckRequest,
    snapshot: str | os.PathLike[str] | Snapshot | None,
    env: Mapping[str, str] | None,
    deep: bool,
) -> Report:
    machine = _machine(snapshot, deep)
    driver = None
    port_prober = None
    if snapshot is None:
        from gpudiag.backends.port import probe_port
        from gpudiag.machine import live_driver_asker

        driver = live_driver_asker(machine)
        port_prober = probe_port  # live only: a snapshot cannot know which ports are taken
    try:
        return run_check(
            machine,
            request,
            env=dict(os.environ) if env is None else env,
            driver=driver,
            port_prober=port_prober,
        )
    except RequestError as exc:  # set_device_per_rank with no value for LOCAL_RANK
        raise _python_error(function, exc) from None


def _torch_state() -> tuple[bool, list[str] | None]:
    """(CUDA initialised in this process?, the UUIDs torch sees, when readable).

    Looks only at a torch the caller already imported (``sys.modules``): never
    imports torch, never initialises CUDA. UUIDs are read only when CUDA is
    already initialised, so reading them creates nothing new.
    """
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return False, None
    cuda: Any = getattr(torch, "cuda", None)
    is_initialized = getattr(cuda, "is_initialized", None)
    try:
        initialised = bool(is_initialized()) if callable(is_initialized) else False
    except Exception:  # a broken torch must not break the guard
        return False, None
    if not initialised:
        return False, None
    try:
        count = int(cuda.device_count())
        uuids = [str(cuda.get_device_properties(i).uuid) for i in range(count)]
    except Exception:
        return True, None
    return True, uuids


def _driver_state(initialised: bool, uuids: list[str] | None) -> tuple[bool, list[str] | None]:
    """Add what the in-process CUDA driver knows to torch's answer.

    ``torch.cuda.is_initialized()`` stays False after ``is_available()`` or a
    library's ``torch._C._cuda_getDeviceCount()``, which already ran cuInit;
    :func:`gpudiag.backends.cuda_state.driver_state` asks libcuda without
    initialising it.
    """
    from gpudiag.backends import cuda_state

    state = cuda_state.driver_state()
    if not state.initialised:
        return initialised, uuids
    if uuids is None and state.uuids is not None:
        uuids = list(state.uuids)
    return True, uuids


def guard(
    *,
    visible: str | _FromSnapshot | None = FROM_SNAPSHOT,
    order: str | _FromSnapshot | None = FROM_SNAPSHOT,
    device_ids: Sequence[int] | None = None,
    expect_gpus: int | None = None,
    output_device: int | None = None,
    set_device: int | None = None,
    module_device: str | None = None,
    batch_size: int | None = None,
    dataparallel: bool = False,
    nproc_per_node: int | None = None,
    backend: str | None = None,
    amp: str | None = None,
    strict: bool = False,
    snapshot: str | os.PathLike[str] | Snapshot | None = None,
    env: Mapping[str, str] | None = None,
    deep: bool = False,
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
    num_workers: int | None = None,
) -> Report:
    """Check before training starts; raise :class:`GpuConfigError` when it would fail.

    Call it at the top of a training script, before the first CUDA call. When
    CUDA is already initialised in this process the report says so
    (``API-CUDA-ALREADY-INITIALISED``), and ``VIS-CVD-CHANGED`` is added when
    ``CUDA_VISIBLE_DEVICES`` was changed afterwards. gpudiag cannot read the
    value CUDA saw at initialisation; the heuristic: torch's in-process device
    UUIDs are compared with the devices the current value selects; when they
    differ, the value when ``gpudiag`` was first imported (:data:`CVD_AT_IMPORT`)
    is named as the old value.

    Returns:
        The report, when it has no errors (and no warnings under ``strict``).

    Raises:
        GpuConfigError: errors found (or warnings, under ``strict``).
        TypeError: an argument of the wrong type (the message names it).
        ValueError: a value outside its choices.
    """
    request = build_request("gpudiag.guard", locals())
    initialised, torch_uuids = _torch_state()
    if not initialised or torch_uuids is None:
        initialised, torch_uuids = _driver_state(initialised, torch_uuids)
    report = _check("gpudiag.guard", request, snapshot, env, deep)
    extra: list[Finding] = []
    if initialised:
        extra.append(
            Finding(
                code="API-CUDA-ALREADY-INITIALISED",
                severity="warning",
                message="gpudiag.guard() ran after CUDA was initialised in this process: "
                "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER can no longer change what this "
                "process sees.",
                fix="Call gpudiag.guard() at the very top of the script, before any torch.cuda "
                "call.",
                predicts=None,
                subject="CUDA_VISIBLE_DEVICES",
            )
        )
        extra += _changed_after_init(report, torch_uuids)
    if extra:
        findings = report.findings + tuple(extra)
        report = Report(
            ok=not any(f.severity == "error" for f in findings),
            resolution=report.resolution,
            findings=findings,
            checks=report.checks,
            snapshot=report.snapshot,
        )
    if report.exit_code(strict=strict):
        raise GpuConfigError(report, strict=strict)
    return report


def _changed_after_init(report: Report, torch_uuids: list[str] | None) -> list[Finding]:
    from gpudiag.core.visibility import cvd_changed_after_init

    if torch_uuids is None:
        return []
    seen = [uuid_key(u) for u in torch_uuids]
    expected = [uuid_key(d.mig_uuid or d.uuid) for d in report.resolution.devices]
    if seen == expected:
        return []
    now = os.environ.get("CUDA_VISIBLE_DEVICES")
    finding = cvd_changed_after_init(CVD_AT_IMPORT, now)
    if finding is not None:
        return [finding]
    return [
        Finding(
            code="API-CUDA-ALREADY-INITIALISED",
            severity="error",
            message=f"torch in this process sees {len(seen)} device(s) that differ from the "
            f"{len(expected)} the current CUDA_VISIBLE_DEVICES selects: it was changed after "
            "CUDA initialised (the earlier value is unknown to gpudiag).",
            fix="Set CUDA_VISIBLE_DEVICES before the first CUDA call, or start a new process.",
            predicts=None,
            subject="CUDA_VISIBLE_DEVICES",
        )
    ]
