"""Connection options behind a transaction-mode pooler, and where workers LISTEN."""

import pytest

from app.core.config import ConfigError, Settings
from app.core.db import connection_options, listen_url

URL = "postgresql://u@pooler:6432/app"


def test_direct_connections_keep_prepared_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUNDIAL_DATABASE_POOLER", raising=False)
    assert "prepare_threshold" not in connection_options()


def test_a_transaction_pooler_turns_prepared_statements_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUNDIAL_DATABASE_POOLER", "transaction")
    assert connection_options()["prepare_threshold"] is None


def test_listen_url_without_a_pooler_is_the_database_url() -> None:
    assert listen_url(Settings.from_env({}), URL) == URL


def test_behind_a_transaction_pooler_workers_listen_on_the_direct_url_or_poll() -> None:
    pooled = Settings.from_env({"SUNDIAL_DATABASE_POOLER": "transaction"})
    assert listen_url(pooled, URL) is None
    direct = Settings.from_env(
        {
            "SUNDIAL_DATABASE_POOLER": "transaction",
            "SUNDIAL_DIRECT_DATABASE_URL": "postgres://u@db:5432/app",
        }
    )
    assert listen_url(direct, URL) == "postgresql://u@db:5432/app"


def test_an_unknown_pooler_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="SUNDIAL_DATABASE_POOLER must be one of none, transa"):
        Settings.from_env({"SUNDIAL_DATABASE_POOLER": "statement"})
