"""Issue 17: a global rank used as a CUDA ordinal is info where every rank runs on this
host by construction (gpudiag/lint/single_node.py); own minimal reproductions of apex's
NcclDistributedTestBase tests and accelerate's tests that launch torchrun themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiag.lint import lint_source

BODY = """\
import torch
import torch.distributed as dist

def make_model():
    rank = dist.get_rank()
    return torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(2, 2).cuda(rank), device_ids=[rank]
    )
"""


def _severities(text: str) -> list[str]:
    return [
        f.finding.severity
        for f in lint_source(text)
        if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"
    ]


def test_outside_a_harness_it_is_a_warning() -> None:
    assert set(_severities(BODY)) == {"warning"}


def test_a_multi_process_test_case_makes_it_info() -> None:
    text = BODY + (
        "\nfrom harness import NcclDistributedTestBase\n\n"
        "class TestModel(NcclDistributedTestBase):\n"
        "    def test_it(self):\n"
        "        make_model()\n"
    )
    found = [f for f in lint_source(text) if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"]
    assert found and {f.finding.severity for f in found} == {"info"}
    assert "multi-process test harness" in found[0].finding.message


def test_a_file_that_launches_itself_on_one_node_makes_it_info() -> None:
    launch = (
        "\nimport subprocess\n\n"
        "def test_launch():\n"
        '    subprocess.run(["torchrun", f"--nproc_per_node={torch.cuda.device_count()}",'
        " __file__], check=True, timeout=600)\n"
    )
    assert set(_severities(BODY + launch)) == {"info"}
    nodes = launch.replace("__file__]", '"--nnodes=2", __file__]')
    assert set(_severities(BODY + nodes)) == {"warning"}


_SPAWNED = """
import torch.multiprocessing as mp

def worker(rank, world_size, node_rank):
    dist.init_process_group("nccl", init_method="file:///tmp/f", rank={rank}, world_size=world_size)
    make_model()

