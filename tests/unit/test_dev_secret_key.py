"""`sundial dev` keeps its secret key between restarts, readable by its user only."""

from __future__ import annotations

import stat
from pathlib import Path

from app.cli.main import build_parser
from app.cli.services import dev_secret_key


def test_the_dev_key_is_kept_and_private(tmp_path: Path) -> None:
    first = dev_secret_key(tmp_path / "data")
    assert len(first) >= 32
    assert dev_secret_key(tmp_path / "data") == first  # a restart signs the same sessions
    mode = stat.S_IMODE((tmp_path / "data" / "dev-secret-key").stat().st_mode)
    assert mode == 0o600
    assert dev_secret_key(tmp_path / "other") != first


def test_dev_listens_on_this_computer_unless_told_otherwise() -> None:
    parser = build_parser("dev")
    assert parser.parse_args(["dev"]).host == "127.0.0.1"
    assert parser.parse_args(["dev", "--host", "0.0.0.0"]).host == "0.0.0.0"
