"""The torch / multiprocessing names the lint recognises, as fully resolved dotted paths.

The walker resolves each call through the script's imports
(``import torch.nn as nn``, ``from torch.nn.parallel import DistributedDataParallel as DDP``)
and compares the result with these sets: a rule fires on what is called, not on
what a variable is called.
"""

from __future__ import annotations

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.nn.DistributedDataParallel",
    }
)
SET_DEVICE = frozenset(
    {"torch.cuda.set_device", "torch.cuda.device", "torch.accelerator.set_device_index"}
)
INIT_PROCESS_GROUP = frozenset({"torch.distributed.init_process_group"})
GET_RANK = frozenset({"torch.distributed.get_rank"})
GET_LOCAL_RANK = frozenset({"torch.distributed.get_node_local_rank"})
DEVICE_COUNT = frozenset({"torch.cuda.device_count"})
TORCH_DEVICE = frozenset({"torch.device"})
SPAWN = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.spawn.spawn",
        "torch.multiprocessing.start_processes",
    }
)
PROCESS = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process"})
POOL = frozenset(
    {
        "multiprocessing.Pool",
        "torch.multiprocessing.Pool",
        "concurrent.futures.ProcessPoolExecutor",
        "multiprocessing.pool.Pool",
    }
)
SET_START_METHOD = frozenset(
    {"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"}
)
GET_CONTEXT = frozenset({"multiprocessing.get_context", "torch.multiprocessing.get_context"})
DIST_SAMPLER = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
GRAD_SCALER = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
    }
)
AUTOCAST = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
        "torch.cpu.amp.autocast",
    }
)
#: torch 2.4 deprecated these (FutureWarning), torch/cuda/amp/autocast_mode.py and
#: torch/cuda/amp/grad_scaler.py in torch 2.13 still carry the @deprecated text.
DEPRECATED_AMP = {
    "torch.cuda.amp.autocast": ("torch.cuda.amp.autocast", "torch.amp.autocast('cuda', args...)"),
    "torch.cuda.amp.autocast_mode.autocast": (
        "torch.cuda.amp.autocast",
        "torch.amp.autocast('cuda', args...)",
    ),
    "torch.cuda.amp.GradScaler": (
        "torch.cuda.amp.GradScaler",
        "torch.amp.GradScaler('cuda', args...)",
    ),
    "torch.cuda.amp.grad_scaler.GradScaler": (
        "torch.cuda.amp.GradScaler",
        "torch.amp.GradScaler('cuda', args...)",
    ),
    "torch.cuda.amp.custom_fwd": (
        "torch.cuda.amp.custom_fwd",
        "torch.amp.custom_fwd(args..., device_type='cuda')",
    ),
    "torch.cuda.amp.custom_bwd": (
        "torch.cuda.amp.custom_bwd",
        "torch.amp.custom_bwd(args..., device_type='cuda')",
    ),
    "torch.cpu.amp.autocast": ("torch.cpu.amp.autocast", "torch.amp.autocast('cpu', args...)"),
    # issue 17: the module paths of the same names, torch.cpu.amp.GradScaler and _cast
    # (torch 2.13 torch/cuda/amp/autocast_mode.py, torch/cpu/amp/grad_scaler.py)
    "torch.cuda.amp.autocast_mode.custom_fwd": (
        "torch.cuda.amp.custom_fwd",
        "torch.amp.custom_fwd(args..., device_type='cuda')",
    ),
    "torch.cuda.amp.autocast_mode.custom_bwd": (
        "torch.cuda.amp.custom_bwd",
        "torch.amp.custom_bwd(args..., device_type='cuda')",
    ),
    "torch.cuda.amp.autocast_mode._cast": (
        "torch.cuda.amp.autocast_mode._cast",
        "torch.amp.autocast_mode._cast(value, 'cuda', dtype)",
    ),
    "torch.cpu.amp.autocast_mode.autocast": (
        "torch.cpu.amp.autocast",
        "torch.amp.autocast('cpu', args...)",
    ),
    "torch.cpu.amp.GradScaler": (
        "torch.cpu.amp.GradScaler",
        "torch.amp.GradScaler('cpu', args...)",
    ),
    "torch.cpu.amp.grad_scaler.GradScaler": (
        "torch.cpu.amp.GradScaler",
        "torch.amp.GradScaler('cpu', args...)",
    ),
}
TORCH_SAVE = frozenset({"torch.save"})
TORCH_LOAD = frozenset({"torch.load"})
STRIP_PREFIX_FUNCS = frozenset(
    {
        "torch.nn.modules.utils.consume_prefix_in_state_dict_if_present",
        "torch.nn.utils.consume_prefix_in_state_dict_if_present",
    }
)
RANDOM_SOURCES = ("random.", "numpy.random.", "socket.socket", "secrets.")

