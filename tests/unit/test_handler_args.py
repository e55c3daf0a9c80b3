"""Declared handler args: a schema as form fields, form text as typed args, plain messages."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest
from pydantic import BaseModel, Field

from app.handlers.handler_args import ArgsError, check, fields, form_values, from_form
from app.handlers.registry import HandlerRegistry


class Tone(StrEnum):
    plain = "plain"
    loud = "loud"


class Report(BaseModel):
    email: str = Field(description="Who gets the report")
    retries: int = 3
    ratio: float | None = None
    urgent: bool = False
    tone: Tone = Tone.plain
    tags: list[str] = []


def schema() -> dict[str, Any]:
    registry = HandlerRegistry()
    registry.register("report", lambda ctx, **a: None, Report)
    return registry.schemas()["report"]


def test_a_pydantic_model_becomes_one_field_per_property() -> None:
    by_name = {f.name: f for f in fields(schema())}
    assert list(by_name) == ["email", "retries", "ratio", "urgent", "tone", "tags"]
    assert by_name["email"].kind == "text" and by_name["email"].required
    assert by_name["email"].description == "Who gets the report"
    assert by_name["retries"].kind == "integer" and not by_name["retries"].required
    assert by_name["ratio"].kind == "number"  # Optional[float] unwrapped
    assert by_name["urgent"].kind == "checkbox"
    assert by_name["tone"].kind == "select" and by_name["tone"].options == ["plain", "loud"]
    assert by_name["tags"].kind == "json"


def test_form_text_becomes_typed_args_and_blank_optional_fields_are_left_out() -> None:
    posted = {"email": "a@b.c", "retries": "5", "ratio": "", "urgent": "on", "tone": "loud",
              "tags": '["x"]'}  # fmt: skip
    args = from_form(schema(), posted)
    assert args == {"email": "a@b.c", "retries": 5, "urgent": True, "tone": "loud",
                    "tags": ["x"]}  # fmt: skip
    check(schema(), args)
    assert from_form(schema(), {"email": "a"})["urgent"] is False  # an unticked box


@pytest.mark.parametrize(
    ("posted", "message", "name"),
    [
        ({"retries": "3"}, "email is required", "email"),
        ({"email": "a", "retries": "three"}, "retries must be a whole number", "retries"),
        ({"email": "a", "ratio": "lots"}, "ratio must be a number", "ratio"),
        ({"email": "a", "tags": "[x"}, "tags must be valid JSON", "tags"),
    ],
)
def test_bad_form_input_gets_a_plain_message_naming_the_field(
    posted: dict[str, str], message: str, name: str
) -> None:
    with pytest.raises(ArgsError) as caught:
        check(schema(), from_form(schema(), posted))
    assert str(caught.value) == message and caught.value.name == name


def test_args_from_json_are_checked_with_the_same_messages() -> None:
    with pytest.raises(ArgsError, match=r"^retries must be a whole number$"):
        check(schema(), {"email": "a", "retries": "3"})
    with pytest.raises(ArgsError, match=r"^tone must be one of: plain, loud$"):
        check(schema(), {"email": "a", "tone": "quiet"})
    with pytest.raises(ArgsError, match=r"^email is required$"):
        check(schema(), {})


def test_a_json_schema_dict_is_accepted_and_an_invalid_one_refused() -> None:
    registry = HandlerRegistry()
    declared = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                "required": ["n"]}  # fmt: skip
    registry.handler("count", args=declared)(lambda ctx, n: n)
    assert registry.get("count").args_schema == declared
    with pytest.raises(ArgsError, match=r"^n must be at least 1$"):
        check(declared, {"n": 0})
    with pytest.raises(ValueError, match="object"):
        registry.register("bad", lambda ctx: None, {"type": "string"})
    with pytest.raises(Exception, match=r"not valid under any of the given schemas|is not"):
        registry.register("worse", lambda ctx: None, {"type": "object", "properties": 3})


def test_handlers_without_a_declaration_publish_no_schema() -> None:
    registry = HandlerRegistry()
    registry.register("plain", lambda ctx: None)
    assert registry.schemas() == {}


def test_stored_args_are_shown_in_the_fields_as_text() -> None:
    values = form_values(schema(), {"email": "a", "retries": 2, "urgent": True, "tags": ["x"]})
    assert values == {"email": "a", "retries": "2", "ratio": "", "urgent": "on", "tone": "plain",
                      "tags": '["x"]'}  # fmt: skip
