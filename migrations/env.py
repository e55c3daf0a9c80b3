"""Alembic environment: migrations run online against the URL `app.migrate` passes in."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context
from sqlmodel import SQLModel

from app import models  # noqa: F401  (registers every table on SQLModel.metadata)

# Serialises concurrent `sundial migrate` calls (release phase plus `sundial dev`, say).
MIGRATION_LOCK_KEY = 0x53554E4449414C  # "SUNDIAL"

target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    config = context.config
    engine = sa.create_engine(
        config.get_main_option("sqlalchemy.url") or "", poolclass=sa.pool.NullPool
    )
    with engine.connect() as connection:
        connection.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
        connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                compare_type=True,
                transaction_per_migration=True,
            )
            with context.begin_transaction():
                context.run_migrations()
        finally:
            connection.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
            connection.commit()


if context.is_offline_mode():
    raise SystemExit("Sundial migrations run online only: use `sundial migrate`.")
run_migrations_online()