#: ``torch.cuda`` functions that initialise the CUDA driver (cuInit) in this
#: process. ``is_available`` calls ``torch._C._cuda_getDeviceCount`` (a CUDA
#: runtime call, so cuInit) unless PYTORCH_NVML_BASED_CUDA_CHECK=1
#: (torch/cuda/__init__.py, torch 2.13). ``device_count`` is NOT here: it asks
#: NVML first and does not initialise CUDA (recorded on an H100 with torch 2.11:
#: a CUDA_VISIBLE_DEVICES change after it was honoured).
CUDA_INIT_FUNCS = frozenset(
    "torch.cuda." + name
    for name in (
        "is_available",
        "init",
        "set_device",
        "current_device",
        "get_device_name",
        "get_device_properties",
        "get_device_capability",
        "is_bf16_supported",
        "synchronize",
        "mem_get_info",
        "Stream",
        "Event",
        "current_stream",
        "default_stream",
        "get_arch_list",
        "ipc_collect",
        "device",
    )
)

#: Private torch calls scripts use to ask for the GPU count or to start CUDA early:
#: ``torch._C._cuda_getDeviceCount`` is the CUDA runtime's cudaGetDeviceCount (it runs
#: cuInit; torch.cuda.is_available calls it), ``_cuda_init`` / ``_lazy_init`` initialise
#: torch's CUDA state (torch/cuda/__init__.py, torch 2.13).
CUDA_INIT_PRIVATE = frozenset(
    {"torch._C._cuda_getDeviceCount", "torch._C._cuda_init", "torch.cuda._lazy_init"}
)

#: Modules whose import initialises CUDA, each with the source that says so and whether
#: every release does (True: a context is created by design) or only some (False).
IMPORTS_INIT_CUDA: dict[str, tuple[str, bool]] = {
    # inducer/pycuda pycuda/autoinit.py and autoprimaryctx.py (at 66ae199 / 217fe8e): the
    # module body runs cuda.init() and makes (or retains and pushes) a context
    "pycuda.autoinit": ("pycuda/autoinit.py runs cuda.init() and makes a context", True),
    "pycuda.autoprimaryctx": ("pycuda/autoprimaryctx.py runs cuda.init()", True),
    # deepspeedai/DeepSpeed#7252 (import deepspeed initialises CUDA), #6810 (the
    # CUDA_VISIBLE_DEVICES case, moved to device_count() first), #7918; made fork-safe
    # only by PR #8078 (2026), so the releases in use still do it
    "deepspeed": (
        "DeepSpeed's accelerator and op checks at import call torch.cuda.is_available() "
        "(deepspeedai/DeepSpeed#7252, #6810; releases before PR #8078)",
        False,
    ),
}

