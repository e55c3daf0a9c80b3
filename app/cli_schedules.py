"""`sundial schedule …`: add, list, pause, resume, run now and delete schedules."""

from __future__ import annotations

import argparse
from typing import Any


def add_schedule_commands(sub: Any) -> None:
    """Register `sundial schedule` and its subcommands on the top-level parser."""
    _ = argparse  # filled in by the schedules work
