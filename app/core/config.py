"""Settings read from the environment (12-factor), with defaults as named constants.

Every Sundial process reads the same variables, so a Procfile deployment configures
web, worker, trigger and reaper in one place.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORT = 8000
MAX_PORT = 65535
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
# History (app.runs.history): ended runs stay in the hot tables for DEFAULT_HOT_MINUTES (dead
# letters DEFAULT_DEAD_LETTER_DAYS, so they can be retried in place; runs with an idempotency
# key DEFAULT_IDEMPOTENCY_HOURS, the window their key is unique in), then move to day
# partitions, which are dropped whole after DEFAULT_RETENTION_DAYS (0: kept forever). The
# schedules' fire ledger is kept DEFAULT_KEEP_FIRES_DAYS.
DEFAULT_HOT_MINUTES = 60.0
DEFAULT_DEAD_LETTER_DAYS = 7.0
DEFAULT_IDEMPOTENCY_HOURS = 24.0
DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_KEEP_FIRES_DAYS = 90.0
DEFAULT_LOG_LEVEL = "INFO"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Bounds of the settings: wide enough for any real deployment, narrow enough that a typo
# (1e300, nan) is refused at start instead of overflowing a timer or a date later.
MIN_SECONDS = 0.01
DEFAULT_METRICS_CACHE_SECONDS = 5.0
DEFAULT_METRICS_WINDOW_SECONDS = 300.0
MAX_SECONDS = 86_400.0  # one day: leases, intervals, grace periods
MAX_AGING_SECONDS = 365 * 86_400.0
MAX_AGING_BOOST = 1000
MAX_WORKER_CONCURRENCY = 1000
MAX_RESULT_BYTES = 64 * 1024 * 1024
MAX_TRIGGER_BATCH_SIZE = 100_000
MAX_TRIGGER_CATCHUP = 100_000
MAX_TRIGGER_CONNECTIONS = 32
MAX_KEEP_DAYS = 36_500.0  # a hundred years; 0 already means forever
DEV_SECRET_KEY = "sundial-dev-secret-change-me"
# What sits between Sundial and PostgreSQL: nothing (or a session-mode pooler), or a
# transaction-mode pooler such as PgBouncer, which hands each transaction to any server
# connection (see app/core/db.py).
POOLER_MODES = ("none", "transaction")
# How hard a password hash is to compute: argon2id's standard cost, or its cheapest for test
# suites that make many accounts (a deployment must never set it).
PASSWORD_HASH_COSTS = ("standard", "minimum")


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
    retention_days: float | None  # None: forever
    keep_fires_days: float | None
    hot_minutes: float = DEFAULT_HOT_MINUTES
    dead_letter_days: float | None = DEFAULT_DEAD_LETTER_DAYS  # None: hot until retried
    idempotency_hours: float = DEFAULT_IDEMPOTENCY_HOURS
    archive_dir: Path | None = None  # days are exported here before they are dropped
    # Where the `http` handler may connect besides public addresses (see app.handlers.webhook).
    http_allow_hosts: tuple[str, ...] = ()
    http_allow_networks: tuple[IPNetwork, ...] = ()
    # /metrics: open without a token (a scraper inside a private network), how long one
    # reading of the database is served, and the window of the "recent" figures.
    metrics_public: bool = False
    metrics_cache_seconds: float = DEFAULT_METRICS_CACHE_SECONDS
    metrics_window_seconds: float = DEFAULT_METRICS_WINDOW_SECONDS
    # Proxies whose X-Forwarded-For/-Proto are believed (`*`: the peer, as on Heroku, whose
    # router has no fixed address); none by default, so forged headers change nothing.
    trusted_proxies: tuple[str, ...] = ()
    # Host names the web answers to (TrustedHostMiddleware); none set: any.
    allowed_hosts: tuple[str, ...] = ()
    password_hash_cost: str = "standard"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            database_url=env.get("DATABASE_URL") or None,
            database_pooler=database_pooler(env),
            direct_database_url=env.get("SUNDIAL_DIRECT_DATABASE_URL") or None,
            port=_int(env, "PORT", DEFAULT_PORT, 1, MAX_PORT),
            secret_key=env.get("SECRET_KEY") or DEV_SECRET_KEY,
            data_dir=embedded_data_dir(env),
            log_level=_choice(env, "SUNDIAL_LOG_LEVEL", DEFAULT_LOG_LEVEL, LOG_LEVELS).upper(),
            log_format=_choice(env, "SUNDIAL_LOG_FORMAT", "json", ("json", "text")),
            lease_seconds=_seconds(env, "SUNDIAL_LEASE_SECONDS", DEFAULT_LEASE_SECONDS),
            poll_seconds=_seconds(env, "SUNDIAL_POLL_SECONDS", DEFAULT_POLL_SECONDS),
            worker_concurrency=_int(
                env,
                "SUNDIAL_WORKER_CONCURRENCY",
                DEFAULT_WORKER_CONCURRENCY,
                1,
                MAX_WORKER_CONCURRENCY,
            ),
            shutdown_grace_seconds=_seconds(
                env, "SUNDIAL_SHUTDOWN_GRACE_SECONDS", DEFAULT_SHUTDOWN_GRACE_SECONDS
            ),
            reaper_interval_seconds=_seconds(
                env, "SUNDIAL_REAPER_INTERVAL_SECONDS", DEFAULT_REAPER_INTERVAL_SECONDS
            ),
            trigger_interval_seconds=_seconds(
                env, "SUNDIAL_TRIGGER_INTERVAL_SECONDS", DEFAULT_TRIGGER_INTERVAL_SECONDS
            ),
            handler_modules=tuple(
                m.strip() for m in (env.get("SUNDIAL_HANDLERS") or "").split(",") if m.strip()
            ),
            priority_aging_seconds=_seconds(
                env,
                "SUNDIAL_PRIORITY_AGING_SECONDS",
                DEFAULT_PRIORITY_AGING_SECONDS,
                maximum=MAX_AGING_SECONDS,
            ),
            priority_aging_max_boost=_int(
                env,
                "SUNDIAL_PRIORITY_AGING_MAX_BOOST",
                DEFAULT_PRIORITY_AGING_MAX_BOOST,
                0,
                MAX_AGING_BOOST,
            ),
            max_result_bytes=_int(
                env, "SUNDIAL_MAX_RESULT_BYTES", DEFAULT_MAX_RESULT_BYTES, 1, MAX_RESULT_BYTES
            ),
            trigger_lease_seconds=_seconds(
                env, "SUNDIAL_TRIGGER_LEASE_SECONDS", DEFAULT_TRIGGER_LEASE_SECONDS
            ),
            trigger_batch_size=_int(
                env,
                "SUNDIAL_TRIGGER_BATCH_SIZE",
                DEFAULT_TRIGGER_BATCH_SIZE,
                1,
                MAX_TRIGGER_BATCH_SIZE,
            ),
            trigger_catchup_max=_int(
                env,
                "SUNDIAL_TRIGGER_CATCHUP_MAX",
                DEFAULT_TRIGGER_CATCHUP_MAX,
                1,
                MAX_TRIGGER_CATCHUP,
            ),
            trigger_connections=_int(
                env,
                "SUNDIAL_TRIGGER_CONNECTIONS",
                DEFAULT_TRIGGER_CONNECTIONS,
                1,
                MAX_TRIGGER_CONNECTIONS,
            ),
            retention_days=_retention_days(env),
            keep_fires_days=_days(env, "SUNDIAL_KEEP_FIRES_DAYS", DEFAULT_KEEP_FIRES_DAYS),
            # At least the hour the overview's figures read from the hot tables.
            hot_minutes=_number(
                env, "SUNDIAL_HOT_MINUTES", DEFAULT_HOT_MINUTES, 60.0, MAX_KEEP_DAYS * 1440
            ),
            dead_letter_days=_days(env, "SUNDIAL_DEAD_LETTER_DAYS", DEFAULT_DEAD_LETTER_DAYS),
            idempotency_hours=_number(
                env, "SUNDIAL_IDEMPOTENCY_HOURS", DEFAULT_IDEMPOTENCY_HOURS, 0.0, MAX_KEEP_DAYS * 24
            ),
            archive_dir=_path(env, "SUNDIAL_ARCHIVE_DIR"),
            http_allow_hosts=tuple(h.lower() for h in _list(env, "SUNDIAL_HTTP_ALLOW_HOSTS")),
            http_allow_networks=_networks(env, "SUNDIAL_HTTP_ALLOW_NETWORKS"),
            metrics_public=_choice(env, "SUNDIAL_METRICS_PUBLIC", "0", ("0", "1")) == "1",
            metrics_cache_seconds=_seconds(
                env, "SUNDIAL_METRICS_CACHE_SECONDS", DEFAULT_METRICS_CACHE_SECONDS
            ),
            metrics_window_seconds=_seconds(
                env, "SUNDIAL_METRICS_WINDOW_SECONDS", DEFAULT_METRICS_WINDOW_SECONDS
            ),
            trusted_proxies=_proxies(env, "SUNDIAL_TRUSTED_PROXIES"),
            allowed_hosts=tuple(h.lower() for h in _list(env, "SUNDIAL_ALLOWED_HOSTS")),
            password_hash_cost=password_hash_cost(env),  # checked at start like the rest
        )


def _list(env: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [item.strip() for item in (env.get(name) or "").split(",") if item.strip()]


def _proxies(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """`*`, or comma-separated addresses and networks (`10.0.0.0/8`)."""
    items = _list(env, name)
    if items == ["*"]:
        return ("*",)
    try:
        for item in items:
            ipaddress.ip_network(item, strict=False)
    except ValueError:
        raise ConfigError(
            f"{name} must be * or a comma-separated list of addresses and networks such as "
            f"10.0.0.0/8, got {env.get(name)!r}"
        ) from None
    return tuple(items)


def _networks(env: Mapping[str, str], name: str) -> tuple[IPNetwork, ...]:
    """Comma-separated networks in CIDR form (`10.0.0.0/8`, `fd00::/8`, `127.0.0.1`)."""
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in _list(env, name))
    except ValueError as exc:
        raise ConfigError(f"{name} must list networks like 10.0.0.0/8 or fd00::/8: {exc}") from None


def password_hash_cost(environ: Mapping[str, str] | None = None) -> str:
    """SUNDIAL_PASSWORD_HASH_COST: read on its own wherever a password is hashed."""
    env = os.environ if environ is None else environ
    return _choice(env, "SUNDIAL_PASSWORD_HASH_COST", "standard", PASSWORD_HASH_COSTS)


def database_pooler(environ: Mapping[str, str] | None = None) -> str:
    """SUNDIAL_DATABASE_POOLER: read on its own by every connection Sundial opens."""
    env = os.environ if environ is None else environ
    return _choice(env, "SUNDIAL_DATABASE_POOLER", "none", POOLER_MODES)


def embedded_data_dir(env: Mapping[str, str]) -> Path:
    """Where the embedded PostgreSQL lives: SUNDIAL_DATA_DIR, else one folder per user
    (`$XDG_DATA_HOME/sundial`, `~/.local/share/sundial`), so every command of one user
    finds the same database whatever directory it runs from."""
    if env.get("SUNDIAL_DATA_DIR"):
        return Path(env["SUNDIAL_DATA_DIR"]).expanduser()
    xdg = env.get("XDG_DATA_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative one
        return Path(xdg) / "sundial"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".local" / "share" / "sundial"


def check_range(name: str, value: float, minimum: float, maximum: float, unit: str = "") -> None:
    """Refuse a value outside [minimum, maximum], and nan or infinity, naming `name`."""
    if not (math.isfinite(value) and minimum <= value <= maximum):
        raise ConfigError(
            f"{name} must be between {minimum:g} and {maximum:g}{unit}, got {value:g}"
        )


def _int(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw[:40]!r}") from None
    check_range(name, value, minimum, maximum)
    return value


def _seconds(
    env: Mapping[str, str], name: str, default: float, *, maximum: float = MAX_SECONDS
) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw[:40]!r}") from None
    check_range(name, value, MIN_SECONDS, maximum, " seconds")
    return value


def _retention_days(env: Mapping[str, str]) -> float | None:
    """SUNDIAL_RETENTION_DAYS; before history had day partitions, runs were kept
    SUNDIAL_KEEP_RUNS_DAYS and dead letters SUNDIAL_KEEP_FAILED_DAYS: a deployment that
    still sets only those keeps the longer of the two (0 in either: forever)."""
    if env.get("SUNDIAL_RETENTION_DAYS") or not (
        env.get("SUNDIAL_KEEP_RUNS_DAYS") or env.get("SUNDIAL_KEEP_FAILED_DAYS")
    ):
        return _days(env, "SUNDIAL_RETENTION_DAYS", DEFAULT_RETENTION_DAYS)
    legacy = [
        _days(env, name, DEFAULT_RETENTION_DAYS)
        for name in ("SUNDIAL_KEEP_RUNS_DAYS", "SUNDIAL_KEEP_FAILED_DAYS")
        if env.get(name)
    ]
    return None if None in legacy else max(d for d in legacy if d is not None)


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name)
    return Path(raw).expanduser() if raw else None


def _number(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """A number within [low, high]."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw[:40]!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, got {value:g}")
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
            f"{name} must be a number of days (0: keep forever), got {raw[:40]!r}"
        ) from None
    if not (math.isfinite(value) and 0 <= value <= MAX_KEEP_DAYS):
        raise ConfigError(
            f"{name} must be 0 (keep forever) or a number of days up to {MAX_KEEP_DAYS:g}, "
            f"got {value:g}"
        )
    return value or None


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = (env.get(name) or default).strip()
    if raw.lower() not in (a.lower() for a in allowed):
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {raw[:40]!r}")
    return raw.lower()
