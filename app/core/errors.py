"""Errors a person can fix, shared by the CLI, the API and the dashboard."""

from __future__ import annotations


class NotAllowed(PermissionError):
    """The person or token acting may not do this (403); the message says who may."""


class UsageError(ValueError):
    """Bad input from a person: the message is one sentence saying what to change.

    The CLI prints it and exits with code 2; the web answers 400 with it.
    """


class Missing(UsageError):
    """Input that names something that does not exist (a job definition, a workflow): the
    API answers 404."""


class Conflict(UsageError):
    """Input that clashes with what is stored (a name already taken): the API answers 409."""
