"""What DeepSpeed's one-node runner does with the devices before it starts workers.

Pure: follows ``deepspeed/launcher/runner.py`` ``main`` (DeepSpeed 0.19.8);
recorded from a real run (``tests/test_launchers_real.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.findings.texts import EMPTY_IDS
from gpudiag.parsing import is_int_text


@dataclass(frozen=True)
class DeepSpeedDevices:
    """What DeepSpeed's runner does with the devices before it starts workers.

    Attributes:
        spec: the ``CUDA_VISIBLE_DEVICES`` every worker on this node gets, or None
            when the runner refuses to start (``error``).
        how: why, in words (which flag or variable produced it).
        ignored: the user's ``CUDA_VISIBLE_DEVICES`` when the runner dropped it.
        error: the exception the runner raises, or None.
    """

    spec: str | None
    how: str
    ignored: str | None = None
    error: str | None = None


def deepspeed_devices(
    machine_gpus: int,
    visible: str | None,
    *,
    include: str | None = None,
    exclude: str | None = None,
    num_gpus: int | None = None,
) -> DeepSpeedDevices:
    """The ``CUDA_VISIBLE_DEVICES`` DeepSpeed's one-node runner gives its workers.

    Follows ``deepspeed/launcher/runner.py`` ``main`` (DeepSpeed 0.19.8) with no
    hostfile: a non-empty ``CUDA_VISIBLE_DEVICES`` becomes ``--include
    localhost:<value>`` unless ``--include``/``--exclude``/``--num_gpus`` is given,
    in which case it is ignored; either way it is deleted before the runner counts
    the GPUs, so slots are numbered over the whole machine (``machine_gpus``).
    ``parse_resource_filter`` then keeps the included slots (or drops the excluded
    ones); ``--num_gpus N`` takes slots ``0..N-1``; ``launch.py`` joins the slots into
    each worker's ``CUDA_VISIBLE_DEVICES``.
    """
    include = include or ""
    exclude = exclude or ""
    ignored = None
    how = ""
    if visible:
        if include or exclude or (num_gpus is not None and num_gpus > 0):
            ignored = visible
        else:
            include = f"localhost:{visible}"
            how = f"CUDA_VISIBLE_DEVICES={visible} became --include {include}"
    if num_gpus is not None and (include or exclude):
        return DeepSpeedDevices(
            None,
            "--num_gpus with --include/--exclude",
            ignored,
            "ValueError: Cannot specify num_nodes/gpus with include/exclude",
        )
    if machine_gpus == 0:
        return DeepSpeedDevices(
            None,
            "no GPU on this machine",
            ignored,
            "RuntimeError: Unable to proceed, no GPU resources available",
        )
    if include and exclude:
        return DeepSpeedDevices(
            None,
            "--include with --exclude",
            ignored,
            "ValueError: include_str and exclude_str are mutually exclusive.",
        )
    slots = list(range(machine_gpus))
    spec_text = include or exclude
    if spec_text:
        picked: list[int] = []
        for node in spec_text.split("@"):
            host, _, slot_text = node.partition(":")
            if host != "localhost":
                return DeepSpeedDevices(
                    None,
                    f"host {host!r} in {spec_text!r}",
                    ignored,
                    f"ValueError: Hostname '{host}' not found in hostfile",
                )
            if not slot_text:
                picked += slots
                continue
            for item in slot_text.split(","):
                if not is_int_text(item.strip()):
                    return DeepSpeedDevices(
                        None,
                        f"slot {item!r} in {spec_text!r}",
                        ignored,
                        f"ValueError: invalid literal for int() with base 10: {item!r}",
                    )
                slot = int(item)
                if slot not in slots:
                    return DeepSpeedDevices(
                        None,
                        f"slot {slot} in {spec_text!r}: the machine has {machine_gpus} GPU(s)",
                        ignored,
                        f"ValueError: No slot '{slot}' specified on host 'localhost'",
                    )
                picked.append(slot)
        chosen = sorted(set(picked))
        if exclude:
            chosen = [s for s in slots if s not in chosen]
            how = how or f"--exclude {exclude}"
        else:
            how = how or f"--include {include}"
        if not chosen:
            # launch.py then indexes an empty node list (recorded from DeepSpeed 0.19.8).
            return DeepSpeedDevices(
                None,
                f"--exclude {exclude} leaves no GPU",
                ignored,
                EMPTY_IDS,
            )
        return DeepSpeedDevices(",".join(str(s) for s in chosen), how, ignored)
    if num_gpus is not None and num_gpus > 0:
        # apply_num_nodes_and_gpus: range(num_gpus), not checked against the machine.
        return DeepSpeedDevices(
            ",".join(str(s) for s in range(num_gpus)), f"--num_gpus {num_gpus}", ignored
        )
    return DeepSpeedDevices(",".join(str(s) for s in slots), "every GPU (no flag)", ignored)
