"""`sundial web|worker|trigger|reaper|dev`: the long-running processes of the Procfile.

Each command imports its service inside it (uvicorn, the worker's executors, honcho):
one process runs one service and should not load the others (start-up cost).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import secrets
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from app.cli.db import service_database
from app.core import limits
from app.core.config import MAX_PORT, MAX_WORKER_CONCURRENCY, ConfigError, Settings
from app.core.db import redact, resolve_database_url
from app.core.errors import UsageError
from app.core.resources import PROCFILE
from app.core.text import safe

log = logging.getLogger("sundial")


# The commands `add_service_commands` defines.
WEB_HOST_ENV = "SUNDIAL_WEB_HOST"  # `sundial dev` tells its web process where to bind
SERVICE_COMMANDS = frozenset({"web", "worker", "trigger", "reaper", "dev"})


class PortInUse(RuntimeError):
    """The port the dashboard should listen on is taken."""


def port_number(text: str) -> int:
    """argparse type of --port: a whole number from 1 to 65535."""
    return _bounded_int(text, 1, MAX_PORT)


def concurrency(text: str) -> int:
    """argparse type of --concurrency."""
    return _bounded_int(text, 1, MAX_WORKER_CONCURRENCY)


def queue_slots(text: str) -> list[tuple[str, int | None]]:
    """argparse type of --queues: `default=20,reports=2` (a queue without `=N` takes
    --concurrency)."""
    served: list[tuple[str, int | None]] = []
    for part in text.split(","):
        name, equals, slots = part.strip().partition("=")
        name = name.strip()
        if not limits.plain_name(name):
            raise argparse.ArgumentTypeError(
                f"give queues as name=concurrency, like default=20,reports=2; got {part!r}"
            )
        if any(name == seen for seen, _ in served):
            raise argparse.ArgumentTypeError(f"queue {name!r} is named twice")
        served.append((name, concurrency(slots.strip()) if equals else None))
    return served


def _bounded_int(text: str, minimum: int, maximum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not minimum <= value <= maximum:
        raise argparse.ArgumentTypeError(f"must be between {minimum} and {maximum}, got {value}")
    return value


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` and listening, or one sentence saying why not.

    Binding before anything starts turns a taken port into PortInUse instead of a server
    log line after startup; the web server then serves on this very socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} is already in use on {host}: stop the process using it or "
                "choose another port with --port or PORT"
            ) from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from app.core.logs import AccessLog
    from app.web.app import check_secret_key, create_app

    port = args.port or settings.port
    with listen_socket(args.host, port) as sock:
        url = service_database(settings)
        check_secret_key(settings, args.host)
        log.info("web listening on http://%s:%d", args.host, port)
        if settings.password_hash_cost == "minimum":
            log.warning(
                "passwords are hashed at argon2's cheapest cost (SUNDIAL_PASSWORD_HASH_COST="
                "minimum): for test suites only, never for people's accounts"
            )
        config = uvicorn.Config(
            AccessLog(create_app(settings, url)),
            host=args.host,
            port=port,
            log_config=None,  # uvicorn's lines go to the root logger: JSON like every other
            access_log=False,  # AccessLog writes them, with the duration and real client
            # forwarded headers count only from SUNDIAL_TRUSTED_PROXIES (see app.web)
            proxy_headers=False,
            timeout_graceful_shutdown=5,
        )
        uvicorn.Server(config).run(sockets=[sock])
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.periodic import stop_on_signals
    from app.services.worker import run_worker

    load_handler_modules(settings)
    url = wait_for_service_database(settings, "worker", stop_on_signals())
    if url is None:
        return 0  # stopped while waiting
    return run_worker(settings, url, concurrency=args.concurrency, queues=args.queues)


def wait_for_service_database(settings: Settings, name: str, stop: threading.Event) -> str | None:
    """The database URL once the database answers with the schema this version needs,
    waiting (a log line per try) while it is unreachable or full; None if stopped first."""
    from app.services.reconnecting import wait_for_database

    return wait_for_database(name, lambda: service_database(settings), stop)


def load_handler_modules(settings: Settings) -> None:
    """Import SUNDIAL_HANDLERS before anything starts: a module that is missing or fails
    to import is a configuration error, not a worker that dies after starting."""
    from app.handlers import HandlerModuleError, load_modules

    try:
        load_modules(settings.handler_modules)
    except HandlerModuleError as exc:
        raise ConfigError(str(exc)) from None


def cmd_trigger(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.periodic import stop_on_signals
    from app.services.trigger import Trigger

    stop = stop_on_signals()
    url = wait_for_service_database(settings, "trigger", stop)
    if url is not None:
        Trigger(settings).run_forever(url, stop)
    return 0


def cmd_reaper(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.periodic import stop_on_signals
    from app.services.reaper import Reaper

    stop = stop_on_signals()
    url = wait_for_service_database(settings, "reaper", stop)
    if url is not None:
        Reaper(settings).run_forever(url, stop)
    return 0


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    """Embedded database if none, migrate, then every Procfile process under honcho."""
    from honcho.environ import parse_procfile

    from app.cli.dev_manager import GracefulManager
    from app.cli.users import DEV_ADMIN, dev_sign_in
    from app.core import migrate
    from app.core.db import check_database

    load_handler_modules(settings)
    port = args.port or settings.port
    listen_socket(args.host, port).close()  # taken: say so before starting anything
    url = resolve_database_url(settings)
    check_database(url)
    migrate.upgrade(url)
    env = dict(os.environ)
    env["DATABASE_URL"] = url
    env["PORT"] = str(port)
    env.setdefault("SUNDIAL_LOG_FORMAT", "text")
    env[WEB_HOST_ENV] = args.host
    env.setdefault("SECRET_KEY", dev_secret_key(settings.data_dir))
    # Children find `sundial` next to the interpreter running this command.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    procfile = parse_procfile(PROCFILE.read_text())
    manager = GracefulManager(settings.shutdown_grace_seconds)
    for name, command in procfile.processes.items():
        if name != "release":
            manager.add_process(name, command, env=env, cwd=os.getcwd())
    print(f"Sundial dashboard: http://localhost:{port}/  (database: {safe(redact(url))})")
    sign_in = dev_sign_in(url, env["SECRET_KEY"], port)
    if sign_in.new_password is not None:
        print(
            f"Local admin created: user {DEV_ADMIN}, password {sign_in.new_password}  "
            "(shown this once: keep it, or use a sign-in link a start prints)"
        )
    print(f"Sign in as the local admin (once, within 15 minutes): {sign_in.link}")
    manager.loop()
    return int(manager.returncode or 0)


def dev_secret_key(data_dir: Path) -> str:
    """`sundial dev`'s secret key, kept (readable by this user only) in the data folder, so
    that a sign-in survives a restart of `sundial dev`."""
    path = data_dir / "dev-secret-key"
    try:
        return path.read_text().strip() or _new_dev_key(path)
    except FileNotFoundError:
        return _new_dev_key(path)


def _new_dev_key(path: Path) -> str:
    key = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key)
    return key


def add_service_commands(sub: Any) -> None:
    def add(name: str, func: Any, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func, process=name)
        return p

    web = add("web", cmd_web, "serve the dashboard, JSON API, /metrics and /healthz")
    web.add_argument(
        "--host",
        default=os.environ.get(WEB_HOST_ENV) or "0.0.0.0",
        help=f"address to bind (default ${WEB_HOST_ENV} or 0.0.0.0)",
    )
    web.add_argument("--port", type=port_number, default=None, help="port (default $PORT or 8000)")
    worker = add("worker", cmd_worker, "claim and execute runs")
    worker.add_argument(
        "--concurrency",
        type=concurrency,
        default=None,
        help="runs executed at once (default $SUNDIAL_WORKER_CONCURRENCY or 10)",
    )
    worker.add_argument(
        "--queues",
        type=queue_slots,
        default=None,
        help="the queues to serve, each with its own concurrency, like default=20,reports=2 "
        "(default: the default queue at --concurrency)",
    )
    add("trigger", cmd_trigger, "turn due schedules into runs (one leader among many)")
    add("reaper", cmd_reaper, "re-queue runs whose worker lease expired; age priorities")
    dev = add("dev", cmd_dev, "run every Procfile process locally (embedded database if none)")
    dev.add_argument(
        "--port", type=port_number, default=None, help="dashboard port (default $PORT)"
    )
    dev.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the dashboard binds (default 127.0.0.1: this computer only)",
    )
