"""Alembic environment: migrations run online against the URL `app.core.migrate` passes in."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context
from sqlmodel import SQLModel

from app import models  # noqa: F401  (registers every table on SQLModel.metadata)
from app.core.db import make_engine

# Serialises concurrent `sundial migrate` calls (release phase plus `sundial dev`, say).
MIGRATION_LOCK_KEY = 0x53554E4449414C  # "SUNDIAL"

target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    config = context.config
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        # One transaction, locked before Alembic reads the current revision: a transaction
        # lock ends with the transaction, so none outlives it on a pooled server connection
        # (a session lock taken through a transaction-mode pooler could stay held forever).
        # A migration using autocommit_block() (CREATE INDEX CONCURRENTLY) would end this
        # transaction, and the lock with it.
        with context.begin_transaction():
            connection.execute(
                sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY}
            )
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("Sundial migrations run online only: use `sundial migrate`.")
run_migrations_online()
