"""What a worker process loads before its first claim: only what a worker needs."""

from __future__ import annotations

import argparse
import subprocess
import sys

from app.cli.main import COMMAND_GROUPS, build_parser
from app.cli.services import SERVICE_COMMANDS
from app.core import migrate, schema_check

# Libraries of other commands (web, migrations, schedules, users, handler args): a worker
# that imported them would pay for them at every start.
NOT_FOR_WORKERS = (
    "sqlalchemy",
    "alembic",
    "starlette",
    "jinja2",
    "croniter",
    "argon2",
    "pydantic",
    "jsonschema",
)


def test_the_worker_command_imports_none_of_the_other_commands_libraries() -> None:
    code = (
        "import sys\n"
        "from app.cli.main import build_parser\n"
        "build_parser('worker').parse_args(['worker', '--concurrency', '3'])\n"
        "import app.services.worker\n"
        f"print(' '.join(m for m in {NOT_FOR_WORKERS!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_a_job_child_starts_without_the_database_driver() -> None:
    # Every run of the subprocess model starts one; the driver was a third of its start-up.
    # The shell handler imports it when it asks whether commands may run.
    code = (
        "import sys\n"
        "import app.executors.child, app.executors.pool_child, app.handlers.builtin\n"
        "print(' '.join(m for m in ('psycopg', 'app.core.db') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_a_service_command_parses_as_with_the_whole_parser() -> None:
    for argv in (["worker", "--concurrency", "3"], ["worker"], ["web", "--port", "8001"]):
        assert build_parser(argv[0]).parse_args(argv) == build_parser().parse_args(argv)


def test_the_quick_schema_check_finds_the_head_alembic_finds() -> None:
    assert schema_check.head_revision() == migrate.head_revision()


def test_importing_the_users_module_hashes_no_password() -> None:
    # Every command imports it (the CLI parser names user commands); a hash takes 0.1-0.2 s.
    code = (
        "import argon2\n"
        "hashes = []\n"
        "original = argon2.PasswordHasher.hash\n"
        "def counted(self, *args, **kwargs):\n"
        "    hashes.append(1)\n"
        "    return original(self, *args, **kwargs)\n"
        "argon2.PasswordHasher.hash = counted\n"
        "import app.people.users, app.cli.main\n"
        "before = len(hashes)\n"
        "assert app.people.users._verify(None, 'a guess') is False\n"
        "print(before, len(hashes))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "1"]  # made once an unknown name is checked


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_parses_alike_with_only_its_own_group() -> None:
    whole = _commands(build_parser())
    grouped = {word for words in COMMAND_GROUPS.values() for word in words}
    assert set(whole) == grouped | set(SERVICE_COMMANDS) | {"migrate", "db"}
    for word, parser in whole.items():
        own = _commands(build_parser(word))
        assert own[word].format_help() == parser.format_help(), word
    for words in COMMAND_GROUPS.values():  # each group adds exactly the words listed
        assert set(_commands(build_parser(words[0]))) == set(words)
