"""Handlers by name: the registry, the `@handler` decorator and `SUNDIAL_HANDLERS` loading.

A handler is a plain callable `fn(ctx: JobContext, **args)`, sync or `async def`:

    from app.handlers import handler

    @handler("send-report")
    async def send_report(ctx, recipient: str) -> dict[str, str]:
        ...

A handler may declare its arguments with `args=`: a pydantic model class or a JSON-schema
dict. The registry keeps the JSON schema; workers publish it, and the dashboard's job form
shows one field per property and checks args against it:

    class Report(BaseModel):
        recipient: str = Field(description="Who gets the report")

    @handler("send-report", args=Report)
    async def send_report(ctx, recipient: str) -> None: ...

Modules named in `SUNDIAL_HANDLERS` are imported with `load_modules`, so their decorators
register into the default registry in every process that runs jobs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

if TYPE_CHECKING:  # both imported where args are declared: a worker may need neither
    from pydantic import BaseModel

HandlerFunc = Callable[..., Any]
F = TypeVar("F", bound=HandlerFunc)


class UnknownHandler(KeyError):
    """No handler is registered under the requested name."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(name)

    def __str__(self) -> str:  # KeyError would quote the whole message
        known = ", ".join(self.known) or "none"
        return f"no handler named {self.name!r} is registered on this worker (known: {known})"


class DuplicateHandler(ValueError):
    """Two different functions were registered under the same name."""


class HandlerModuleError(ImportError):
    """A module listed in `SUNDIAL_HANDLERS` could not be imported."""


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    """A handler function with what executors need to know about it."""

    name: str
    fn: HandlerFunc
    is_async: bool
    args_schema: dict[str, Any] | None = None

    @property
    def origin(self) -> str:
        """`module.qualname` of the function, for messages."""
        module = getattr(self.fn, "__module__", "?")
        qualname = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"{module}.{qualname}"


ArgsDeclaration: TypeAlias = "type[BaseModel] | Mapping[str, Any] | None"


def args_schema(args: ArgsDeclaration) -> dict[str, Any] | None:
    """The JSON schema of a handler's declared args (a pydantic model or a schema dict)."""
    if args is None:
        return None
    if isinstance(args, type):
        from pydantic import BaseModel

        if issubclass(args, BaseModel):
            return args.model_json_schema()
    if isinstance(args, Mapping):
        import jsonschema

        schema = dict(args)
        if schema.get("type", "object") != "object":
            raise ValueError("a handler's args schema must describe an object")
        jsonschema.validators.validator_for(schema).check_schema(schema)
        return schema
    raise TypeError(f"args= takes a pydantic model class or a JSON-schema dict, got {args!r}")


def _is_async(fn: HandlerFunc) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with `async def __call__`
    return call is not None and inspect.iscoroutinefunction(call)


class HandlerRegistry:
    """Maps handler names to functions.

    Registering the same function (same module and qualified name) again replaces the
    entry, so re-importing a module is harmless; a different function under a taken name
    raises `DuplicateHandler`.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, RegisteredHandler] = {}

    def register(self, name: str, fn: F, args: ArgsDeclaration = None) -> F:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a handler name must be a non-empty string, got {name!r}")
        if not callable(fn):
            raise TypeError(f"handler {name!r} must be callable, got {fn!r}")
        entry = RegisteredHandler(name, fn, _is_async(fn), args_schema(args))
        existing = self._handlers.get(name)
        if existing is not None and existing.origin != entry.origin:
            raise DuplicateHandler(
                f"handler name {name!r} is already registered by {existing.origin}; "
                f"cannot register {entry.origin} under it too"
            )
        self._handlers[name] = entry
        return fn

    @overload
    def handler(self, name_or_fn: F) -> F: ...

    @overload
    def handler(
        self, name_or_fn: str | None = None, *, args: ArgsDeclaration = None
    ) -> Callable[[F], F]: ...

    def handler(
        self, name_or_fn: str | F | None = None, *, args: ArgsDeclaration = None
    ) -> F | Callable[[F], F]:
        """Decorator: `@registry.handler("name")`, or bare `@registry.handler` to use the
        function's `__name__`; `args=` declares the arguments."""
        if callable(name_or_fn):
            return self.register(name_or_fn.__name__, name_or_fn)
        name = name_or_fn

        def decorate(fn: F) -> F:
            return self.register(name or fn.__name__, fn, args)

        return decorate

    def get(self, name: str) -> RegisteredHandler:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownHandler(name, self._handlers) from None

    def names(self) -> list[str]:
        """Registered names, sorted (what a worker advertises in the workers table)."""
        return sorted(self._handlers)

    def schemas(self) -> dict[str, dict[str, Any]]:
        """The declared args schema of each handler that has one (what a worker publishes)."""
        return {n: h.args_schema for n, h in self._handlers.items() if h.args_schema}

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __len__(self) -> int:
        return len(self._handlers)


default_registry = HandlerRegistry()
"""The registry `@handler` writes to and workers run from; built-ins are always in it."""


@overload
def handler(name_or_fn: F) -> F: ...


@overload
def handler(name_or_fn: str | None = None, *, args: ArgsDeclaration = None) -> Callable[[F], F]: ...


def handler(
    name_or_fn: str | F | None = None, *, args: ArgsDeclaration = None
) -> F | Callable[[F], F]:
    """Register a function in the default registry: `@handler("name")` or `@handler`;
    `args=` declares its arguments (pydantic model class or JSON-schema dict)."""
    if callable(name_or_fn):
        return default_registry.handler(name_or_fn)
    return default_registry.handler(name_or_fn, args=args)


def load_modules(names: Iterable[str]) -> None:
    """Import each dotted module path so the handlers it decorates get registered.

    Raises `HandlerModuleError` naming the first module that fails to import.
    """
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise HandlerModuleError(
                f"could not import handler module {name!r} (from SUNDIAL_HANDLERS): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
