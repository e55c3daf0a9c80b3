"""Apply and inspect the Alembic migrations in `migrations/`."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError

from app.core.db import make_engine, sqlalchemy_url
from app.core.errors import UsageError
from app.core.resources import MIGRATIONS_DIR


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser treats % as interpolation; passwords may contain it.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database to `revision`; a no-op when it is already there."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take the database back to `revision` (a rollback; each migration says what its own
    downgrade keeps)."""
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("postgresql://x/y")).get_current_head()


def is_before(revision: str, current: str | None) -> bool:
    """Whether `revision` is an ancestor of `current` (a revision one can go back to)."""
    if current is None:
        return False
    script = ScriptDirectory.from_config(alembic_config("postgresql://x/y"))
    try:
        return any(r.revision == revision for r in script.iterate_revisions(current, "base"))
    except RevisionError:  # a database newer than these migrations
        return False


class SchemaOutdated(UsageError):
    """The database schema is not the one this version of Sundial needs."""


def ensure_current(url: str) -> None:
    """Refuse to run a service against a database that `sundial migrate` has not brought up
    to date: its queries would fail later, one at a time, far from the cause."""
    current, head = current_revision(url), head_revision()
    if current == head:
        return
    if current is None:
        raise SchemaOutdated(
            f"the database has no Sundial tables yet (this version needs revision {head}): "
            "run `sundial migrate` first"
        )
    if not _known(current):
        raise SchemaOutdated(
            f"the database schema is at revision {current}, which this version of Sundial "
            "does not know (a newer version migrated it): upgrade Sundial"
        )
    raise SchemaOutdated(
        f"the database schema is at revision {current} but this version of Sundial needs "
        f"{head}: run `sundial migrate` first"
    )


def _known(revision: str) -> bool:
    scripts = ScriptDirectory.from_config(alembic_config("postgresql://x/y"))
    return any(r.revision == revision for r in scripts.walk_revisions())
