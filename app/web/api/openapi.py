"""The OpenAPI 3.1 document of the JSON API, built from the routes' `operation`
declarations and their pydantic models (the ones that validate requests), and the
reference page that shows it to people (server-rendered, no script)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.web.access import public
from app.web.api.core import OPERATION_ATTRIBUTE, PREFIX, Operation
from app.web.api.schemas import ErrorOut
from app.web.render import render

TITLE = "Sundial API"
VERSION = "1"
REASONS = {
    200: "OK",
    201: "Created",
    204: "No content",
    400: "The body is not JSON",
    401: "No token, or a token that is unknown, expired or revoked",
    403: "The token's user role or its scope does not allow this",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflicts with the current state (idempotency key, run already ended)",
    413: "The body is larger than the limit",
    422: "Invalid input; the error's field names the offending field",
    503: "The database cannot be reached",
}
MAX_VALUES_LISTED = 20
_PARAM = re.compile(r"{(\w+)}")
_REF = "#/components/schemas/{model}"


def _api_routes(routes: Sequence[BaseRoute]) -> list[tuple[Route, Operation]]:
    found = []
    for route in routes:
        if isinstance(route, Route):
            spec = getattr(route.endpoint, OPERATION_ATTRIBUTE, None)
            if spec is not None:
                found.append((route, spec))
    return found


def _models(operations: list[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    """Each body's shape as it is read, each response's as it is written (a field with a
    default is then required: a response always has it)."""
    models: dict[str, tuple[type[BaseModel], JsonSchemaMode]] = {
        ErrorOut.__name__: (ErrorOut, "serialization")
    }
    for op in operations:
        if op.body is not None:
            models[op.body.__name__] = (op.body, "validation")
        if op.response is not None:
            models[op.response.__name__] = (op.response, "serialization")
    return list(models.values())


def _content(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}}


def _parameters(route: Route, op: Operation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for name in _PARAM.findall(route.path_format):
        kind = op.path.get(name, str)
        schema: dict[str, Any] = {"type": "string"}
        if kind is int:
            schema = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
        elif kind is uuid.UUID:
            schema = {"type": "string", "format": "uuid"}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    if op.query is not None:
        schema = op.query.model_json_schema()
        for name, prop in schema.get("properties", {}).items():
            prop = _query_schema(prop, schema.get("$defs", {}))
            description = prop.pop("description", None)
            param: dict[str, Any] = {"name": name, "in": "query", "required": False}
            param["schema"] = prop
            if description:
                param["description"] = description
            params.append(param)
    return params


def _query_schema(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema, standalone: a query string has no null (an optional
    parameter is left out), and enums are inlined."""
    prop = dict(prop)
    options = [o for o in prop.pop("anyOf", []) if o.get("type") != "null"]
    if options:
        prop.update(options[0])
    if "$ref" in prop:
        prop.update(defs[prop.pop("$ref").rsplit("/", 1)[-1]])
    if prop.get("default") is None:
        prop.pop("default", None)
    return prop


def _operation(route: Route, method: str, op: Operation) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status in sorted({op.status, *op.also}):
        entry: dict[str, Any] = {"description": REASONS.get(status, "")}
        if status < 300 and status != 204 and op.response is not None:
            entry["content"] = _content(op.response)
        elif status >= 400:
            entry["content"] = _content(ErrorOut)
        responses[str(status)] = entry
    errors = [401, 403, 422, 503]
    if op.path:  # a path value holding a slash reaches no operation at all
        errors.append(404)
    if op.body is not None:
        errors += [400, 413]
    for status in errors:
        responses.setdefault(
            str(status), {"description": REASONS[status], "content": _content(ErrorOut)}
        )
    doc: dict[str, Any] = {
        "operationId": route.name,
        "summary": op.summary,
        "tags": [route.path.removeprefix(PREFIX).split("/")[1]],
        "parameters": _parameters(route, op),
        "responses": responses,
        "security": [{"bearer": []}],
        "x-sundial-role": op.role.value,
    }
    if op.description:
        doc["description"] = op.description
    if op.body is not None:
        # A body may be left out only when an empty object would do.
        schema = op.body.model_json_schema()
        required = any(key in schema for key in ("required", "allOf", "minProperties"))
        doc["requestBody"] = {"required": required, "content": _content(op.body)}
    return doc


