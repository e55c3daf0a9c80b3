"""What people and their API tokens may do: dashboard roles and token scopes."""

from __future__ import annotations

from enum import StrEnum


class TokenScope(StrEnum):
    """What an API token may do, within its user's role."""

    READ = "read"
    """GET requests only."""
    WRITE = "write"
    """Also submits, cancels, retries and changes what its user's role allows."""


class Role(StrEnum):
    """What a person may do in the dashboard; each role may do everything the ones before
    it may (see `Role.rank`)."""

    VIEWER = "viewer"
    """Reads every page; changes nothing."""
    OPERATOR = "operator"
    """Also runs now, pauses, resumes, retries and cancels."""
    EDITOR = "editor"
    """Also creates, changes and deletes jobs, schedules and workflows."""
    ADMIN = "admin"
    """Also manages users and dangerous handlers such as `shell`."""

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank
