from pathlib import Path

import pytest

from app.core.config import DEFAULT_PORT, ConfigError, Settings
from app.core.db import DatabaseUrlError, describe, normalize_url, redact, sqlalchemy_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@db.example:5432/app", "postgresql://u:p@db.example:5432/app"),
        ("postgresql://u:p@db.example/app", "postgresql://u:p@db.example/app"),
        ("postgresql+psycopg://u@h/app?sslmode=require", "postgresql://u@h/app?sslmode=require"),
        ("  postgres://u@h/app\n", "postgresql://u@h/app"),
        ("POSTGRES://u@h/app", "postgresql://u@h/app"),
    ],
)
def test_normalize_url_accepts_every_postgres_spelling(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


@pytest.mark.parametrize("bad", ["mysql://u@h/db", "sqlite:///x.db", "not a url", "", "h:5432/db"])
def test_normalize_url_rejects_other_urls_with_a_clear_message(bad: str) -> None:
    with pytest.raises(DatabaseUrlError, match="DATABASE_URL"):
        normalize_url(bad)


def test_sqlalchemy_url_uses_psycopg3_driver() -> None:
    assert sqlalchemy_url("postgres://u@h/app") == "postgresql+psycopg://u@h/app"


def test_redact_hides_password_only() -> None:
    assert redact("postgresql://alice:s3cret@h:5432/app") == "postgresql://alice:***@h:5432/app"
    assert redact("postgresql://alice@h/app") == "postgresql://alice@h/app"


def test_describe_names_database_and_host() -> None:
    assert describe("postgresql://u@db:6543/app") == "database 'app' on db:6543"
    assert describe("postgresql://u@/app?host=/tmp/sock") == "database 'app' on /tmp/sock"


def test_settings_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.database_url is None
    assert settings.port == DEFAULT_PORT
    assert settings.data_dir == Path.home() / ".local" / "share" / "sundial"
    assert settings.handler_modules == ()
    assert (settings.http_allow_hosts, settings.http_allow_networks) == ((), ())
    assert (settings.retention_days, settings.keep_fires_days) == (30, 90)
    assert (settings.hot_minutes, settings.dead_letter_days, settings.idempotency_hours) == (
        60,
        7,
        24,
    )
    assert settings.archive_dir is None


def test_a_retention_of_zero_days_keeps_forever() -> None:
    settings = Settings.from_env({"SUNDIAL_RETENTION_DAYS": "0", "SUNDIAL_KEEP_FIRES_DAYS": "0.5"})
    assert (settings.retention_days, settings.keep_fires_days) == (None, 0.5)


@pytest.mark.parametrize(
    ("env", "days"),
    [
        ({"SUNDIAL_KEEP_RUNS_DAYS": "14", "SUNDIAL_KEEP_FAILED_DAYS": "45"}, 45),
        ({"SUNDIAL_KEEP_RUNS_DAYS": "10"}, 10),
        ({"SUNDIAL_KEEP_FAILED_DAYS": "0"}, None),
        ({"SUNDIAL_RETENTION_DAYS": "3", "SUNDIAL_KEEP_RUNS_DAYS": "90"}, 3),
    ],
)
def test_the_old_retention_settings_still_set_how_long_history_is_kept(
    env: dict[str, str], days: float | None
) -> None:
    assert Settings.from_env(env).retention_days == days


def test_history_settings_are_read_and_bounded(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "SUNDIAL_HOT_MINUTES": "90",
            "SUNDIAL_DEAD_LETTER_DAYS": "0",
            "SUNDIAL_IDEMPOTENCY_HOURS": "2",
            "SUNDIAL_ARCHIVE_DIR": str(tmp_path),
        }
    )
    assert (settings.hot_minutes, settings.dead_letter_days) == (90, None)
    assert (settings.idempotency_hours, settings.archive_dir) == (2, tmp_path)
    with pytest.raises(ConfigError, match="SUNDIAL_HOT_MINUTES must be between 60 and"):
        Settings.from_env({"SUNDIAL_HOT_MINUTES": "30"})
    with pytest.raises(ConfigError, match="SUNDIAL_IDEMPOTENCY_HOURS must be a number"):
        Settings.from_env({"SUNDIAL_IDEMPOTENCY_HOURS": "a day"})


