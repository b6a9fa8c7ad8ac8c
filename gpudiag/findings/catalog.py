"""The finding catalogue: every finding code declared once, with its title,
default severity and owning area.

Everything that needs the list of codes reads it from here: ``--ignore``
(:mod:`gpudiag.cli.gate`), ``gpudiag explain``, the lint (:mod:`gpudiag.lint.codes`)
and the documentation test (every code has a ``### CODE`` section in
``docs/findings.md``, and every section a code). Before this table, ``--ignore``
read a hand-written list of seven modules and refused 15 real codes (issue 16).

A row is ``(code, severities, title)``. ``severities`` names every severity the
code is emitted at, joined by ``|``, the default first: the one its
``**Severity:**`` line in ``docs/findings.md`` names first (tests/test_catalog.py
holds the two, and the severities the code base emits, together). The title is
the one-line summary a listing shows. Codes are stable: never rename one.

Importing this module is cheap (no torch, no pynvml, nothing but this table);
``gpudiag --help`` still does not import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpudiag.model import SEVERITIES, Severity


@dataclass(frozen=True)
class CodeInfo:
    """One finding code, as the catalogue declares it."""

    code: str
    #: The area (concept) that owns and emits the code; see :data:`AREAS`.
    area: str
    #: The default severity: the one the code is usually emitted at.
    severity: Severity
    title: str
    #: Every severity the code can be emitted at, the default first.
    severities: tuple[Severity, ...]


#: ``(code, "default|other severities", title)``
_Rows = tuple[tuple[str, str, str], ...]

_INVENTORY: _Rows = (
    (
        "SRC-NVML-UNAVAILABLE",
        "warning",
        "NVML cannot be used: no NVIDIA driver, or it is not loaded",
    ),
    (
        "SRC-NVML-ERROR",
        "error",
        "NVML failed: driver/library mismatch, permissions, or a query error",
    ),
    ("SRC-NVML-GPU-LOST", "error", "a GPU was lost while NVML queried it"),
    ("SRC-TORCH-UNAVAILABLE", "warning", "torch is not installed for this Python"),
    ("SRC-TORCH-ERROR", "error", "torch could not be queried, or could not initialise CUDA"),
    (
        "SRC-GPUTIL-UNAVAILABLE",
        "info",
        "GPUtil cannot be used (nvidia-smi missing, or import failure)",
    ),
    ("SRC-GPUTIL-ERROR", "warning", "GPUtil failed while running nvidia-smi"),
    ("INV-NO-GPUS", "warning", "NVML works but reports no GPU"),
    ("INV-TORCH-SEES-NONE", "error|info|warning", "NVML sees GPUs but torch sees none"),
    (
        "INV-TORCH-COUNT-MISMATCH",
        "warning",
        "torch sees a different number of devices than expected",
    ),
    ("INV-TORCH-UUID-UNKNOWN", "warning", "torch reports a device NVML does not list"),
    ("INV-TORCH-ORDER-MISMATCH", "warning", "torch's cuda:N is not the GPU the CUDA rules predict"),
    ("INV-GPUTIL-MISMATCH", "warning", "GPUtil (nvidia-smi) and NVML disagree about the GPUs"),
)

_VISIBILITY: _Rows = (
    ("VIS-TRUNCATED", "warning", "An invalid CUDA_VISIBLE_DEVICES entry ends the list early"),
    (
        "VIS-DUPLICATE",
        "error",
        "A duplicate CUDA_VISIBLE_DEVICES entry: cuInit fails, no GPU is usable",
    ),
    ("VIS-NO-DEVICES", "error|info", "CUDA_VISIBLE_DEVICES exposes no GPU"),
    ("VIS-ENTRY-TRAILING", "warning", "An integer entry has trailing text that CUDA ignores"),
    ("VIS-UUID-SPACE", "warning", "White space around a UUID entry: the entry selects nothing"),
    ("VIS-UUID-CASE", "warning", "A lower-case 'gpu-'/'mig-' prefix: the entry selects nothing"),
    ("VIS-TORCH-RAISES", "error", "torch.cuda.device_count() raises on this value"),
    (
        "VIS-TORCH-COUNT",
        "error|warning",
        "torch's device count before CUDA initialisation differs from CUDA's",
    ),
    ("VIS-TORCH-NVML-ORDER", "warning", "torch's NVML-based queries would read a different GPU"),
    ("VIS-MIG-MULTIPLE", "warning", "Several MIG devices selected: CUDA uses only the first"),
    ("VIS-MIG-HIDES-GPU", "warning", "A MIG device is enumerated, so CUDA hides the non-MIG GPUs"),
    ("VIS-MIG-NO-INSTANCE", "warning", "A GPU in MIG mode with no MIG instance exposes nothing"),
    ("VIS-MIG-UNCERTAIN", "warning", "Which MIG instance CUDA picks is not documented"),
    ("VIS-INDEX-MISMATCH", "info", "CUDA device numbers differ from nvidia-smi's"),
    ("VIS-ORDER-MIXED", "warning", "Mixed GPU models without CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    (
        "VIS-ORDER-UNCERTAIN",
        "warning",
        "CUDA's FASTEST_FIRST order is unknown on a mixed-model node",
    ),
    (
        "VIS-ORDER-INVALID",
        "error",
        "CUDA_DEVICE_ORDER has another value: cuInit fails, no GPU is usable",
    ),
    (
        "VIS-SLURM-MISMATCH",
        "warning",
        "Slurm's GPU allocation differs from what CUDA_VISIBLE_DEVICES exposes",
    ),
    ("VIS-CVD-CHANGED", "error", "CUDA_VISIBLE_DEVICES changed after CUDA was initialised"),
    ("VIS-DRIVER-DISAGREES", "warning", "The CUDA driver's mapping differs from the rules' answer"),
    (
        "VIS-DRIVER-UNMATCHED",
        "warning",
        "The CUDA driver enumerated a device missing from the inventory",
    ),
)

_DATAPARALLEL: _Rows = (
    ("DP-DEVICES", "info", "the physical GPUs DataParallel will use"),
    (
        "DP-CPU-FALLBACK",
        "warning",
        "no GPU visible: DataParallel silently runs the module on the CPU",
    ),
    ("DP-NO-VISIBLE-GPU", "error", "a GPU is asked for but no GPU is visible"),
    (
        "DP-SET-DEVICE-INVALID",
        "error",
        "torch.cuda.set_device(K) with K beyond the visible devices",
    ),
    ("DP-SET-DEVICE-NEGATIVE", "warning", "torch.cuda.set_device with a negative id is a no-op"),
    (
        "DP-MODULE-DEVICE-INVALID",
        "error",
        "the model is moved to a cuda ordinal that is not visible",
    ),
    ("DP-EMPTY-DEVICE-IDS", "error", "device_ids=[] raises IndexError"),
    ("DP-NEGATIVE-FIRST-ID", "error", "a negative device_ids[0] raises RuntimeError"),
    ("DP-INVALID-DEVICE-ID", "error", "a device id outside the visible devices: AssertionError"),
    ("DP-MODULE-DEVICE-MISMATCH", "error", "the model's parameters are not on device_ids[0]"),
    ("DP-DUPLICATE-DEVICE-ID", "warning", "the same device id appears twice in device_ids"),
    ("DP-OUTPUT-DEVICE-INVALID", "error", "output_device is not a visible device"),
    ("DP-OUTPUT-DEVICE-OUTSIDE", "warning", "output_device is visible but not in device_ids"),
    ("DP-OUTPUT-DEVICE-CPU", "info", "output_device=-1 gathers outputs on the CPU (deprecated)"),
    ("DP-CUDA0-CONTEXT", "warning", "cuda:0 gets a CUDA context although it is not in device_ids"),
    ("DP-IMBALANCE", "warning", "torch's 'imbalance between your GPUs' warning"),
    (
        "DP-BATCH-TOO-SMALL",
        "warning",
        "the batch is split into fewer chunks than devices: GPUs idle",
    ),
)

_DDP: _Rows = (
    ("DDP-PLAN", "info", "which physical GPU each local rank will use"),
    ("DDP-BAD-ENV", "error|warning", "a launcher variable that is not an integer"),
    ("DDP-ENV-EMPTY", "error|warning", "a launcher variable set to an empty string"),
    (
        "DDP-ENV-RANGE",
        "error|warning",
        "a launcher variable out of range (negative rank, size < 1, bad port)",
    ),
    ("DDP-NPROC-MISMATCH", "warning", "--nproc-per-node disagrees with LOCAL_WORLD_SIZE"),
    ("DDP-NCCL-NO-GPU", "error", "backend nccl with no visible GPU"),
    ("DDP-TOO-MANY-RANKS", "error|warning", "more ranks per node than visible GPUs"),
    ("DDP-DUPLICATE-GPU", "error", "several ranks on one GPU: NCCL 'Duplicate GPU detected'"),
    ("DDP-LOCAL-RANK-INVALID", "error|warning", "LOCAL_RANK is not a visible device"),
    (
        "DDP-LAUNCHER-ENV-MISSING",
        "error|warning|info",
        "RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT missing",
    ),
    ("DDP-NOT-LAUNCHED", "info", "no launcher variables: not running under torchrun or Slurm yet"),
    ("DDP-SLURM-MISMATCH", "error|warning", "torchrun and Slurm variables disagree"),
    ("DDP-SLURM-NESTED", "warning", "torchrun started inside several Slurm tasks per node"),
    ("DDP-GPU-ALLOCATION", "warning", "more ranks per node than GPUs Slurm allocated"),
)

_LAUNCH: _Rows = (
    (
        "DDP-LAUNCHER",
        "info",
        "which launcher started this rank (or will start the job), and what it gives",
    ),
    (
        "DDP-LAUNCHER-MISMATCH",
        "error|warning",
        "two launchers' variables disagree (e.g. Slurm's and MPI's counts)",
    ),
    (
        "DDP-DEEPSPEED-DEVICES",
        "info|warning",
        "the CUDA_VISIBLE_DEVICES DeepSpeed's runner gives its workers",
    ),
    (
        "DDP-DEEPSPEED-REFUSED",
        "error",
        "DeepSpeed's runner refuses its device flags and starts no worker",
    ),
)

_RANKS: _Rows = (
    ("DDP-SET-DEVICE-INVALID", "error", "a rank's device is not a visible cuda ordinal"),
    (
        "DDP-CUDA0-CONTEXT",
        "warning",
        "DDP on a device subset without cuda:0: cuda:0 still gets a context",
    ),
)

_PORT: _Rows = (
    ("DDP-PORT-IN-USE", "error|warning", "the rendezvous port is already bound on this host"),
)

_PRELAUNCH: _Rows = (
    ("DDP-LAUNCHED-ENV-MISSING", "error", "check --launched, but launcher variables are missing"),
    ("DDP-NCCL-NOT-BUILT", "error", "backend nccl, but this torch build has no NCCL"),
)

_HOST: _Rows = (
    ("HOST-CONTAINER-NO-GPU", "error|warning", "a container started without GPU access"),
    ("HOST-NO-NVIDIA-GPU", "warning", "this machine has no NVIDIA GPU at all"),
    ("HOST-DRIVER-MISSING", "error", "NVIDIA GPUs on the PCI bus but no NVIDIA driver loaded"),
    ("ENV-KINETO-DAEMON", "warning", "KINETO_USE_DAEMON makes import torch initialise CUDA"),
)

_HEALTH: _Rows = (
    ("HEALTH-GPU-LOST", "error", "a GPU has fallen off the bus; CUDA numbering shifts"),
    ("HEALTH-FOREIGN-PROCESSES", "warning", "GPU memory held by other processes"),
    ("HEALTH-ECC-UNCORRECTABLE", "error|warning", "uncorrectable ECC errors on a GPU"),
    (
        "HEALTH-RETIRED-PAGES-PENDING",
        "warning",
        "memory pages wait for retirement until a GPU reset",
    ),
    ("HEALTH-ROW-REMAP-FAILURE", "error", "row remapping failed: the GPU's memory is unreliable"),
    ("HEALTH-COMPUTE-MODE", "error|warning", "compute mode Exclusive_Process or Prohibited"),
    ("HEALTH-THROTTLE", "warning|info", "clocks are being throttled"),
    ("HEALTH-PERSISTENCE-OFF", "info", "persistence mode is off"),
    (
        "HEALTH-DRIVER-TOO-OLD",
        "error|warning",
        "torch's CUDA runtime is newer than the driver supports",
    ),
    ("HEALTH-ARCH-UNSUPPORTED", "error", "torch has no kernels for a GPU's compute capability"),
    ("HEALTH-ARCH-PTX-JIT", "warning", "torch has only PTX for a GPU: kernels are JIT-compiled"),
    ("HEALTH-AMP-BF16", "warning", "bf16 autocast on a GPU without native bf16 (below 8.0)"),
    ("HEALTH-AMP-FP16", "warning", "fp16 autocast on a GPU without fast fp16 (no tensor cores)"),
    ("HEALTH-AMP-NO-GPU", "warning", "autocast on CUDA with no GPU: torch disables it"),
)

_PRECISION: _Rows = (
    (
        "HEALTH-TF32-UNSUPPORTED",
        "warning",
        "TF32 switched on for GPUs below compute capability 8.0",
    ),
    ("HEALTH-AMP-FP16-OVERFLOW", "warning", "fp16 autocast for a model trained in bf16"),
)

_TOPOLOGY: _Rows = (
    ("TOPO-P2P-UNSUPPORTED", "info", "no peer-to-peer path between selected GPUs: NCCL uses SHM"),
    (
        "TOPO-P2P-GEFORCE",
        "warning",
        "P2P reported between GeForce RTX 40 GPUs, where NCCL has hung",
    ),
    ("TOPO-IOMMU", "warning|info", "an IOMMU translates the GPUs' DMA while P2P is reported"),
    ("TOPO-ACS-REDIRECT", "warning", "PCIe ACS redirects P2P between GPUs behind a switch"),
    ("TOPO-NVLINK-DOWN", "warning", "NVLink links of a selected GPU are down"),
    (
        "TOPO-FABRIC-NOT-READY",
        "error|warning",
        "the fabric manager has not set the NVSwitch fabric up: CUDA cannot start",
    ),
    ("TOPO-PCIE-DEGRADED", "warning", "a GPU's PCIe link runs narrower or slower than it can"),
    ("TOPO-NUMA-SPAN", "info", "the selected GPUs span NUMA nodes where one node would do"),
    ("TOPO-SHM-SMALL", "warning|info", "/dev/shm too small for NCCL and DataLoader workers"),
    ("TOPO-UVM-MISSING", "error|info", "/dev/nvidia-uvm is missing: CUDA may not start"),
    ("TOPO-CONTAINER-CAPS", "error", "NVIDIA_DRIVER_CAPABILITIES leaves out compute"),
    ("TOPO-PCI-UNSEEN", "warning|info", "more NVIDIA GPUs on the PCI bus than NVML sees"),
    (
        "TOPO-MEMORY-FOREIGN-PID",
        "warning",
        "GPU memory held by a PID absent from this namespace",
    ),
    ("TOPO-MEMORY-OTHER-JOB", "warning|info", "GPU memory held by a live process of another job"),
    (
        "TOPO-MEMORY-OWN-JOB",
        "info|warning",
        "GPU memory held by this job's processes (several on one GPU: contexts on cuda:0)",
    ),
)

_FLEET: _Rows = (
    ("FLEET-NODE-NO-ANSWER", "error", "a node gave no snapshot within the timeout"),
    ("FLEET-DUPLICATE-HOSTNAME", "error", "two nodes share one host name"),
    ("FLEET-DUPLICATE-BOOT-ID", "error", "one machine was captured twice (one boot id)"),
    ("FLEET-DRIVER-SKEW", "warning", "the NVIDIA driver or its CUDA version differs between nodes"),
    ("FLEET-TORCH-SKEW", "error", "torch or its CUDA build differs between nodes"),
    ("FLEET-NCCL-SKEW", "error", "the NCCL version differs between nodes"),
    ("FLEET-NET-PLUGIN-SKEW", "error", "the NCCL network plugin is missing on some nodes"),
    (
        "FLEET-IB-DRIVER-SKEW",
        "warning",
        "the MLNX_OFED/DOCA-OFED release or mlx5_core driver differs between nodes",
    ),
    ("FLEET-HCA-FW-SKEW", "warning", "the InfiniBand/RoCE HCAs' firmware differs between nodes"),
    ("FLEET-IMAGE-SKEW", "warning", "the operating system or container image differs"),
    ("FLEET-GPU-COUNT", "error", "some nodes have fewer (or more) GPUs than the others"),
    ("FLEET-GPU-MODEL", "warning", "the GPU model differs between nodes"),
    ("FLEET-ENV-SKEW", "warning", "an NCCL or rendezvous variable differs between nodes"),
    ("FLEET-GPU-LOST", "error", "a GPU fell off the bus on some nodes"),
    ("FLEET-GPU-ECC", "error", "uncorrectable ECC errors on some nodes' GPUs"),
    ("FLEET-GPU-MIG", "warning", "MIG is enabled on some nodes' GPUs"),
    ("FLEET-GPU-COMPUTE-MODE", "warning", "a GPU compute mode other than Default on some nodes"),
    (
        "FLEET-IFNAME-MISSING",
        "error",
        "NCCL_SOCKET_IFNAME matches no interface on some nodes",
    ),
    ("FLEET-NO-IPV4", "error", "a node has no IPv4 interface but loopback for NCCL"),
    ("FLEET-MASTER-ADDR", "error", "MASTER_ADDR is loopback or unresolved on some nodes"),
    (
        "FLEET-HPCX-OFED",
        "warning|info",
        "a node's HPC-X was built for another OFED than the node runs",
    ),
    ("FLEET-IB-PARTIAL", "warning", "InfiniBand/RoCE is active on some nodes but not others"),
    ("FLEET-NODE-FACTS-MISSING", "info", "a snapshot older than 1.3 lacks the node facts"),
    (
        "FLEET-PROBE-NO-LISTENER",
        "error",
        "the first node cannot listen on MASTER_ADDR:MASTER_PORT (--probe)",
    ),
    ("FLEET-PROBE-UNREACHABLE", "error", "a node cannot connect to MASTER_ADDR:MASTER_PORT"),
    ("FLEET-PROBE-FAILED", "error", "an all-reduce between two nodes failed or hung (--probe)"),
    ("FLEET-PROBE-SLOW", "warning", "all-reduces with one node are much slower (--probe)"),
)

_NETWORK: _Rows = (
    ("NET-IFNAME-MISSING", "error", "NCCL_SOCKET_IFNAME matches no interface on this node"),
    ("NET-LOOPBACK-MULTINODE", "error", "a multi-node launch where NCCL can use only loopback"),
    (
        "NET-MASTER-ADDR-LOOPBACK",
        "error|warning",
        "a multi-node launch with MASTER_ADDR on loopback",
    ),
    ("NET-MASTER-ADDR-UNRESOLVED", "error", "MASTER_ADDR does not resolve on this node"),
    ("NET-DUPLICATE-ROUTE", "warning", "routes to one network through several interfaces"),
    ("NET-IB-GID-INDEX", "error|warning", "NCCL_IB_GID_INDEX names an empty or RoCE v1 entry"),
    ("NET-PLUGIN-MISSING", "warning", "the NCCL_NET_PLUGIN library is not on the library path"),
)

_CHECK: _Rows = (
    ("CHECK-EXPECT-GPUS", "error", "the number of visible GPUs differs from --expect-gpus"),
    ("CHECK-NO-GPU", "error", "no CUDA device is visible to the job, and nothing else says why"),
)

_API: _Rows = (
    (
        "API-CUDA-ALREADY-INITIALISED",
        "warning|error",
        "guard() ran after CUDA was initialised in this process",
    ),
)

_LINT: _Rows = (
    ("LINT-PARSE-ERROR", "error|info", "the file cannot be read or parsed as Python"),
    (
        "LINT-IGNORE-UNKNOWN-CODE",
        "warning",
        "a # gpudiag: ignore[…] comment names a code that is not a lint code",
    ),
    (
        "LINT-CVD-AFTER-CUDA-INIT",
        "error|warning|info",
        "CUDA_VISIBLE_DEVICES set after CUDA initialised: ignored",
    ),
    (
        "LINT-CVD-AFTER-IMPORT",
        "info",
        "CUDA_VISIBLE_DEVICES set after import torch, before any CUDA call",
    ),
    (
        "LINT-CUDA-BEFORE-FORK",
        "error",
        "CUDA initialised before a fork-based launcher starts a CUDA child",
    ),
    (
        "LINT-MASTER-PORT-PER-RANK",
        "error|info",
        "MASTER_PORT computed per rank: the ranks never meet",
    ),
    (
        "LINT-DDP-NO-SET-DEVICE",
        "error|info",
        "DDP ranks use the current device without set_device",
    ),
    (
        "LINT-DDP-CURRENT-DEVICE",
        "warning|info",
        "a DDP rank never sets its device, then barrier()/synchronize() use cuda:0",
    ),
    (
        "LINT-DDP-CUDA0-CONTEXT",
        "warning|info",
        "a DDP rank makes a CUDA context on cuda:0 before its set_device",
    ),
    (
        "LINT-DDP-LOAD-NO-MAP-LOCATION",
        "warning|info",
        "torch.load without map_location in a DDP rank restores tensors to cuda:0",
    ),
    (
        "LINT-DDP-SET-DEVICE-CONSTANT",
        "warning|error|info",
        "torch.cuda.set_device(<constant>) in a DDP script: every rank on one GPU",
    ),
    (
        "LINT-DEVICE-FROM-CVD",
        "warning",
        "a CUDA_VISIBLE_DEVICES entry (a physical GPU number) used as a CUDA ordinal",
    ),
    (
        "LINT-DEVICE-FROM-GLOBAL-RANK",
        "warning|info",
        "a GPU index taken from the global rank, not the local rank",
    ),
    (
        "LINT-DDP-DEVICE-IDS-CPU",
        "error|warning|info",
        "DistributedDataParallel(device_ids=…) on a module still on the CPU",
    ),
    (
        "LINT-SET-EPOCH-CONSTANT",
        "warning",
        "sampler.set_epoch() with a constant: the same order every epoch",
    ),
    (
        "LINT-SET-EPOCH-MISSING",
        "warning|info",
        "a shuffling DistributedSampler whose set_epoch() is never called",
    ),
    (
        "LINT-SAMPLER-SHUFFLE",
        "error|warning",
        "DataLoader with both sampler= and shuffle=True",
    ),
    ("LINT-IDS-UNDER-MASK", "error", "a GPU index missing under the script's CUDA_VISIBLE_DEVICES"),
    ("LINT-DP-MODULE-DEVICE", "error|info", "DataParallel's module is not on device_ids[0]"),
    ("LINT-CKPT-SAVE-WRAPPED", "warning", "a checkpoint saved from the DataParallel/DDP wrapper"),
    (
        "LINT-CKPT-PREFIX-MISMATCH",
        "error|warning",
        "a checkpoint loaded across the wrapper: the 'module.' prefix",
    ),
    (
        "LINT-AMP-DEPRECATED",
        "warning|info",
        "torch.cuda.amp.* is deprecated (FutureWarning since torch 2.4)",
    ),
    ("LINT-SCALER-BF16", "warning", "GradScaler with bf16 autocast: no loss scaling is needed"),
    (
        "LINT-SCALER-FP16-PARAMS",
        "error|warning|info",
        "GradScaler with float16 (or, on CUDA, bfloat16) parameters",
    ),
    (
        "LINT-WRAPPER-ATTRIBUTE",
        "error",
        "the model's own attribute read through the DataParallel/DDP wrapper",
    ),
    (
        "LINT-LOCAL-RANK-ARG",
        "warning|info",
        "--local_rank read from argv: torchrun does not pass it",
    ),
    (
        "LINT-SPAWN-ARGS-NOT-TUPLE",
        "error",
        "mp.spawn(args=(x)): one value in parentheses is not a tuple",
    ),
    (
        "LINT-NCCL-CPU-TENSOR",
        "error|info",
        "a collective on a CPU tensor in an NCCL-only process group",
    ),
    (
        "LINT-RENDEZVOUS-ENV-MISSING",
        "error",
        "self-started ranks use env:// without MASTER_ADDR/MASTER_PORT",
    ),
)

#: ``(area, description, rows)``, in the order a listing shows them.
_DECLARED: tuple[tuple[str, str, _Rows], ...] = (
    (
        "inventory",
        "GPU sources and their reconciliation: NVML, torch, GPUtil (SRC-, INV-)",
        _INVENTORY,
    ),
    ("visibility", "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (VIS-)", _VISIBILITY),
    ("dataparallel", "torch.nn.DataParallel's device arguments (DP-)", _DATAPARALLEL),
    ("ddp", "DDP ranks, launcher variables and Slurm (DDP-)", _DDP),
    (
        "launch",
        "which launcher starts the job, and DeepSpeed's runner (DDP-LAUNCHER*, DDP-DEEPSPEED-*)",
        _LAUNCH,
    ),
    ("ranks", "each rank's device under --set-device (DDP-)", _RANKS),
    ("port", "the rendezvous port (DDP-PORT-IN-USE)", _PORT),
    ("prelaunch", "inside a launch: launcher variables and the NCCL build (DDP-)", _PRELAUNCH),
    (
        "host",
        "the host before torch: container, driver, PCI bus, import torch (HOST-, ENV-)",
        _HOST,
    ),
    ("health", "GPU health, driver and architecture support, autocast (HEALTH-)", _HEALTH),
    ("precision", "TF32 and autocast precision against the training dtype (HEALTH-)", _PRECISION),
    (
        "topology",
        "between the GPUs and around them: P2P, IOMMU/ACS, NVLink, PCIe, NUMA, containers (TOPO-)",
        _TOPOLOGY,
    ),
    ("fleet", "between the nodes of one allocation: gpudiag fleet (FLEET-)", _FLEET),
    ("network", "the network NCCL and the rendezvous use on this node (NET-)", _NETWORK),
    ("check", "the check itself (CHECK-)", _CHECK),
    ("api", "the Python API, gpudiag.guard() (API-)", _API),
    ("lint", "training scripts read by gpudiag lint (LINT-)", _LINT),
)


def _build() -> tuple[dict[str, CodeInfo], dict[str, str]]:
    codes: dict[str, CodeInfo] = {}
    areas: dict[str, str] = {}
    for area, description, rows in _DECLARED:
        assert area not in areas, f"area {area} declared twice"
        areas[area] = description
        for code, severities, title in rows:
            assert code not in codes, f"{code} declared twice"
            sevs = tuple(severities.split("|"))
            assert sevs and all(s in SEVERITIES for s in sevs), (code, severities)
            assert len(set(sevs)) == len(sevs), (code, severities)
            codes[code] = CodeInfo(code, area, sevs[0], title, sevs)  # type: ignore[arg-type]
    return codes, areas


_CODES, _AREAS = _build()

#: ``{code: CodeInfo}``, in declaration order (grouped by area).
CATALOG: Mapping[str, CodeInfo] = MappingProxyType(_CODES)
#: ``{area: one-line description}``, in declaration order.
AREAS: Mapping[str, str] = MappingProxyType(_AREAS)


def lookup(code: str) -> CodeInfo | None:
    """The catalogue's entry for ``code`` (exact, upper-case), or None."""
    return CATALOG.get(code)


def codes_in(area: str) -> tuple[CodeInfo, ...]:
    """The codes one area owns, in declaration order.

    Raises:
        KeyError: an area the catalogue does not declare.
    """
    if area not in AREAS:
        raise KeyError(area)
    return tuple(info for info in CATALOG.values() if info.area == area)


def titles(area: str | None = None) -> dict[str, str]:
    """``{code: title}``: every code, or one area's."""
    infos = CATALOG.values() if area is None else codes_in(area)
    return {info.code: info.title for info in infos}
