"""``gpudiag probe`` progress on stderr, from the events the runner reads.

On a terminal: one status line, rewritten in place. Otherwise (a log, a pipe):
one line per stage and probe: workers starting, ready, started, rendezvous,
training, verdict. stdout stays clean for ``--json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from gpudiag.render.text import esc

_RENDEZVOUS = ("connect store", "init_process_group")
_TRAINING = ("train", "DistributedDataParallel")


def _phase(stage: str) -> str | None:
    """The stage a log line names: ``rendezvous`` or ``training`` (None: neither)."""
    if stage.startswith(_RENDEZVOUS):
        return "rendezvous"
    if stage.startswith(_TRAINING):
        return "training"
    return None


class Progress:
    """Prints probe progress; call :meth:`begin`, then :meth:`event` per event, then :meth:`end`.

    Args:
        stream: where to write (stderr).
        live: rewrite one line in place (a terminal) instead of one line per stage.
        width: the terminal's width, for the live line.
        clock: seconds, monotonic (tests replace it).
    """

    def __init__(
        self,
        stream: IO[str],
        *,
        live: bool,
        width: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.live = live
        self.width = width
        self.clock = clock
        self.started = clock()
        self.seen: set[tuple[str, str]] = set()
        self.ready: set[int] = set()
        self.workers = 0
        self.shown = False

    def _elapsed(self) -> str:
        return f"{self.clock() - self.started:5.1f}s"

    def _say(self, text: str) -> None:
        line = f"gpudiag probe [{self._elapsed()}] {text}"
        try:
            if self.live:
                self.stream.write("\r\x1b[K" + line[: max(10, self.width - 1)])
                self.shown = True
            else:  # a log: whole lines, wrapped to the width (issue 20: 80 columns)
                from gpudiag.render.text import wrap

                self.stream.write("\n".join(wrap(line, self.width)) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: progress is not worth failing for
            pass

    def begin(self, probes: Sequence[str], device: str, workers: int) -> None:
        """Before any child starts: say what runs (this is the first line, at once)."""
        self.workers = workers
        self._say(
            f"starting {', '.join(probes)} on {device}: {workers} worker(s), importing torch…"
        )

    def event(self, rank: int, event: dict[str, Any]) -> None:
        """One event from a worker (:func:`gpudiag.probes.runner.run_probes`'s ``on_event``)."""
        kind = event.get("ev")
        probe = esc(event.get("probe", ""), 20)
        if kind == "ready":
            self.ready.add(rank)
            if self.live or len(self.ready) in (1, self.workers):
                self._say(f"ready: {len(self.ready)}/{self.workers} worker(s) imported torch")
        elif kind == "start" and self._once(probe, "started"):
            self._say(f"{probe}: started")
        elif kind == "stage":
            stage = esc(event.get("stage", ""), 60)
            phase = _phase(stage)
            if self.live:
                self._say(f"{probe}: rank {rank} {stage}")
            elif phase is not None and self._once(probe, phase):
                self._say(f"{probe}: {phase} ({stage})")
        elif kind == "result":
            result = event.get("result") or {}
            status = esc(result.get("status", "?"), 10)
            if self._once(probe, "verdict"):
                self._say(f"{probe}: {status}")

    def _once(self, probe: str, phase: str) -> bool:
        key = (probe, phase)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def end(self) -> None:
        """Clear the live line, so the report starts on a clean line."""
        if self.live and self.shown:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
