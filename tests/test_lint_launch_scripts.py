"""Issue 17: a script's launcher read from the project's own shell scripts
(gpudiag/lint/launch_scripts.py): a deepspeed script that its run.sh starts with
torch.distributed.launch gets --local-rank, which its --local_rank option refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiag.lint import lint_paths
from gpudiag.lint.launch_scripts import ShellLaunches

SCRIPT = """\
import argparse
import deepspeed
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()
deepspeed.init_distributed()
"""


def _severity(tmp_path: Path, sh: str | None) -> list[str]:
    (tmp_path / "train.py").write_text(SCRIPT)
    if sh is not None:
        (tmp_path / "run.sh").write_text(sh)
    report = lint_paths([str(tmp_path)])
    return [f.finding.severity for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]


def test_no_shell_script_a_deepspeed_script_is_info(tmp_path: Path) -> None:
    assert _severity(tmp_path, None) == ["info"]


def test_started_by_torch_distributed_launch_it_is_a_warning(tmp_path: Path) -> None:
    sh = "#!/bin/bash\npython -m torch.distributed.launch --nproc_per_node=2 \\\n  train.py --deepspeed\n"
    assert _severity(tmp_path, sh) == ["warning"]


def test_started_by_the_deepspeed_launcher_it_stays_info(tmp_path: Path) -> None:
    assert _severity(tmp_path, "deepspeed --num_gpus 2 train.py --deepspeed\n") == ["info"]


def test_a_comment_or_another_script_does_not_count(tmp_path: Path) -> None:
    sh = "# torchrun train.py\ntorchrun --nproc_per_node=2 other.py\n"
    assert _severity(tmp_path, sh) == ["info"]


def test_launchers_are_read_from_the_folder_and_the_one_above(tmp_path: Path) -> None:
    sub = tmp_path / "src"
    sub.mkdir()
    (sub / "train.py").write_text("")
    (tmp_path / "go.sh").write_text("torchrun --nproc_per_node 8 src/train.py\n")
    assert ShellLaunches().launchers_of(str(sub / "train.py")) == frozenset({"torchrun"})


def test_an_interpreter_torch_2_does_not_support_means_torch_1_x(tmp_path: Path) -> None:
    """DeepSpeedExamples' bing_bert: `python3.6 -m torch.distributed.launch`: torch 1.x's
    launcher passes --local_rank, so nothing is certain."""
    sh = "python3.6 -m torch.distributed.launch --nproc_per_node=8 train.py\n"
    assert _severity(tmp_path, sh) == ["info"]


def test_a_script_folder_s_subfolders_are_read(tmp_path: Path) -> None:
    (tmp_path / "bash_script" / "ZeroQuant").mkdir(parents=True)
    sh = "python -m torch.distributed.launch --nproc_per_node=2 ../../train.py --deepspeed\n"
    (tmp_path / "bash_script" / "ZeroQuant" / "run.sh").write_text(sh)
    assert _severity(tmp_path, None) == ["warning"]


# Issue 17: mmengine's examples/distributed_training.py reads LOCAL_RANK (in its Runner)
# but declares only --local_rank, and docs/en/common_usage/distributed_training.md starts
# it with torch.distributed.launch, which in torch 2.x passes --local-rank=N.
READS_ENV = """\
import argparse
import os
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
args = parser.{parse}()
local_rank = int(os.environ["LOCAL_RANK"])
"""


def _documented(tmp_path: Path, doc: str, parse: str = "parse_args") -> list[str]:
    (tmp_path / "examples").mkdir(parents=True)
    (tmp_path / "examples" / "train.py").write_text(READS_ENV.format(parse=parse))
    (tmp_path / "docs" / "en").mkdir(parents=True)
    (tmp_path / "docs" / "en" / "distributed.md").write_text(doc)
    report = lint_paths([str(tmp_path)])
    return [f.finding.severity for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]


LAUNCH_DOC = (
    "Start it:\n\n```bash\npython -m torch.distributed.launch --nproc_per_node=8 \\\n"
    "    examples/train.py --launcher pytorch\n```\n"
)


def test_a_documented_torch_distributed_launch_rejects_the_option(tmp_path: Path) -> None:
    assert _documented(tmp_path, LAUNCH_DOC) == ["warning"]


def test_also_documenting_torchrun_does_not_help_who_follows_the_launch_line(
    tmp_path: Path,
) -> None:
    doc = LAUNCH_DOC + "\nOr:\n\n    torchrun --nproc-per-node 8 examples/train.py\n"
    assert _documented(tmp_path, doc) == ["warning"]


def test_documented_torchrun_only_stays_quiet(tmp_path: Path) -> None:
    assert _documented(tmp_path, "torchrun --nproc-per-node 8 examples/train.py\n") == []


def test_a_bare_file_name_in_a_document_names_the_file_beside_it(tmp_path: Path) -> None:
    # "train.py" in docs/en/distributed.md is docs/en/train.py, not examples/train.py
    assert _documented(tmp_path, "python -m torch.distributed.launch train.py\n") == []
    # a README beside the script names it by its bare name (swav's, dino's READMEs)
    (tmp_path / "examples" / "README.md").write_text(
        "python -m torch.distributed.launch --nproc_per_node=8 train.py --epochs 1\n"
    )
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [(f.path.endswith("train.py"), f.finding.severity) for f in found] == [(True, "warning")]


def test_torch_distributed_launch_with_use_env_passes_no_option(tmp_path: Path) -> None:
    # torch 2.13 torch/distributed/launch.py: --use-env sets LOCAL_RANK instead (dino's
    # README starts its retrieval evals so)
    for flag in ("--use_env", "--use-env"):
        doc = LAUNCH_DOC.replace("launch ", f"launch {flag} ")
        assert f"launch {flag} " in doc
        assert _documented(tmp_path / flag, doc) == []


def test_parse_known_args_keeps_the_unknown_spelling_aside(tmp_path: Path) -> None:
    assert _documented(tmp_path, LAUNCH_DOC, parse="parse_known_args") == []


UNREAD = """\
import argparse
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0, help="not used")
args = parser.parse_args()
dist.init_process_group("nccl")
"""


def test_an_option_nothing_else_reads_is_info_unless_launch_starts_it(tmp_path: Path) -> None:
    """swav's main_deepclusterv2.py declares --local_rank "not used" and takes rank % GPUs
    in a helper (issue 17, the held-out corpus): the torchrun half of the warning is not
    shown; started by torch.distributed.launch, the option still rejects --local-rank."""
    (tmp_path / "train.py").write_text(UNREAD)
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [f.finding.severity for f in found] == ["info"]
    assert "nothing else in this file reads local_rank" in found[0].finding.message
    (tmp_path / "run.sh").write_text("python -m torch.distributed.launch train.py\n")
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [f.finding.severity for f in found] == ["warning"]
    # only what is true of an unread option: the launcher's --local-rank is rejected; no
    # rank keeps a default GPU (CodeFormer's basicsr/train.py, a thirteenth held-out corpus)
    assert "argparse rejects it" in found[0].finding.message
    assert "keeps the option's default" not in found[0].finding.message
    # started by torchrun only, an unread option is harmless
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    report = lint_paths([str(tmp_path)])
    assert not [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    (tmp_path / "run.sh").write_text("python -m torch.distributed.launch train.py\n")
    # read once more (args.local_rank), the warning needs no launcher
    (tmp_path / "run.sh").unlink()
    (tmp_path / "train.py").write_text(UNREAD + "print(args.local_rank)\n")
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [f.finding.severity for f in found] == ["warning"]


def test_os_getenv_without_import_os_still_reads_local_rank(tmp_path: Path) -> None:
    """NVIDIA's BERT extract_features.py defaults --local_rank to os.getenv('LOCAL_RANK')
    but never imports os (held-out corpus of issue 17): the script reads LOCAL_RANK."""
    text = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=os.getenv('LOCAL_RANK', -1))\n"
        "args = parser.parse_args()\ndevice = f'cuda:{args.local_rank}'\n"
    )
    (tmp_path / "train.py").write_text(text)
    report = lint_paths([str(tmp_path)])
    assert [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"] == []
    (tmp_path / "train.py").write_text(text.replace("os.getenv('LOCAL_RANK', -1)", "-1"))
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [f.finding.severity for f in found] == ["warning"]


MMSEG_TRAIN = """\
import argparse
import os
parser = argparse.ArgumentParser()
parser.add_argument('--local_rank', type=int, default=0)
args = parser.parse_args()
if 'LOCAL_RANK' {op} os.environ:
    os.environ['LOCAL_RANK'] = str(args.local_rank)
