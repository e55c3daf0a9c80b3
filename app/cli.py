"""The `sundial` command: one entry point for every Procfile process and admin task.

Errors a person can fix (bad configuration, unreachable database, bad input) end with one
sentence on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app.config import ConfigError, Settings
from app.db import DatabaseUnavailable, DatabaseUrlError, redact, resolve_database_url
from app.errors import UsageError
from app.logs import configure_logging

log = logging.getLogger("sundial")

EXIT_USAGE = 2  # bad input or configuration
EXIT_UNAVAILABLE = 3  # the database could not be reached

PROCFILE = Path(__file__).resolve().parent.parent / "Procfile"


Command = Callable[[argparse.Namespace, Settings], int]


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from app import migrate
    from app.db import check_database

    url = resolve_database_url(settings)
    check_database(url)
    before = migrate.current_revision(url)
    migrate.upgrade(url)
    after = migrate.current_revision(url)
    if before == after:
        print(f"database is up to date (revision {after})")
    else:
        print(f"migrated database from {before or 'empty'} to revision {after}")
    return 0


def service_database(settings: Settings) -> str:
    """The URL a long-running service uses, once the database answers and its schema is
    the one this version needs (a clear error now beats failing queries later)."""
    from app.db import check_database
    from app.migrate import ensure_current

    url = resolve_database_url(settings)
    check_database(url)
    ensure_current(url)
    return url


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from app.web.app import check_secret_key, create_app

    url = service_database(settings)
    check_secret_key(settings, args.host)
    port = args.port or settings.port
    log.info("web listening on http://%s:%d", args.host, port)
    uvicorn.run(
        create_app(settings, url),
        host=args.host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.worker import run_worker

    url = service_database(settings)
    return run_worker(settings, url, concurrency=args.concurrency)


def cmd_trigger(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.periodic import stop_on_signals
    from app.services.trigger import Trigger

    url = service_database(settings)
    Trigger(settings).run_forever(url, stop_on_signals())
    return 0


def cmd_reaper(args: argparse.Namespace, settings: Settings) -> int:
    from app.services.periodic import stop_on_signals
    from app.services.reaper import Reaper

    url = service_database(settings)
    Reaper(settings).run_forever(url, stop_on_signals())
    return 0


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    """Embedded database if none, migrate, then every Procfile process under honcho."""
    from honcho.environ import parse_procfile
    from honcho.manager import Manager

    from app import migrate
    from app.cli_users import dev_sign_in_link
    from app.db import check_database

    url = resolve_database_url(settings)
    check_database(url)
    migrate.upgrade(url)
    env = dict(os.environ)
    env["DATABASE_URL"] = url
    env["PORT"] = str(args.port or settings.port)
    env.setdefault("SUNDIAL_LOG_FORMAT", "text")
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(32))  # sessions last one dev run
    # Children find `sundial` next to the interpreter running this command.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    procfile = parse_procfile(PROCFILE.read_text())
    manager = Manager()
    for name, command in procfile.processes.items():
        if name != "release":
            manager.add_process(name, command, env=env, cwd=str(PROCFILE.parent))
    print(f"Sundial dashboard: http://localhost:{env['PORT']}/  (database: {redact(url)})")
    link = dev_sign_in_link(url, env["SECRET_KEY"], int(env["PORT"]))
    print(f"Sign in as the local admin (once, within 15 minutes): {link}")
    manager.loop()
    return int(manager.returncode or 0)


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from app.db import stop_embedded

    if args.db_command == "url":
        print(resolve_database_url(settings))
        return 0
    if settings.database_url:
        raise UsageError("DATABASE_URL is set: there is no embedded database to stop")
    stopped = stop_embedded(settings.data_dir)
    print("embedded database stopped" if stopped else "embedded database was not running")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sundial",
        description="Sundial: reliable job scheduling on PostgreSQL, with a browser dashboard.",
        epilog="Configuration comes from the environment: DATABASE_URL (embedded PostgreSQL "
        "in ./.sundial when unset), PORT, SECRET_KEY and SUNDIAL_* settings (see README).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func, process=name)
        return p

    add("migrate", cmd_migrate, "apply database migrations (safe to run repeatedly)")
    web = add("web", cmd_web, "serve the dashboard, JSON API, /metrics and /healthz")
    web.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    web.add_argument("--port", type=int, default=None, help="port (default $PORT or 8000)")
    worker = add("worker", cmd_worker, "claim and execute runs")
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="runs executed at once (default $SUNDIAL_WORKER_CONCURRENCY or 10)",
    )
    add("trigger", cmd_trigger, "turn due schedules into runs (one leader among many)")
    add("reaper", cmd_reaper, "re-queue runs whose worker lease expired; age priorities")
    dev = add("dev", cmd_dev, "run every Procfile process locally (embedded database if none)")
    dev.add_argument("--port", type=int, default=None, help="dashboard port (default $PORT)")
    db = add("db", cmd_db, "embedded database helpers")
    db.add_argument("db_command", choices=["url", "stop"], help="print its URL, or stop it")

    from app.cli_runs import add_run_commands
    from app.cli_schedules import add_schedule_commands
    from app.cli_users import add_user_commands
    from app.cli_workflows import add_workflow_commands

    add_run_commands(sub)
    add_schedule_commands(sub)
    add_workflow_commands(sub)
    add_user_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        configure_logging(args.process, settings.log_level, settings.log_format)
        return int(args.func(args, settings))
    except (ConfigError, DatabaseUrlError, UsageError) as exc:
        print(f"sundial {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DatabaseUnavailable as exc:
        print(f"sundial {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
