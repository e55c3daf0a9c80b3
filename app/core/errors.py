"""Errors a person can fix, shared by the CLI, the API and the dashboard.

A `UsageError` is one sentence saying what to change, and, where one input is at fault, the
name of that input (`field`): the API returns it as `field`, a page shows the message next
to that field, the CLI prints the sentence. Domain code names the field where it raises, or
wraps a group of checks in `about(field)`; nothing downstream guesses it from the wording.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class NotAllowed(PermissionError):
    """The person or token acting may not do this (403); the message says who may."""


class UsageError(ValueError):
    """Bad input from a person: the message is one sentence saying what to change, `field`
    the input it concerns (None: the request as a whole).

    The CLI prints it and exits with code 2; the web answers 400 or 422 with it.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Missing(UsageError):
    """Input that names something that does not exist (a job definition, a workflow): the
    API answers 404."""


class Conflict(UsageError):
    """Input that clashes with what is stored (a name already taken): the API answers 409."""


@contextmanager
def about(field: str) -> Iterator[None]:
    """Name `field` on a UsageError raised inside that names no field yet."""
    try:
        yield
    except UsageError as exc:
        if exc.field is None:
            exc.field = field
        raise
