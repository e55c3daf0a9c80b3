"""The entry points the CLI uses. The application itself is built by `app.web.create_app`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.config import DEV_SECRET_KEY, ConfigError, Settings

if TYPE_CHECKING:
    from starlette.applications import Starlette

LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def check_secret_key(settings: Settings, host: str) -> None:
    """Refuse to serve beyond this computer with the development SECRET_KEY: anyone who
    read the source could forge what it protects."""
    if settings.secret_key == DEV_SECRET_KEY and host not in LOCAL_HOSTS:
        raise ConfigError(
            f"SECRET_KEY is the development key: set SECRET_KEY to a long random value to "
            f"serve on {host}, or bind to 127.0.0.1"
        )


def create_app(settings: Settings, database_url: str) -> Starlette:
    from app.web import create_app as build

    return build(settings, database_url)
