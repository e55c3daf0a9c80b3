"""Job handlers: the registry, the `@handler` decorator and the built-in handlers.

Importing this package registers the built-ins in `default_registry`.
"""

from app.handlers.builtin import register_builtins
from app.handlers.registry import (
    DuplicateHandler,
    HandlerFunc,
    HandlerModuleError,
    HandlerRegistry,
    RegisteredHandler,
    UnknownHandler,
    default_registry,
    handler,
    load_modules,
)

register_builtins(default_registry)

__all__ = [
    "DuplicateHandler",
    "HandlerFunc",
    "HandlerModuleError",
    "HandlerRegistry",
    "RegisteredHandler",
    "UnknownHandler",
    "default_registry",
    "handler",
    "load_modules",
    "register_builtins",
]