def test_settings_read_environment() -> None:
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgres://x/y",
            "PORT": "5005",
            "SECRET_KEY": "k",
            "SUNDIAL_DATA_DIR": "/var/sundial",
            "SUNDIAL_HANDLERS": "myapp.jobs, other.jobs",
            "SUNDIAL_LEASE_SECONDS": "12.5",
            "SUNDIAL_HTTP_ALLOW_HOSTS": "Hooks.internal, localhost",
            "SUNDIAL_HTTP_ALLOW_NETWORKS": "10.0.0.0/8, fd00::/8,127.0.0.1",
        }
    )
    assert settings.database_url == "postgres://x/y"
    assert settings.port == 5005
    assert settings.secret_key == "k"
    assert settings.data_dir == Path("/var/sundial")
    assert settings.handler_modules == ("myapp.jobs", "other.jobs")
    assert settings.lease_seconds == 12.5
    assert settings.http_allow_hosts == ("hooks.internal", "localhost")
    assert [str(n) for n in settings.http_allow_networks] == [
        "10.0.0.0/8",
        "fd00::/8",
        "127.0.0.1/32",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "eighty"}, "PORT must be a whole number"),
        ({"PORT": "0"}, "PORT must be between 1 and 65535, got 0"),
        ({"PORT": "99999"}, "PORT must be between 1 and 65535, got 99999"),
        ({"SUNDIAL_LEASE_SECONDS": "-1"}, "SUNDIAL_LEASE_SECONDS must be between 0.01 and 86400"),
        ({"SUNDIAL_LEASE_SECONDS": "nan"}, "SUNDIAL_LEASE_SECONDS must be between .*, got nan"),
        ({"SUNDIAL_LEASE_SECONDS": "inf"}, "SUNDIAL_LEASE_SECONDS must be between .*, got inf"),
        (
            {"SUNDIAL_TRIGGER_INTERVAL_SECONDS": "1e300"},
            "TRIGGER_INTERVAL_SECONDS must be between 0.01 and 86400 seconds, got 1e\\+300",
        ),
        ({"SUNDIAL_POLL_SECONDS": "-inf"}, "SUNDIAL_POLL_SECONDS must be between"),
        ({"SUNDIAL_WORKER_CONCURRENCY": "0"}, "SUNDIAL_WORKER_CONCURRENCY must be between 1"),
        ({"SUNDIAL_WORKER_CONCURRENCY": "100000"}, "SUNDIAL_WORKER_CONCURRENCY must be between"),
        ({"SUNDIAL_PRIORITY_AGING_MAX_BOOST": "-1"}, "MAX_BOOST must be between 0 and 1000"),
        ({"SUNDIAL_MAX_RESULT_BYTES": "1e9"}, "SUNDIAL_MAX_RESULT_BYTES must be a whole number"),
        ({"SUNDIAL_MAX_RESULT_BYTES": "999999999999"}, "MAX_RESULT_BYTES must be between"),
        ({"SUNDIAL_TRIGGER_BATCH_SIZE": "10000000"}, "TRIGGER_BATCH_SIZE must be between"),
        ({"SUNDIAL_TRIGGER_CONNECTIONS": "1000"}, "TRIGGER_CONNECTIONS must be between 1 and 32"),
        ({"SUNDIAL_LOG_LEVEL": "verbose"}, "SUNDIAL_LOG_LEVEL must be one of DEBUG, INFO"),
        ({"SUNDIAL_HTTP_ALLOW_NETWORKS": "10.0.0.0/33"}, "must list networks like 10.0.0.0/8"),
        ({"SUNDIAL_LOG_FORMAT": "xml"}, "SUNDIAL_LOG_FORMAT must be one of"),
        ({"SUNDIAL_KEEP_RUNS_DAYS": "-3"}, "must be 0 \\(keep forever\\) or a number of days"),
        ({"SUNDIAL_KEEP_RUNS_DAYS": "1e10"}, "KEEP_RUNS_DAYS must be .* up to 36500, got 1e\\+10"),
        ({"SUNDIAL_KEEP_FIRES_DAYS": "nan"}, "KEEP_FIRES_DAYS must be .* up to 36500, got nan"),
        ({"SUNDIAL_KEEP_FAILED_DAYS": "a month"}, "must be a number of days"),
    ],
)
def test_settings_reject_bad_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_every_log_level_named_in_the_readme_is_accepted_in_any_case() -> None:
    for level in ("debug", "INFO", "Warning", "error"):
        assert Settings.from_env({"SUNDIAL_LOG_LEVEL": level}).log_level == level.upper()


def test_the_embedded_database_lives_in_one_folder_per_user() -> None:
    assert Settings.from_env({"HOME": "/home/ann"}).data_dir == Path(
        "/home/ann/.local/share/sundial"
    )
    xdg = {"HOME": "/home/ann", "XDG_DATA_HOME": "/data/ann"}
    assert Settings.from_env(xdg).data_dir == Path("/data/ann/sundial")
    relative_xdg = {"HOME": "/home/ann", "XDG_DATA_HOME": "data"}  # ignored, as XDG says
    assert Settings.from_env(relative_xdg).data_dir == Path("/home/ann/.local/share/sundial")
    chosen = {"HOME": "/home/ann", "XDG_DATA_HOME": "/data/ann", "SUNDIAL_DATA_DIR": "/srv/s"}
    assert Settings.from_env(chosen).data_dir == Path("/srv/s")
