"""Where Sundial's assets are: the dashboard's templates and static files, the Alembic
migrations, and the Procfile that `sundial dev` runs.

In a checkout they are the top-level folders next to `app/`. A built wheel ships them inside
the package as `app._assets` (pyproject.toml maps them there), found through
importlib.resources, so `pip install`, pipx and wheels work without the source tree.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

CHECKOUT_ROOT = Path(__file__).resolve().parents[2]


def assets_root() -> Path:
    """The folder holding templates/, static/, migrations/ and the Procfile."""
    # Wheels install unpacked, so the packaged assets are a real folder on disk.
    packaged = Path(str(files("app") / "_assets"))
    return packaged if packaged.is_dir() else CHECKOUT_ROOT  # else a checkout or editable


ASSETS_ROOT = assets_root()
TEMPLATES_DIR = ASSETS_ROOT / "templates"
STATIC_DIR = ASSETS_ROOT / "static"
MIGRATIONS_DIR = ASSETS_ROOT / "migrations"
PROCFILE = ASSETS_ROOT / "Procfile"
# Prometheus alerting rules over /metrics, shipped inside the package itself.
ALERT_RULES = Path(__file__).resolve().parents[1] / "observability" / "prometheus-alerts.yml"
