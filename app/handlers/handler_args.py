"""Declared handler arguments: a JSON schema as form fields, and args checked against it.

A handler may declare its args (`@handler("name", args=Model)`); its workers publish the JSON
schema. The job form shows one field per top-level property and the same `check` guards the
CLI, the API and the dashboard, with one plain sentence per problem:

    fields(schema)               -> [ArgField("retries", "integer", required=True, ...)]
    from_form(schema, {"retries": "3"}) -> {"retries": 3}
    check(schema, {"retries": "x"})     -> ArgsError("retries must be a whole number")
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import jsonschema
from jsonschema.exceptions import ValidationError

from app.core.db import Conn
from app.core.sql import query
from app.handlers import worker_registry

# JSON-schema type -> the kind of input the form shows
_KINDS = {"string": "text", "integer": "integer", "number": "number", "boolean": "checkbox"}
_TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "yes or no",
    "object": "a JSON object",
    "array": "a JSON list",
    "null": "empty",
}


class ArgsError(ValueError):
    """Args do not fit the handler's declared schema; `name` is the property at fault."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


def declared_schema(conn: Conn, handler: str, now: datetime | None = None) -> dict[str, Any] | None:
    """The args schema `handler` declares, from the newest live worker that declares one."""
    row = conn.execute(
        query("job_definitions", "handler_args_schema"),
        {"handler": handler, "live_seconds": worker_registry.LIVE_SECONDS, "now": now},
    ).fetchone()
    return row["schema"] if row else None


def check_declared(
    conn: Conn, handler: str, args: Mapping[str, Any], now: datetime | None = None
) -> None:
    """`check` against the schema `handler` declares, if it declares one."""
    schema = declared_schema(conn, handler, now)
    if schema is not None:
        check(schema, args)


@dataclass(frozen=True, slots=True)
class ArgField:
    """One form field for a top-level property of a handler's args."""

    name: str
    kind: str  # text, integer, number, checkbox, select or json
    label: str
    required: bool
    description: str = ""
    options: list[str] = field(default_factory=list)
    default: Any = None


def _resolve(schema: Mapping[str, Any], prop: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property with local `$ref`s followed and `Optional[X]` (anyOf X, null) unwrapped."""
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    choices = prop.get("anyOf")
    if isinstance(choices, list):
        non_null = [c for c in choices if isinstance(c, Mapping) and c.get("type") != "null"]
        if len(non_null) == 1:
            rest = {k: v for k, v in prop.items() if k != "anyOf"}
            return {**_resolve(schema, non_null[0]), **rest}
    return prop


def _kind(prop: Mapping[str, Any]) -> str:
    if isinstance(prop.get("enum"), list):
        return "select"
    kind = prop.get("type")
    return _KINDS.get(kind, "json") if isinstance(kind, str) else "json"


def fields(schema: Mapping[str, Any]) -> list[ArgField]:
    """One field per top-level property, in the schema's order."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = []
    for name, raw in properties.items():
        prop = _resolve(schema, raw if isinstance(raw, Mapping) else {})
        kind = _kind(prop)
        out.append(
            ArgField(
                name=name,
                kind=kind,
                label=str(prop.get("title") or name.replace("_", " ").capitalize()),
                required=name in required,
                description=str(prop.get("description") or ""),
                options=[str(o) for o in prop.get("enum", [])] if kind == "select" else [],
                default=prop.get("default"),
            )
        )
    return out


def form_values(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, str]:
    """Args as the fields show them (text; JSON for lists and objects; "on" when ticked)."""
    out = {}
    for f in fields(schema):
        value = args.get(f.name, f.default)
        if value is None:
            out[f.name] = ""
        elif f.kind == "checkbox":
            out[f.name] = "on" if value else ""
        elif f.kind == "json" or not isinstance(value, str | int | float):
            out[f.name] = json.dumps(value)
        else:
            out[f.name] = str(value)
    return out


def _word(name: str) -> str:
    return name.replace("_", " ")


def _convert(f: ArgField, text: str, options: list[Any]) -> Any:
    if f.kind == "checkbox":
        return text in ("on", "true", "yes", "1")
    if f.kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ArgsError(f"{_word(f.name)} must be a whole number", f.name) from None
    if f.kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ArgsError(f"{_word(f.name)} must be a number", f.name) from None
        if not math.isfinite(number):
            raise ArgsError(f"{_word(f.name)} must be a number", f.name)
        return int(number) if number.is_integer() and "." not in text else number
    if f.kind == "select":
        # the option as declared (an enum of numbers keeps its numbers)
        return next((o for o in options if str(o) == text), text)
    if f.kind == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise ArgsError(f"{_word(f.name)} must be valid JSON", f.name) from None
    return text


def from_form(schema: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """Args from the posted fields: typed per the schema; an empty optional field is left out
    (a required one too, so `check` says it is required)."""
    args: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for f in fields(schema):
        text = values.get(f.name, "").strip()
        if f.kind != "checkbox" and text == "":
            continue
        options = _resolve(schema, properties.get(f.name) or {}).get("enum") or []
        args[f.name] = _convert(f, text, list(options))
    return args


def _message(error: ValidationError) -> tuple[str, str | None]:
    """One plain sentence for a schema error, and the top-level property it concerns."""
    path = [str(p) for p in error.absolute_path]
    name = path[0] if path else None
    what = _word(".".join(path)) if path else "args"
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "a value"
        return f"{_word(missing)} is required", missing if not path else name
    if error.validator == "type":
        wanted = error.validator_value
        wanted_list = wanted if isinstance(wanted, list) else [wanted]
        words = [_TYPE_WORDS.get(str(t), str(t)) for t in wanted_list]
        return f"{what} must be {' or '.join(words)}", name
    if error.validator == "enum":
        choices = ", ".join(str(c) for c in cast(list[Any], error.validator_value))
        return f"{what} must be one of: {choices}", name
    if error.validator in ("minimum", "exclusiveMinimum"):
        return f"{what} must be at least {error.validator_value}", name
    if error.validator in ("maximum", "exclusiveMaximum"):
        return f"{what} must be at most {error.validator_value}", name
    if error.validator == "minLength":
        return f"{what} must be at least {error.validator_value} characters", name
    if error.validator == "maxLength":
        return f"{what} must be at most {error.validator_value} characters", name
    if error.validator == "additionalProperties":
        return f"args has a field this handler does not take ({error.message})", name
    return f"{what}: {error.message}", name


def check(schema: Mapping[str, Any], args: Mapping[str, Any]) -> None:
    """Raise `ArgsError` for the first problem (in field order) of `args` against `schema`."""
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = list(validator.iter_errors(dict(args)))
    except jsonschema.exceptions.SchemaError as exc:
        raise ArgsError(f"the handler declares an invalid args schema: {exc.message}") from None
    if not errors:
        return
    order = {name: i for i, name in enumerate(schema.get("properties") or {})}
    messages = [_message(e) for e in errors]
    message, name = min(messages, key=lambda m: order.get(m[1] or "", len(order)))
    raise ArgsError(message, name)
