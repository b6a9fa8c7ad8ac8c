"""Exit codes of every gpudiag command (documented in ``docs/cli.md``).

The command line is the only layer that decides them.
"""

from __future__ import annotations

#: Success: no errors (warnings allowed unless ``--strict``).
OK = 0
#: Findings of severity error (or warnings under ``--strict``), or a probe failed.
FAILED = 1
#: Bad input: an unparsable option, a malformed snapshot file.
BAD_INPUT = 2
#: A probe timed out or hung.
TIMEOUT = 3
#: Interrupted by Ctrl-C (128 + SIGINT, as a shell reports it); cleanup has run.
INTERRUPTED = 130
