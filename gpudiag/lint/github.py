"""``gpudiag lint --output-format github``: one GitHub Actions workflow command per finding.

``::error file=PATH,line=L,col=C,title=CODE::message`` (``::warning``, and ``::notice``
for info), which the Actions runner turns into an annotation on that line of the pull
request. The runner decodes ``%25``, ``%0D`` and ``%0A`` in the message, and also
``%3A`` and ``%2C`` in a property, so a ``%``, a line break, or a ``:``/``,`` in a
path cannot end the command early or forge another one (GitHub docs, "Workflow
commands for GitHub Actions"; actions/toolkit ``packages/core/src/command.ts``,
``escapeData`` and ``escapeProperty``).
"""

from __future__ import annotations

from gpudiag.lint import shown
from gpudiag.lint.codes import LintFinding
from gpudiag.lint.report import LintReport, escape, shown_text

#: lint's severities as workflow commands: GitHub has no "info" level.
LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """A command's message: ``%``, CR and LF percent-encoded (actions/toolkit's
    ``escapeData``); any other control character written as the text report writes it,
    so the job log cannot be driven like a terminal."""
    encoded = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return escape(encoded)


def escape_property(text: str) -> str:
    """A property value: as :func:`escape_data`, and ``:``/``,`` too (``escapeProperty``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: LintFinding) -> str:
    """One finding as one workflow command line."""
    level = LEVELS.get(f.finding.severity, "warning")
    props = ",".join(
        (
            f"file={escape_property(shown_text(f.path))}",
            f"line={f.line}",
            f"col={f.col}",
            f"title={escape_property(f.finding.code)}",
        )
    )
    return f"::{level} {props}::{escape_data(shown.message(f.finding.message))}"


def render_github(report: LintReport) -> str:
    """Every finding in file order, one line each; nothing else (stdout is the runner's)."""
    return "\n".join(annotation(f) for f in report.findings)