def test_spawn():
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size, 0), nprocs=world_size)
"""


def test_ranks_spawned_with_their_own_index_make_it_info() -> None:
    """mp.spawn starts every process on this host; when each passes its own index as its
    rank, no rank is left for another node (issue 17, the held-out corpus: fairscale's
    and OLMo's tests, 17 wrong warnings)."""
    found = [
        f
        for f in lint_source(BODY + _SPAWNED.format(rank="rank"))
        if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"
    ]
    assert found and {f.finding.severity for f in found} == {"info"}
    assert "torch.multiprocessing.spawn starts on this host" in found[0].finding.message


def test_ranks_spawned_with_a_node_offset_stay_a_warning() -> None:
    # pytorch/examples' multi-node mp.spawn: rank = node_rank * ngpus + gpu
    offset = _SPAWNED.format(rank="node_rank * world_size + rank")
    assert set(_severities(BODY + offset)) == {"warning"}
    # and a rank that is not the spawn index at all (read from the environment)
    env = "import os\n" + _SPAWNED.format(rank='int(os.environ["RANK"])')
    assert set(_severities(BODY + env)) == {"warning"}


def test_tests_marked_for_a_small_world_size_make_it_info() -> None:
    """composer's convention (mosaicml/llm-foundry tests/conftest.py): one world size per
    `composer -n N -m pytest` launch, on one host (a second held-out corpus: 9 wrong
    warnings in llm-foundry's MoE tests). A world size past one host's GPUs stays."""
    marked = "import pytest\n\n@pytest.mark.world_size(2)\ndef test_it():\n    make_model()\n"
    assert set(_severities(BODY + marked)) == {"info"}
    assert set(_severities(BODY + marked.replace("(2)", "(64)"))) == {"warning"}


_CONFTEST = """\
import os
import pytest

def _get_world_size(item):
    return item.get_closest_marker("world_size", default=pytest.mark.world_size(1).mark).args[0]

def pytest_collection_modifyitems(config, items):
    size = int(os.environ.get("WORLD_SIZE", "1"))
    items[:] = [item for item in items if _get_world_size(item) == size]
"""


def test_a_conftest_that_selects_tests_by_world_size_makes_it_info(tmp_path: Path) -> None:
    """llm-foundry's test_ffn.py has no marker: its tests/conftest.py runs it at world size
    1 (a second held-out corpus: 2 wrong warnings). A conftest without the convention, or
    a file that is not a test, keeps the warning."""
    from gpudiag.lint import lint_paths

    layers = tmp_path / "tests" / "layers"
    layers.mkdir(parents=True)
    # a harness that reads LOCAL_RANK: not taken as one host for being a test module
    harness = "import os\nLOCAL = int(os.environ.get('LOCAL_RANK', 0))\n"
    (layers / "test_ffn.py").write_text(harness + BODY + "\ndef test_it():\n    make_model()\n")
    (layers / "helpers.py").write_text(BODY)

    def severities(name: str) -> set[str]:
        report = lint_paths([str(tmp_path)])
        return {
            f.finding.severity
            for f in report.findings
            if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK" and f.path.endswith(name)
        }

    assert severities("test_ffn.py") == {"warning"}
    (tmp_path / "tests" / "conftest.py").write_text("import pytest\n")
    assert severities("test_ffn.py") == {"warning"}
    (tmp_path / "tests" / "conftest.py").write_text(_CONFTEST)
    assert severities("test_ffn.py") == {"info"}
    assert severities("helpers.py") == {"warning"}


_TEST = BODY + "\n\ndef test_it():\n    make_model()\n"


def _project_severities(tmp_path: Path, name: str) -> set[str]:
    from gpudiag.lint import lint_paths

    report = lint_paths([str(tmp_path)])
    return {
        f.finding.severity
        for f in report.findings
        if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK" and f.path.endswith(name)
    }


def test_a_test_module_that_never_reads_local_rank_makes_it_info(tmp_path: Path) -> None:
    """Distributed tests are started on one host (a fourth held-out corpus: 53 wrong
    warnings in ColossalAI's tests, spawned through a project helper on localhost, and in
    flash-attention's, launched by `torchrun --nproc_per_node=N pytest`). The same code in
    a file pytest does not collect keeps the warning."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_layers.py").write_text(_TEST)
    (tests / "layers_test.py").write_text(_TEST)
    # a script that runs the same code (a train.py only defining a test_it() nothing
    # calls would never run it: lint/unused.py)
    (tmp_path / "train.py").write_text(BODY + "\n\nmake_model()\n")
    assert _project_severities(tmp_path, "test_layers.py") == {"info"}
    assert _project_severities(tmp_path, "layers_test.py") == {"info"}
    assert _project_severities(tmp_path, "train.py") == {"warning"}
    from gpudiag.lint import lint_paths

    messages = [
        f.finding.message
        for f in lint_paths([str(tests / "test_layers.py")]).findings
        if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"
    ]
    assert messages and all("test_layers.py is a test module" in m for m in messages)


def test_a_test_helper_that_reads_local_rank_keeps_the_warning(tmp_path: Path) -> None:
    """Megatron-LM's tests: the harness reads LOCAL_RANK and RANK in a class body
    (tests/unit_tests/test_utilities.py) and means to span nodes; a test that sets the
    device from dist.get_rank() then breaks on the second node (3 right warnings kept)."""
    unit = tmp_path / "tests" / "unit_tests"
    unit.mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (unit / "__init__.py").write_text("")
    (unit / "test_utilities.py").write_text(
        "import os\n\nclass Utils:\n"
        "    rank = int(os.environ.get('RANK', '0'))\n"
        "    local_rank = int(os.environ.get('LOCAL_RANK', '0'))\n\n"
        "    @staticmethod\n    def initialize():\n        pass\n"
    )
    (unit / "test_comm.py").write_text(
        "from tests.unit_tests.test_utilities import Utils\n" + _TEST
    )
    assert _project_severities(tmp_path, "test_comm.py") == {"warning"}
    # the same read in the library the test exercises (ColossalAI's DistCoordinator)
    # says nothing of how the tests are launched: info
    (unit / "test_utilities.py").write_text("def initialize():\n    pass\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "coordinator.py").write_text(
        "import os\n\ndef local_rank():\n    return int(os.environ['LOCAL_RANK'])\n"
    )
    (unit / "test_comm.py").write_text(
        "from lib.coordinator import local_rank\n" + _TEST + "    local_rank()\n"
    )
    assert _project_severities(tmp_path, "test_comm.py") == {"info"}


_DRIVER = """\
import subprocess
from pathlib import Path

import torch

LAUNCH_CMD = ["torchrun", f"--nproc_per_node={torch.cuda.device_count()}"{nodes}]


def test_numerics():
    script = Path(__file__).parent / "run_numerics.py"
    subprocess.run(LAUNCH_CMD + [str(script)], check=True, timeout=600)
"""


def test_a_script_a_driver_beside_it_launches_on_one_node_is_info(tmp_path: Path) -> None:
    """TransformerEngine's tests/pytorch/distributed: test_numerics.py launches
    run_numerics.py with torchrun --nproc_per_node and no --nnodes (a fourth held-out
    corpus, 3 wrong warnings). A driver in another folder, one that launches on several
    nodes, or one that names another script, leaves the warning."""
    script = BODY + "\nif __name__ == '__main__':\n    make_model()\n"
    (tmp_path / "run_numerics.py").write_text(script)
    driver = tmp_path / "test_numerics.py"
    assert _project_severities(tmp_path, "run_numerics.py") == {"warning"}
    driver.write_text(_DRIVER.replace("{nodes}", ""))
    assert _project_severities(tmp_path, "run_numerics.py") == {"info"}
    driver.write_text(_DRIVER.replace("{nodes}", ', "--nnodes=2"'))
    assert _project_severities(tmp_path, "run_numerics.py") == {"warning"}
    driver.write_text(_DRIVER.replace("{nodes}", "").replace("run_numerics.py", "other.py"))
    assert _project_severities(tmp_path, "run_numerics.py") == {"warning"}
    driver.unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_numerics.py").write_text(_DRIVER.replace("{nodes}", ""))
    assert _project_severities(tmp_path, "run_numerics.py") == {"warning"}


_LOOPBACK = """\
import os
import torch
import torch.distributed as dist


def get_dist_params():
    master_addr = "127.0.0.1"
    os.environ["MASTER_ADDR"] = master_addr
    os.environ["MASTER_PORT"] = "29500"
    return int(os.environ.get("PMI_RANK", 0)), int(os.environ.get("PMI_SIZE", 1))


if __name__ == "__main__":
    rank, world_size = get_dist_params()
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    device = f"cuda:{dist.get_rank()}"
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(2, 2).to(device), device_ids=[device]
    )
