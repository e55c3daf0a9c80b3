"""Execution of claimed attempts: `async`, `thread`, `process` and `subprocess` models.

The worker uses one `Executors` object; see its docstring for use, cancellation and stats.
"""

from app.executors.router import Executors

__all__ = ["Executors"]
