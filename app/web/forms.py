"""What every create and edit page does with a refusal: the message goes next to the field it
concerns, or above the form when it concerns no one field.

Domain errors name their field (`UsageError.field`, in the domain's words, as the API
returns it); a page whose form calls a field otherwise renames it with `form_field`.

    except ScheduleError as exc:
        errors = field_errors(exc, lambda field: FORM_NAMES.get(field, field))
"""

from __future__ import annotations

from collections.abc import Callable

from app.core.errors import UsageError

WHOLE_FORM = "form"


def field_errors(
    exc: UsageError,
    form_field: Callable[[str], str] | None = None,
    *,
    whole_form: str = WHOLE_FORM,
) -> dict[str, str]:
    """`{form field: message}` for the template's `errors`."""
    field = exc.field
    if field is not None and form_field is not None:
        field = form_field(field)
    return {field or whole_form: str(exc)}


def optional_whole(text: str, field: str, label: str) -> int | None:
    """A form's whole-number box: None when left empty, or a refusal naming the field."""
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"{label} must be a whole number, got {text!r}", field)
    return int(text)
