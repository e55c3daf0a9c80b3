"""Settings read from the environment (12-factor), with defaults as named constants.

Every Sundial process reads the same variables, so a Procfile deployment configures
web, worker, trigger and reaper in one place.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORT = 8000
DEFAULT_DATA_DIR = ".sundial"
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_POLL_SECONDS = 1.0
DEFAULT_WORKER_CONCURRENCY = 10
DEFAULT_SHUTDOWN_GRACE_SECONDS = 25.0  # Heroku sends SIGKILL 30 s after SIGTERM
DEFAULT_REAPER_INTERVAL_SECONDS = 5.0
DEFAULT_TRIGGER_INTERVAL_SECONDS = 1.0
DEFAULT_PRIORITY_AGING_SECONDS = 300.0
DEFAULT_PRIORITY_AGING_MAX_BOOST = 5
DEFAULT_TRIGGER_LEASE_SECONDS = 15.0  # a dead trigger leader is replaced within this
DEFAULT_TRIGGER_BATCH_SIZE = 2000  # due schedules locked and fired per transaction
# Connections firing batches at once in a big tick: while PostgreSQL writes one batch,
# Python plans the next.
DEFAULT_TRIGGER_CONNECTIONS = 2
DEFAULT_TRIGGER_CATCHUP_MAX = 1000  # most missed fires one schedule backfills after downtime
DEFAULT_MAX_RESULT_BYTES = 64 * 1024
# History the reaper keeps, in days (0: forever): runs that ended well or were cancelled or
# skipped; dead letters (failed, timed out), kept longer for the people who triage them;
# the schedules' fire ledger.
DEFAULT_KEEP_RUNS_DAYS = 14.0
DEFAULT_KEEP_FAILED_DAYS = 30.0
DEFAULT_KEEP_FIRES_DAYS = 90.0
DEFAULT_LOG_LEVEL = "INFO"
DEV_SECRET_KEY = "sundial-dev-secret-change-me"
# What sits between Sundial and PostgreSQL: nothing (or a session-mode pooler), or a
# transaction-mode pooler such as PgBouncer, which hands each transaction to any server
# connection (see app/db.py).
POOLER_MODES = ("none", "transaction")


class ConfigError(ValueError):
    """A setting has a value Sundial cannot use; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    database_url: str | None
    database_pooler: str
    direct_database_url: str | None
    port: int
    secret_key: str
    data_dir: Path
    log_level: str
    log_format: str
    lease_seconds: float
    poll_seconds: float
    worker_concurrency: int
    shutdown_grace_seconds: float
    reaper_interval_seconds: float
    trigger_interval_seconds: float
    handler_modules: tuple[str, ...]
    priority_aging_seconds: float
    priority_aging_max_boost: int
    max_result_bytes: int
    trigger_lease_seconds: float
    trigger_batch_size: int
    trigger_catchup_max: int
    trigger_connections: int
    keep_runs_days: float | None  # None: forever
    keep_failed_days: float | None
    keep_fires_days: float | None
    # Where the `http` handler may connect besides public addresses (see app.handlers.webhook).
    http_allow_hosts: tuple[str, ...] = ()
    http_allow_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            database_url=env.get("DATABASE_URL") or None,
            database_pooler=database_pooler(env),
            direct_database_url=env.get("SUNDIAL_DIRECT_DATABASE_URL") or None,
            port=_int(env, "PORT", DEFAULT_PORT, minimum=1),
            secret_key=env.get("SECRET_KEY") or DEV_SECRET_KEY,
            data_dir=Path(env.get("SUNDIAL_DATA_DIR") or DEFAULT_DATA_DIR),
            log_level=(env.get("SUNDIAL_LOG_LEVEL") or DEFAULT_LOG_LEVEL).upper(),
            log_format=_choice(env, "SUNDIAL_LOG_FORMAT", "json", ("json", "text")),
            lease_seconds=_float(env, "SUNDIAL_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            poll_seconds=_float(env, "SUNDIAL_POLL_SECONDS", DEFAULT_POLL_SECONDS),
            worker_concurrency=_int(
                env, "SUNDIAL_WORKER_CONCURRENCY", DEFAULT_WORKER_CONCURRENCY, minimum=1
            ),
            shutdown_grace_seconds=_float(
                env, "SUNDIAL_SHUTDOWN_GRACE_SECONDS", DEFAULT_SHUTDOWN_GRACE_SECONDS
            ),
            reaper_interval_seconds=_float(
                env, "SUNDIAL_REAPER_INTERVAL_SECONDS", DEFAULT_REAPER_INTERVAL_SECONDS
            ),
            trigger_interval_seconds=_float(
                env, "SUNDIAL_TRIGGER_INTERVAL_SECONDS", DEFAULT_TRIGGER_INTERVAL_SECONDS
            ),
            handler_modules=tuple(
                m.strip() for m in (env.get("SUNDIAL_HANDLERS") or "").split(",") if m.strip()
            ),
            priority_aging_seconds=_float(
                env, "SUNDIAL_PRIORITY_AGING_SECONDS", DEFAULT_PRIORITY_AGING_SECONDS
            ),
            priority_aging_max_boost=_int(
                env, "SUNDIAL_PRIORITY_AGING_MAX_BOOST", DEFAULT_PRIORITY_AGING_MAX_BOOST
            ),
            max_result_bytes=_int(
                env, "SUNDIAL_MAX_RESULT_BYTES", DEFAULT_MAX_RESULT_BYTES, minimum=1
            ),
            trigger_lease_seconds=_float(
                env, "SUNDIAL_TRIGGER_LEASE_SECONDS", DEFAULT_TRIGGER_LEASE_SECONDS
            ),
            trigger_batch_size=_int(
                env, "SUNDIAL_TRIGGER_BATCH_SIZE", DEFAULT_TRIGGER_BATCH_SIZE, minimum=1
            ),
            trigger_catchup_max=_int(
                env, "SUNDIAL_TRIGGER_CATCHUP_MAX", DEFAULT_TRIGGER_CATCHUP_MAX, minimum=1
            ),
            trigger_connections=_int(
                env, "SUNDIAL_TRIGGER_CONNECTIONS", DEFAULT_TRIGGER_CONNECTIONS, minimum=1
            ),
            keep_runs_days=_days(env, "SUNDIAL_KEEP_RUNS_DAYS", DEFAULT_KEEP_RUNS_DAYS),
            keep_failed_days=_days(env, "SUNDIAL_KEEP_FAILED_DAYS", DEFAULT_KEEP_FAILED_DAYS),
            keep_fires_days=_days(env, "SUNDIAL_KEEP_FIRES_DAYS", DEFAULT_KEEP_FIRES_DAYS),
            http_allow_hosts=tuple(h.lower() for h in _list(env, "SUNDIAL_HTTP_ALLOW_HOSTS")),
            http_allow_networks=_networks(env, "SUNDIAL_HTTP_ALLOW_NETWORKS"),
        )


def _list(env: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [item.strip() for item in (env.get(name) or "").split(",") if item.strip()]


def _networks(env: Mapping[str, str], name: str) -> tuple[IPNetwork, ...]:
    """Comma-separated networks in CIDR form (`10.0.0.0/8`, `fd00::/8`, `127.0.0.1`)."""
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in _list(env, name))
    except ValueError as exc:
        raise ConfigError(f"{name} must list networks like 10.0.0.0/8 or fd00::/8: {exc}") from None


def database_pooler(environ: Mapping[str, str] | None = None) -> str:
    """SUNDIAL_DATABASE_POOLER: read on its own by every connection Sundial opens."""
    env = os.environ if environ is None else environ
    return _choice(env, "SUNDIAL_DATABASE_POOLER", "none", POOLER_MODES)


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be greater than 0, got {value}")
    return value


def _days(env: Mapping[str, str], name: str, default: float) -> float | None:
    """A retention in days; 0 keeps forever (None)."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{name} must be a number of days (0: keep forever), got {raw!r}"
        ) from None
    if value < 0:
        raise ConfigError(f"{name} must be 0 (keep forever) or more days, got {value}")
    return value or None


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = (env.get(name) or default).strip().lower()
    if raw not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {raw!r}")
    return raw
