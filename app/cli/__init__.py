"""The `sundial` command: one entry point for every Procfile process and admin task.

One module per command group; `main` builds the parser from their `add_*_commands`:

- `main`: the parser, exit codes and the one-sentence errors
- `services`: web, worker, trigger, reaper, dev (with `dev_manager`, how dev stops them)
- `db`: migrate, db url / db stop
- `runs`: submit, show, cancel, retry, dag
- `schedules`, `jobs`, `workflows`: schedules, job definitions, workflows
- `users`: createuser; `handlers`: shell-handler
- `inputs`: what several commands read (JSON args and files, times, job settings)
- `text`: what people and handlers wrote, printed with control characters escaped
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `sundial` console script (`app.cli:main`)."""
    # Imported here: app.core.logs imports app.core.text, and the parser imports app.core.logs,
    # so importing it at the top of the package would be a cycle.
    from app.cli.main import main as run

    return run(argv)