#: torch factories that make a tensor on the CPU unless given ``device=``
TENSOR_FACTORIES = frozenset(
    "torch." + name
    for name in ("tensor", "zeros", "ones", "randn", "rand", "empty", "full", "arange", "randint")
)
#: Functions that build a model on the CPU (their result is a module), besides the
#: ``torchvision.models.*`` constructors: timm/models/_factory.py ``create_model``,
#: torchvision.models ``get_model`` (torchvision >= 0.14).
MODEL_FACTORIES = frozenset(
    {"timm.create_model", "timm.models.create_model", "torchvision.models.get_model"}
)
#: Where a script looks a model class up by name: ``models.__dict__[arch]()``,
#: ``getattr(models, arch)()`` (pytorch/examples imagenet/main.py builds its model so).
MODEL_REGISTRIES = frozenset({"torchvision.models", "timm.models", "models"})
NEW_GROUP = frozenset({"torch.distributed.new_group"})
#: torch.distributed collectives whose first argument is the tensor they work on
COLLECTIVES = frozenset(
    "torch.distributed." + name
    for name in (
        "all_reduce",
        "broadcast",
        "reduce",
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "send",
        "recv",
    )
)
#: The position of ``group`` in each collective's signature (torch 2.13
#: torch/distributed/distributed_c10d.py).
COLLECTIVE_GROUP_ARG = {
    "all_reduce": 2,
    "broadcast": 2,
    "reduce": 3,
    "all_gather": 2,
    "all_gather_into_tensor": 2,
    "reduce_scatter_tensor": 3,
    "all_to_all_single": 4,
    "send": 2,
    "recv": 2,
}

NN_MODULE_ATTRS = frozenset(
    # nn.Module's public methods and the attributes DataParallel / DistributedDataParallel
    # set on themselves (torch 2.13 torch/nn/modules/module.py, torch/nn/parallel/*.py)
    """forward training parameters named_parameters buffers named_buffers children
    named_children modules named_modules state_dict load_state_dict train eval to cuda cpu
    xpu mtia ipu half float double bfloat16 type zero_grad apply requires_grad_
    register_buffer register_parameter register_module add_module register_forward_hook
    register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
    register_backward_hook register_state_dict_pre_hook register_state_dict_post_hook
    register_load_state_dict_pre_hook register_load_state_dict_post_hook get_submodule
    set_submodule get_parameter get_buffer get_extra_state set_extra_state extra_repr
    share_memory to_empty compile module device_ids output_device dim no_sync join
    join_device join_hook join_process_group process_group register_comm_hook
    src_device_obj device device_type device_mesh reducer logger static_graph
    find_unused_parameters gradient_as_bucket_view mixed_precision broadcast_buffers
    bucket_bytes_cap parameters_to_ignore require_backward_grad_sync
    require_forward_param_sync is_multi_device_module scatter gather replicate
    parallel_apply""".split()  # noqa: SIM905 - a word list reads better than 82 quotes
)

#: torch.nn modules that hold no parameter and, built without ``weight=`` or
#: ``pos_weight=`` (a buffer then), no buffer: ``.cuda()`` / ``.to("cuda")`` on one moves
#: nothing and starts no CUDA context (torch 2.13 torch/nn/modules/module.py ``_apply``
#: walks only parameters and buffers; loss.py ``_WeightedLoss`` registers ``weight``).
#: A seventh/eighth held-out corpus: FasterViT's and MambaVision's module-level
#: ``kl_loss = torch.nn.KLDivLoss(reduction="batchmean").cuda()``, 2 false errors.
HOLD_NOTHING = frozenset(
    f"torch.nn.{name}"
    for name in """L1Loss MSELoss CrossEntropyLoss NLLLoss KLDivLoss BCELoss
    BCEWithLogitsLoss SmoothL1Loss HuberLoss SoftMarginLoss MultiLabelSoftMarginLoss
    CosineEmbeddingLoss MarginRankingLoss HingeEmbeddingLoss TripletMarginLoss CTCLoss
    PoissonNLLLoss GaussianNLLLoss MultiLabelMarginLoss ReLU ReLU6 GELU SiLU Mish Sigmoid
    Tanh Softmax LogSoftmax LeakyReLU ELU Hardswish Hardsigmoid Identity Flatten Dropout
    Dropout2d MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d
    AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool2d Upsample PixelShuffle""".split()  # noqa: SIM905
)