print(args.local_rank)
"""


def test_a_membership_test_on_the_environment_reads_local_rank(tmp_path: Path) -> None:
    """mmseg's tools/train.py copies --local_rank into LOCAL_RANK only when the launcher
    has not set it; under torchrun it is set (a fourth held-out corpus: InternVL's
    segmentation scripts, 2 wrong warnings). torch 2's torch.distributed.launch still
    passes --local-rank, which the option refuses: a warning there."""
    sh = tmp_path / "dist_train.sh"
    for op in ("not in", "in"):
        (tmp_path / "train.py").write_text(MMSEG_TRAIN.format(op=op))
        sh.write_text("torchrun --nproc_per_node=$GPUS train.py $CONFIG --launcher pytorch\n")
        report = lint_paths([str(tmp_path)])
        assert [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"] == []
        sh.write_text("python -m torch.distributed.launch --nproc_per_node=$GPUS train.py\n")
        report = lint_paths([str(tmp_path)])
        found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
        assert [f.finding.severity for f in found] == ["warning"]
    # a membership test on another mapping is no read of the environment
    (tmp_path / "train.py").write_text(
        MMSEG_TRAIN.format(op="not in").replace("' not in os.environ", "' not in {}")
    )
    sh.write_text("torchrun --nproc_per_node=$GPUS train.py $CONFIG --launcher pytorch\n")
    report = lint_paths([str(tmp_path)])
    found = [f for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert [f.finding.severity for f in found] == ["warning"]


ONE_PROCESS = """\
import argparse
import torch
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", default=0, type=int)
args = parser.parse_args()
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:26442", world_size={size}, rank=0)
torch.cuda.set_device(args.local_rank)
"""


def _local_rank_severities(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "test_seg.py").write_text(text)
    report = lint_paths([str(tmp_path)])
    return [f.finding.severity for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]


def test_a_group_of_one_process_makes_the_option_moot(tmp_path: Path) -> None:
    """Cream's CDARTS test_seg.py: init_process_group(world_size=1, rank=0), a group of
    one whatever --local_rank says (a sixth held-out corpus, 1 wrong warning). A group of
    two, or a project script that starts it with torch.distributed.launch, keeps it."""
    assert _local_rank_severities(tmp_path, ONE_PROCESS.format(size=1)) == []
    assert _local_rank_severities(tmp_path, ONE_PROCESS.format(size=2)) == ["warning"]
    (tmp_path / "run.sh").write_text(
        "python -m torch.distributed.launch --nproc_per_node=2 test_seg.py\n"
    )
    assert _local_rank_severities(tmp_path, ONE_PROCESS.format(size=1)) == ["warning"]


def test_an_option_in_a_script_with_nothing_distributed_is_info(tmp_path: Path) -> None:
    """Cream's cal_model.py reads args.local_rank only to gate a print, and starts no
    process group (a sixth held-out corpus, 1 wrong warning)."""
    text = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=0)\n"
        "args = parser.parse_args()\nif args.local_rank == 0:\n    print('params')\n"
    )
    assert _local_rank_severities(tmp_path, text) == ["info"]
    # the option picks the GPU: it decides something
    device = text + "device = f'cuda:{args.local_rank}'\n"
    assert _local_rank_severities(tmp_path, device) == ["warning"]
    dist = text.replace("import argparse\n", "import argparse\nimport torch.distributed as dist\n")
    dist += "dist.init_process_group('nccl')\n"
    assert _local_rank_severities(tmp_path, dist) == ["warning"]


def test_a_constant_device_in_a_group_of_one_is_quiet() -> None:
    """FasterViT's datasets.py __main__: set_device(0) and init_process_group(rank=0,
    world_size=1): one rank, no GPU to share (an eighth held-out corpus, 2 wrong
    warnings). The same set_device in a group of several keeps the warning."""
    from gpudiag.lint import lint_source

    text = (
        "import torch\nimport torch.distributed as dist\n"
        "torch.cuda.set_device(0)\n"
        "dist.init_process_group('nccl', init_method='env://', rank=0, world_size={n})\n"
    )
    codes = [f.finding.code for f in lint_source(text.format(n=1))]
    assert "LINT-DDP-SET-DEVICE-CONSTANT" not in codes
    codes = [f.finding.code for f in lint_source(text.format(n=2))]
    assert "LINT-DDP-SET-DEVICE-CONSTANT" in codes


def test_a_script_named_from_the_shell_script_s_own_folder_is_that_one(tmp_path: Path) -> None:
    """MapTR's tools/dist_test.sh starts ``$(dirname "$0")/test.py``: tools/test.py, not
    tools/maptr/test.py (issue 17, a fifteenth held-out corpus: a false warning)."""
    for rel in ("tools/test.py", "tools/maptr/test.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(READS_ENV.format(parse="parse_args"))
    for form in ('$(dirname "$0")/test.py', "$(dirname $0)/test.py", "${0%/*}/test.py"):
        (tmp_path / "tools" / "dist_test.sh").write_text(
            f"python -m torch.distributed.launch --nproc_per_node=8 {form} --launcher pytorch\n"
        )
        report = lint_paths([str(tmp_path)])
        found = {
            Path(f.path).relative_to(tmp_path).as_posix(): f.finding.severity
            for f in report.findings
            if f.finding.code == "LINT-LOCAL-RANK-ARG"
        }
        assert found == {"tools/test.py": "warning"}, form


_OPTION_ONLY = """\
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()
if args.local_rank != -1:
    torch.distributed.init_process_group("nccl")
if args.local_rank == 0:
    print("caching the dataset")
"""


@pytest.mark.parametrize(
    ("doc", "severity"),
    [
        ("deepspeed --include=localhost:1,2,3,4 post_training.py --lora_r 8\n", "info"),
        ("torchrun --nproc_per_node=4 post_training.py --lora_r 8\n", "warning"),
    ],
    ids=["deepspeed", "torchrun"],
)
def test_a_documented_deepspeed_launch_passes_the_option(
    tmp_path: Path, doc: str, severity: str
) -> None:
    """LLM-Pruner's README starts post_training.py with the deepspeed launcher, which
    passes --local_rank=N (a twenty-second held-out sample: a false warning); under
    torchrun the option keeps its default."""
    (tmp_path / "post_training.py").write_text(_OPTION_ONLY)
    (tmp_path / "README.md").write_text(doc)
    report = lint_paths([str(tmp_path)])
    found = [f.finding.severity for f in report.findings if f.finding.code == "LINT-LOCAL-RANK-ARG"]
    assert found == [severity]
