"""``gpudiag fleet --probe`` (issue 19), the pure parts: the framed lines the node tasks
answer on, the ring's rounds, the plan's deadlines, reading a node's report, and the
FLEET-PROBE- findings, table-driven over synthetic reports. The live runs are in
tests/test_fleet_probe_live.py."""

from __future__ import annotations

import base64
import json
import random
import zlib
from collections.abc import Mapping

import pytest

from gpudiag.core.fleet import FleetNode
from gpudiag.core.fleet_frames import CHUNK, MAX_PAYLOAD_BYTES, PREFIX, decode, encode
from gpudiag.core.fleet_probe import (
    NodeProbe,
    PairRun,
    Reach,
    make_plan,
    merge_pairs,
    pairs_of,
    read_report,
    ring_rounds,
)
from gpudiag.core.fleet_probe_rules import probe_findings
from gpudiag.model import Snapshot

# ---- frames ------------------------------------------------------------------------


def test_frames_survive_labels_interleaving_and_noise() -> None:
    noise = random.Random(19).randbytes(3000).hex()  # incompressible: many lines
    big = json.dumps({"gpus": [noise], "schema": "gpudiag-snapshot/1.4"})
    a, b = encode(0, "snapshot", big), encode(1, "snapshot", "{}")
    assert len(a) > 3 and all(len(line) <= len(PREFIX) + 40 + CHUNK for line in a)
    # srun --label prefixes, Open MPI-style tags, another task's lines between, and noise.
    lines = [f"0: {a[0]}", "warning: something", f"[1,1]<stdout>: {b[0]}"]
    lines += [f"  0: {x}" for x in reversed(a[1:])]
    frames = decode(lines, max_task=1)
    assert frames.texts == {(0, "snapshot"): big, (1, "snapshot"): "{}"}
    assert frames.problems == {} and frames.tasks() == {0, 1}


def test_frames_refuse_damaged_missing_and_foreign_lines() -> None:
    lines = encode(0, "snapshot", random.Random(7).randbytes(2000).hex())
    damaged = lines[1][:-3] + ("AAA" if not lines[1].endswith("AAA") else "BBB")
    frames = decode([lines[0], damaged, *lines[2:]], max_task=0)
    assert frames.texts == {} and frames.problems[(0, "snapshot")].endswith("1 damaged")
    frames = decode(lines[:-1], max_task=0)
    assert frames.problems[(0, "snapshot")] == f"{len(lines) - 1} of {len(lines)} lines"
    # A task beyond the launch, or an unknown kind, is no node's.
    assert decode(encode(7, "snapshot", "{}"), max_task=3).texts == {}
    assert decode([lines[0].replace(" snapshot ", " other ")], max_task=0).texts == {}


def test_frames_bound_what_they_inflate() -> None:
    bomb = base64.b64encode(zlib.compress(b"\0" * (MAX_PAYLOAD_BYTES + 10), 9)).decode()
    chunks = [bomb[i : i + CHUNK] for i in range(0, len(bomb), CHUNK)]
    lines = [f"{PREFIX} 0 probe {i} {len(chunks)} {zlib.crc32(c.encode()):08x} {c}"
             for i, c in enumerate(chunks)]  # fmt: skip
    frames = decode(lines, max_task=0)
    assert frames.texts == {} and "larger than" in frames.problems[(0, "probe")]


# ---- the plan ----------------------------------------------------------------------


@pytest.mark.parametrize("nodes", range(1, 10))
def test_ring_rounds_cover_each_neighbour_pair_once(nodes: int) -> None:
    rounds = ring_rounds(nodes)
    pairs = [p for r in rounds for p in r]
    ring = set() if nodes < 2 else {tuple(sorted((i, (i + 1) % nodes))) for i in range(nodes)}
    assert sorted(pairs) == sorted(ring) and len(pairs) == len(set(pairs))
    for pairs_in_round in rounds:
        members = [n for p in pairs_in_round for n in p]
        assert len(members) == len(set(members))  # nobody in two pairs at once
    assert len(rounds) == (0 if nodes < 2 else 1 if nodes == 2 else 2 + nodes % 2)
    for node in range(nodes):
        assert len(pairs_of(nodes, node)) == (0 if nodes < 2 else 1 if nodes == 2 else 2)


