"""Every fix gpudiag gives fixes: applying it removes the finding (issue 20, item 4)."""

from __future__ import annotations

from gpudiag.core.check import run_check

from .conftest import load_fixture


def _codes(fixture: str, **request: object) -> dict[str, str | None]:
    report = run_check(load_fixture(fixture), **request)
    return {f.code: f.fix for f in report.findings}


def test_nvml_order_fix_pci_bus_id_fixes_it() -> None:
    found = _codes("mixed4", visible="0,1", order=None)
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in (found["VIS-TORCH-NVML-ORDER"] or "")
    assert "VIS-TORCH-NVML-ORDER" not in _codes("mixed4", visible="0,1", order="PCI_BUS_ID")


def test_nvml_order_fix_with_a_lost_gpu_is_uuids() -> None:
    # PCI_BUS_ID is already set and the warning stays: the fix must not suggest it.
    found = _codes("gpu_lost", visible="1,2", order="PCI_BUS_ID")
    fix = found["VIS-TORCH-NVML-ORDER"] or ""
    assert "PCI_BUS_ID" not in fix and fix.startswith("Select GPUs by UUID")
    snap = load_fixture("gpu_lost")
    uuids = ",".join(g.uuid for g in snap.gpus if g.nvml_index in (1, 3))
    assert "VIS-TORCH-NVML-ORDER" not in _codes("gpu_lost", visible=uuids, order="PCI_BUS_ID")


def test_torch_count_fix_when_unset_says_what_to_set() -> None:
    # issue 20: the advice on how to *write* CUDA_VISIBLE_DEVICES did not apply when it
    # is unset. Each fix, applied, leaves CUDA and torch counting alike.
    lost = load_fixture("gpu_lost")
    fix = _codes("gpu_lost", visible=None, order=None)["VIS-TORCH-COUNT"] or ""
    assert fix.startswith("Set CUDA_VISIBLE_DEVICES to the healthy GPUs' UUIDs")
    healthy = ",".join(g.uuid for g in lost.gpus if not g.lost and g.uuid)
    assert "VIS-TORCH-COUNT" not in _codes("gpu_lost", visible=healthy, order=None)

    mig = load_fixture("a100_mig")
    fix = _codes("a100_mig", visible=None, order=None)["VIS-TORCH-COUNT"] or ""
    assert fix.startswith("Set CUDA_VISIBLE_DEVICES to the MIG device to use")
    one = next(m.uuid for g in mig.gpus for m in g.mig_devices)
    assert "VIS-TORCH-COUNT" not in _codes("a100_mig", visible=one, order=None)


def test_torch_count_fix_for_a_value_old_torch_cannot_read_is_upgrade() -> None:
    # issue 20: a MIG UUID under torch 1.13 (which reads integers only) got "write it as
    # nvidia-smi -L prints it", which it already was. The fix is a newer torch.
    from dataclasses import replace

    from gpudiag.model import TorchInfo

    mig = load_fixture("a100_mig")
    one = next(m.uuid for g in mig.gpus for m in g.mig_devices)

    def report(version: str) -> dict[str, str | None]:
        snap = replace(mig, torch=TorchInfo(version=version, cuda_version="11.7"))
        return {f.code: f.fix for f in run_check(snap, visible=one, order=None).findings}

    fix = report("1.13.1")["VIS-TORCH-COUNT"] or ""
    assert fix.startswith("Upgrade torch: 2.13.0 reads this value as CUDA does")
    assert "VIS-TORCH-COUNT" not in report("2.13.0")
