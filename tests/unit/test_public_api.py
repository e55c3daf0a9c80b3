"""The public `sundial` package is the implementation's API under a name of its own."""

import sundial
from app.client import Sundial
from app.handlers import handler
from app.handlers.jobs import JobContext
from app.runs.run_inserts import SubmitError


def test_sundial_exports_the_client_handler_context_and_errors() -> None:
    assert sundial.Sundial is Sundial
    assert sundial.JobContext is JobContext
    assert sundial.SubmitError is SubmitError
    for name in sundial.__all__:
        assert getattr(sundial, name) is not None, name


def test_sundial_handler_registers_in_the_registry_workers_use() -> None:
    # tests/db/test_wheel.py runs a handler registered this way in a real worker.
    assert sundial.handler is handler


def test_errors_a_caller_catches_share_one_base() -> None:
    for error in (sundial.SubmitError, sundial.IdempotencyConflict, sundial.DagError,
                  sundial.RunInHistory):  # fmt: skip
        assert issubclass(error, sundial.UsageError)