@pytest.mark.parametrize(("nodes", "timeout"), [(2, 20), (3, 120), (1000, 3600)])
def test_the_plan_ends_before_the_timeout(nodes: int, timeout: float) -> None:
    plan = make_plan("n1", 29500, "run", nodes, timeout, now=1000.0)
    assert 1000 < plan.reach_end < plan.round_end(0) <= plan.end <= 1000 + timeout - 8
    assert plan.round_end(0) - plan.reach_end == pytest.approx(2 * plan.slot_s)
    assert "--reach-end" in plan.argv() and "run" in plan.argv()


def test_read_report_takes_only_well_formed_facts() -> None:
    good = {"node": 1, "backend": "gloo", "error": None,
            "reach": {"role": "dial", "ok": True, "ms": 0.3, "error": None},
            "pairs": [{"peer": 0, "round": 0, "ok": True, "seconds": 0.01, "error": None},
                      {"peer": 9, "round": 0, "ok": True}, {"peer": 1, "round": 0, "ok": True},
                      {"peer": 2, "round": "0", "ok": True}, "junk"]}  # fmt: skip
    report = read_report(good, nodes=3)
    assert report == NodeProbe(1, "gloo", None, Reach("dial", True, 0.3, None),
                               (PairRun(0, 0, True, 0.01, None),))  # fmt: skip
    for bad in (None, [], {"node": "1"}, {"node": 5}, {"node": True}):
        assert read_report(bad, nodes=3) is None
    odd = read_report({"node": 0, "reach": {"role": "listen", "ok": 1, "ms": float("nan"),
                                            "heard": [1, 2, 7, "x"]}}, nodes=3)  # fmt: skip
    assert odd is not None and odd.reach == Reach("listen", False, None, None, (1, 2))


# ---- the findings ------------------------------------------------------------------

LISTEN = Reach("listen", True)
DIAL = Reach("dial", True, 0.2)


def _nodes(count: int, silent: tuple[int, ...] = ()) -> list[FleetNode]:
    return [FleetNode(f"n{i}", None if i in silent else Snapshot(), label=f"n{i}")
            for i in range(count)]  # fmt: skip


def _reports(
    count: int, *, seconds: Mapping[tuple[int, int], float | None] | None = None,
    reach: Mapping[int, Reach] | None = None, error: Mapping[int, str] | None = None,
    absent: tuple[int, ...] = (),
) -> dict[int, NodeProbe]:  # fmt: skip
    """Every node's report; a pair's time None: it failed (on both sides)."""
    seconds = seconds or {}
    out = {}
    for node in range(count):
        if node in absent:
            continue
        pairs = []
        for round_, a, b in pairs_of(count, node):
            t = seconds.get((a, b), 0.01)
            peer = b if node == a else a
            pairs.append(PairRun(peer, round_, t is not None, t, None if t else "timed out"))
        default = LISTEN if node == 0 else DIAL
        out[node] = NodeProbe(node, "gloo", (error or {}).get(node),
                              (reach or {}).get(node, default), tuple(pairs))  # fmt: skip
    return out


REFUSED = Reach("dial", False, None, "cannot reach n0:29500 in 32 s: connection refused")
# (id, nodes, reports, reasons for missing reports, expected (code, subject) pairs)
FINDINGS = [
    ("all-well", _nodes(4), _reports(4), {}, []),
    ("one-node", _nodes(1), _reports(1), {}, []),
    ("no-listener", _nodes(3),
     _reports(3, reach={0: Reach("listen", False, None, "n0 (10.0.0.9) is not an address of "
                                 "this node"), 1: REFUSED, 2: REFUSED},
              seconds={(0, 1): None, (1, 2): None, (0, 2): None}), {},
     [("FLEET-PROBE-NO-LISTENER", "n0")]),
    ("unreachable-node", _nodes(3),
     _reports(3, reach={2: REFUSED}, seconds={(1, 2): None, (0, 2): None}), {},
     [("FLEET-PROBE-UNREACHABLE", "n2")]),
    ("listener-silent", _nodes(3, silent=(0,)),
     _reports(3, reach={1: REFUSED, 2: REFUSED}, absent=(0,)), {0: "no probe report"},
     [("FLEET-PROBE-UNREACHABLE", "n1,n2")]),
    ("hung-node", _nodes(4), _reports(4, absent=(2,), seconds={(1, 2): None, (2, 3): None}),
     {2: "no probe report within 90 s"}, [("FLEET-PROBE-FAILED", "n2")]),
    ("silent-node-not-blamed-twice", _nodes(4, silent=(2,)),
     _reports(4, absent=(2,), seconds={(1, 2): None, (2, 3): None}), {2: "no report"}, []),
    ("torch-broken-on-a-node", _nodes(3),
     _reports(3, error={1: "ModuleNotFoundError: No module named 'torch'"},
              seconds={(0, 1): None, (1, 2): None}), {}, [("FLEET-PROBE-FAILED", "n1")]),
    ("bad-node-in-a-ring", _nodes(5), _reports(5, seconds={(2, 3): None, (3, 4): None}), {},
     [("FLEET-PROBE-FAILED", "n3")]),
    ("two-nodes-pair-failed", _nodes(2), _reports(2, seconds={(0, 1): None}), {},
     [("FLEET-PROBE-FAILED", "n0-n1")]),
    ("slow-node", _nodes(3), _reports(3, seconds={(0, 1): 1.0, (1, 2): 1.1, (0, 2): 0.004}), {},
     [("FLEET-PROBE-SLOW", "n1")]),
    ("slow-but-within-noise", _nodes(3),
     _reports(3, seconds={(0, 1): 0.012, (1, 2): 0.011, (0, 2): 0.001}), {}, []),
    ("two-nodes-cannot-say-who-is-slow", _nodes(2), _reports(2, seconds={(0, 1): 5.0}), {}, []),
]  # fmt: skip