"""


def test_a_script_that_sets_master_addr_to_this_host_makes_it_info() -> None:
    """pyg's distributed_sampling_xpu.py (an eighteenth held-out corpus): MASTER_ADDR is
    127.0.0.1, set by the script; rank 0's store is on this host, so every rank is."""
    found = [f for f in lint_source(_LOOPBACK) if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"]
    assert found and {f.finding.severity for f in found} == {"info"}
    assert "MASTER_ADDR to 127.0.0.1" in found[0].finding.message


_SET = '    os.environ["MASTER_ADDR"] = master_addr\n'
_GUARDED = (
    '    if "MASTER_ADDR" not in os.environ:\n        os.environ["MASTER_ADDR"] = master_addr\n'
)
_CALL = "    rank, world_size = get_dist_params()\n"


@pytest.mark.parametrize(
    "edits",
    [
        # a launcher's MASTER_ADDR kept when there is one: the default is not a proof
        [(_SET, _GUARDED)],
        [(_SET, '    os.environ.setdefault("MASTER_ADDR", master_addr)\n')],
        [('"127.0.0.1"', '"node001"')],
        # an init_method of its own may name another host: MASTER_ADDR is not read then
        [
            (
                'dist.init_process_group("nccl", rank=rank',
                'dist.init_process_group("nccl", init_method=os.environ["DIST_URL"], rank=rank',
            )
        ],
        # a guarded default written by a function walked twice is still a guarded default
        [(_SET, _GUARDED), (_CALL, "    get_dist_params()\n" + _CALL)],
    ],
    ids=["guarded", "setdefault", "another-host", "own-init-method", "guarded-twice"],
)
def test_a_master_addr_that_is_no_proof_keeps_the_warning(edits: list[tuple[str, str]]) -> None:
    text = _LOOPBACK
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    assert set(_severities(text)) == {"warning"}


_HANDED_ON = """\
import torch
import torch.distributed as dist


def encode(x, device):
    return x.to(device)


def sample(pipe, x):
    device = torch.device(f"cuda:{dist.get_rank()}") if dist.is_initialized() else pipe.device
    y = encode(x, device)
    z = torch.zeros(3, device=device)
    return y.to(device) + z
"""


def test_a_rank_device_handed_on_is_reported_once() -> None:
    """HunyuanVideo's pipeline (a nineteenth held-out sample): one device built from the
    global rank, whose origin an ``if``-expression loses, was reported at each of 15 uses."""
    lines = [
        f.line for f in lint_source(_HANDED_ON) if f.finding.code == "LINT-DEVICE-FROM-GLOBAL-RANK"
    ]
    assert lines == [10]
