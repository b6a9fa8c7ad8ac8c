"""The lint's finding codes (docs/findings.md, docs/lint.md) and its result types."""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.model import Finding, Severity

CODES: dict[str, str] = {
    "LINT-PARSE-ERROR": "the file cannot be read or parsed as Python",
    "LINT-CVD-AFTER-CUDA-INIT": "CUDA_VISIBLE_DEVICES set after CUDA initialised: ignored",
    "LINT-CVD-AFTER-IMPORT": "CUDA_VISIBLE_DEVICES set after import torch, before any CUDA call",
    "LINT-CUDA-BEFORE-FORK": "CUDA initialised before a fork-based launcher starts a CUDA child",
    "LINT-MASTER-PORT-PER-RANK": "MASTER_PORT computed per rank: the ranks never meet",
    "LINT-DDP-NO-SET-DEVICE": "DDP ranks use the current device without set_device",
    "LINT-DEVICE-FROM-GLOBAL-RANK": "a GPU index taken from the global rank, not the local rank",
    "LINT-DDP-DEVICE-IDS-CPU": "DistributedDataParallel(device_ids=…) on a module still on the CPU",
    "LINT-SET-EPOCH-CONSTANT": "sampler.set_epoch() with a constant: the same order every epoch",
    "LINT-SET-EPOCH-MISSING": "a shuffling DistributedSampler whose set_epoch() is never called",
    "LINT-SAMPLER-SHUFFLE": "DataLoader with both sampler= and shuffle=True",
    "LINT-IDS-UNDER-MASK": "a GPU index missing under the script's CUDA_VISIBLE_DEVICES",
    "LINT-DP-MODULE-DEVICE": "DataParallel's module is not on device_ids[0]",
    "LINT-CKPT-SAVE-WRAPPED": "a checkpoint saved from the DataParallel/DDP wrapper",
    "LINT-CKPT-PREFIX-MISMATCH": "a checkpoint loaded across the wrapper: the 'module.' prefix",
    "LINT-AMP-DEPRECATED": "torch.cuda.amp.* is deprecated (FutureWarning since torch 2.4)",
    "LINT-SCALER-BF16": "GradScaler with bf16 autocast: no loss scaling is needed",
    "LINT-SCALER-FP16-PARAMS": "GradScaler with float16 parameters (.half())",
    "LINT-WRAPPER-ATTRIBUTE": "the model's own attribute read through the DataParallel/DDP wrapper",
    "LINT-LOCAL-RANK-ARG": "--local_rank read from argv: torchrun does not pass it",
    "LINT-SPAWN-ARGS-NOT-TUPLE": "mp.spawn(args=(x)): one value in parentheses is not a tuple",
    "LINT-NCCL-CPU-TENSOR": "a collective on a CPU tensor in an NCCL-only process group",
    "LINT-RENDEZVOUS-ENV-MISSING": "self-started ranks use env:// without MASTER_ADDR/MASTER_PORT",
}


@dataclass(frozen=True)
class LintFinding:
    """A :class:`~gpudiag.model.Finding` at a place in a file (1-based line and column)."""

    path: str
    line: int
    col: int
    finding: Finding

    def to_json(self) -> dict[str, object]:
        """The finding's JSON object plus ``path``, ``line`` and ``col``."""
        out = self.finding.to_json()
        out.update({"path": self.path, "line": self.line, "col": self.col})
        return out


@dataclass(frozen=True)
class Hit:
    """A rule's result before it is given its file: where, and what."""

    line: int
    col: int
    finding: Finding


def hit(
    line: int,
    col: int,
    code: str,
    severity: Severity,
    message: str,
    fix: str | None,
    predicts: str | None,
    subject: str | None = None,
) -> Hit:
    return Hit(line, col, Finding(code, severity, message, fix, predicts, subject))