def build(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The document of the API routes among `routes`."""
    api = _api_routes(routes)
    _, definitions = models_json_schema(_models([op for _, op in api]), ref_template=_REF)
    for schema in _subschemas(definitions):
        _names_as_property_names(schema)
    paths: dict[str, dict[str, Any]] = {}
    for route, op in api:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(route.path_format, {})[method.lower()] = _operation(route, method, op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "description": "Submit and follow runs, DAGs, workflows and schedules. "
            "Authenticate with an API token: Authorization: Bearer <token>. "
            "A token acts with its user's role and its scope (read: GET only).",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _subschemas(schema: Any) -> list[dict[str, Any]]:
    """Every object within `schema`, itself included."""
    found, stack = [], [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _names_as_property_names(schema: dict[str, Any]) -> None:
    """An object keyed by names (`dict[Name, X]`): pydantic states the name pattern as
    `patternProperties`, which leaves other keys allowed; the server refuses them, so the
    pattern belongs in `propertyNames`."""
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "propertyNames" in schema:
        ((pattern, values),) = patterns.items()
        del schema["patternProperties"]
        schema["propertyNames"] = {**schema["propertyNames"], "pattern": pattern}
        schema["additionalProperties"] = values


def document(request: Request) -> dict[str, Any]:
    """Built once per application: the routes do not change while it runs."""
    state = request.app.state
    if not hasattr(state, "openapi"):
        state.openapi = build(request.app.routes)
    doc: dict[str, Any] = state.openapi
    return doc


@public
async def openapi_json(request: Request) -> Response:
    return JSONResponse(document(request))


def type_text(schema: dict[str, Any]) -> str:
    """A JSON schema as a person reads it: `integer`, `list of RunOut`, `string or null`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(type_text(s) for s in schema["anyOf"])
    if "enum" in schema:
        values = [str(v) for v in schema["enum"]]
        if len(values) > MAX_VALUES_LISTED:  # the time zones: named in the document itself
            return f"one of {len(values):,} names, listed in openapi.json"
        return "one of " + ", ".join(values)
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_text(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        return "object" if values is True else f"object of {type_text(values)}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def _limits_text(schema: dict[str, Any]) -> str:
    parts = [schema, *schema.get("anyOf", [])]
    words = []
    for part in parts:
        for key, label in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"),
                           ("maxLength", "length ≤"), ("minItems", "items ≥"),
                           ("maxItems", "items ≤")):  # fmt: skip
            if key in part:
                words.append(f"{label} {part[key]:,}")
    return ", ".join(words)


def _plain(text: Any) -> str:
    """Descriptions are written for the JSON document (Markdown code marks); the page
    shows them as plain sentences."""
    return str(text or "").replace("`", "")


def _fields(schema: dict[str, Any]) -> list[dict[str, str]]:
    required = set(schema.get("required", []))
    return [
        {
            "name": name,
            "type": type_text(prop),
            "required": "yes" if name in required else "no",
            "limits": _limits_text(prop),
            "description": _plain(prop.get("description", "")),
        }
        for name, prop in schema.get("properties", {}).items()
    ]


@public
async def docs(request: Request) -> Response:
    doc = document(request)
    endpoints = [
        {
            "id": op["operationId"],
            "path": path,
            "method": method.upper(),
            "summary": op["summary"],
            "description": _plain(op.get("description", "")),
            "role": op["x-sundial-role"],
            "parameters": [
                {**p, "type": type_text(p["schema"]), "limits": _limits_text(p["schema"])}
                for p in op["parameters"]
            ],
            "body": type_text(op["requestBody"]["content"]["application/json"]["schema"])
            if "requestBody" in op
            else None,
            "responses": [
                {
                    "status": status,
                    "description": answer["description"],
                    "schema": type_text(answer["content"]["application/json"]["schema"])
                    if "content" in answer
                    else "",
                }
                for status, answer in op["responses"].items()
            ],
        }
        for path, methods in doc["paths"].items()
        for method, op in methods.items()
    ]
    schemas = [
        {
            "name": name,
            "description": _plain(schema.get("description", "")),
            "fields": _fields(schema),
            "enum_values": ", ".join(str(v) for v in schema.get("enum", [])),
        }
        for name, schema in sorted(doc["components"]["schemas"].items())
    ]
    return render(request, "api/docs.html", endpoints=endpoints, schemas=schemas, info=doc["info"])


routes = [
    Route(f"{PREFIX}/openapi.json", openapi_json, methods=["GET"], name="api_openapi"),
    Route(f"{PREFIX}/docs", docs, methods=["GET"], name="api_docs"),
]