@pytest.mark.parametrize(("nodes", "reports", "missing", "expected"),
                         [c[1:] for c in FINDINGS], ids=[c[0] for c in FINDINGS])  # fmt: skip
def test_probe_findings(
    nodes: list[FleetNode], reports: dict[int, NodeProbe], missing: dict[int, str],
    expected: list[tuple[str, str]],
) -> None:  # fmt: skip
    plan = make_plan("n0", 29500, "run", len(nodes), 90, now=0.0)
    got = probe_findings(nodes, plan, reports, missing)
    assert [(f.code, f.subject) for f in got] == expected, [f.message for f in got]


def test_a_report_the_launcher_cut_off_blames_no_node() -> None:
    # srun ends the step when one node's task fails to start: the other node's report is
    # cut off by the launcher, which FLEET-NODE-NO-ANSWER explains.
    plan = make_plan("n0", 29500, "run", 2, 90, now=0.0)
    nodes, missing = _nodes(2, silent=(1,)), {0: "no probe report (the launcher exited 140)"}
    assert probe_findings(nodes, plan, {}, missing, cut_short=True) == []
    got = probe_findings(nodes, plan, {}, missing, cut_short=False)
    assert [(f.code, f.subject) for f in got] == [("FLEET-PROBE-FAILED", "n0")]


def test_probe_messages_name_the_node_and_why() -> None:
    plan = make_plan("n0", 29500, "run", 3, 90, now=0.0)
    (unreachable,) = probe_findings(
        _nodes(3), plan, _reports(3, reach={2: REFUSED}, seconds={(1, 2): None, (0, 2): None}), {}
    )
    assert (
        "1 of 3 nodes cannot open a TCP connection to MASTER_ADDR=n0:29500" in unreachable.message
    )
    assert "n2: cannot reach n0:29500 in 32 s: connection refused" in unreachable.message
    (hung,) = probe_findings(_nodes(4), plan, _reports(4, absent=(2,)), {2: "no report within 9 s"})
    assert "n2: no report within 9 s" in hung.message
    (slow,) = probe_findings(_nodes(3), plan,
                             _reports(3, seconds={(0, 1): 1.0, (1, 2): 1.1, (0, 2): 0.004}), {})  # fmt: skip
    assert "n1 takes 1000 ms at best, against 4.0 ms for the pairs without it" in slow.message


def test_merge_pairs_takes_the_slower_side_and_the_first_error() -> None:
    reports = _reports(2, seconds={(0, 1): 0.02})
    one = reports[1]
    reports[1] = NodeProbe(1, "gloo", None, DIAL, (PairRun(0, 0, True, 0.05, None),))
    assert merge_pairs(2, reports)[0].seconds == 0.05
    reports[1] = NodeProbe(1, "gloo", None, DIAL, (PairRun(0, 0, False, None, "init: boom"),))
    outcome = merge_pairs(2, reports)[0]
    assert not outcome.ok and outcome.error == "init: boom" and outcome.seconds is None
    del reports[1]
    assert merge_pairs(2, reports)[0].error == "node #1 sent no probe report"
    assert one.pairs[0].ok
