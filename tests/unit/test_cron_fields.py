"""Each cron field read on its own, at its edges: the values a field allows, and the one
sentence a person reads for a value, range, step or name the field does not take."""

from __future__ import annotations

import pytest

from app.scheduling.cron_expressions import RecurrenceError, parse_cron


def refusal(expression: str) -> str:
    with pytest.raises(RecurrenceError) as refused:
        parse_cron(expression)
    return str(refused.value)


@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        ("* 0 1 1 *", "minutes", tuple(range(60))),
        ("0 * 1 1 *", "hours", tuple(range(24))),
        ("0 0 * 1 *", "days", frozenset(range(1, 32))),
        ("0 0 1 * *", "months", frozenset(range(1, 13))),
        ("0 0 * * *", "weekdays", frozenset(range(7))),
        ("59 23 31 12 7", "minutes", (59,)),
        ("59 23 31 12 7", "hours", (23,)),
        ("59 23 31 12 7", "days", frozenset({31})),
        ("59 23 31 12 7", "months", frozenset({12})),
        ("59 23 31 12 7", "weekdays", frozenset({0})),
        ("0 0 1 1 0", "weekdays", frozenset({0})),
        ("0-1 0 1 1 *", "minutes", (0, 1)),
        ("58-59 0 1 1 *", "minutes", (58, 59)),
        ("*/30 0 1 1 *", "minutes", (0, 30)),
        ("*/59 0 1 1 *", "minutes", (0, 59)),
        ("10/20 0 1 1 *", "minutes", (10, 30, 50)),
        ("0 */23 1 1 *", "hours", (0, 23)),
        ("0 0 */30 1 *", "days", frozenset({1, 31})),
        ("0 0 1 */11 *", "months", frozenset({1, 12})),
        ("0 0 * * */6", "weekdays", frozenset({0, 6})),
        ("0 0 * * */7", "weekdays", frozenset({0})),
        ("0 0 * * 5/1", "weekdays", frozenset({5, 6, 0})),
        ("0 0 * jan,dec *", "months", frozenset({1, 12})),
        ("0 0 * JAN-MAR *", "months", frozenset({1, 2, 3})),
        ("0 0 * * sun", "weekdays", frozenset({0})),
        ("0 0 * * mon-fri", "weekdays", frozenset({1, 2, 3, 4, 5})),
        ("0 0 * * fri-sun", "weekdays", frozenset({5, 6, 0})),
        ("0 0 * * sun-tue", "weekdays", frozenset({0, 1, 2})),  # Sunday opens the week too
        ("0 0 * * SAT,Sun", "weekdays", frozenset({6, 0})),
        ("0 0 * * 0-7", "weekdays", frozenset(range(7))),
        ("0 0 9-9 * *", "days", frozenset({9})),
    ],
)
def test_a_field_allows_exactly_its_values(expression: str, field: str, values: object) -> None:
    assert getattr(parse_cron(expression), field) == values


def test_l_is_the_last_day_and_no_numbered_day() -> None:
    cron = parse_cron("0 0 L * *")
    assert cron.last_day is True
    assert cron.days == frozenset()
    both = parse_cron("0 0 1,l * *")
    assert both.last_day is True
    assert both.days == frozenset({1})
    assert parse_cron("0 0 31 * *").last_day is False


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "60 * * * *",
            "'60 * * * *' is not a valid cron expression: the minute field has '60'; "
            "use a number from 0 to 59",
        ),
        (
            "0 24 * * *",
            "'0 24 * * *' is not a valid cron expression: the hour field has '24'; "
            "use a number from 0 to 23",
        ),
        (
            "0 0 0 * *",
            "'0 0 0 * *' is not a valid cron expression: the day-of-month field has '0'; "
            "use a number from 1 to 31",
        ),
        (
            "0 0 32 * *",
            "'0 0 32 * *' is not a valid cron expression: the day-of-month field has '32'; "
            "use a number from 1 to 31",
        ),
        (
            "0 0 * 0 *",
            "'0 0 * 0 *' is not a valid cron expression: the month field has '0'; "
            "use a number from 1 to 12 or a name",
        ),
        (
            "0 0 * 13 *",
            "'0 0 * 13 *' is not a valid cron expression: the month field has '13'; "
            "use a number from 1 to 12 or a name",
        ),
        (
            "0 0 * * 8",
            "'0 0 * * 8' is not a valid cron expression: the day-of-week field has '8'; "
            "use a number from 0 to 7 or a name",
        ),
        (
            "0 0 * * 005",
            "'0 0 * * 005' is not a valid cron expression: the day-of-week field has '005'; "
            "use a number from 0 to 7 or a name",
        ),
        (
            "0 0 * foo *",
            "'0 0 * foo *' is not a valid cron expression: the month field has 'foo'; "
            "use a number from 1 to 12 or a name",
        ),
        (
            "0 0 * * mon-bar",
            "'0 0 * * mon-bar' is not a valid cron expression: the day-of-week field has "
            "'bar'; use a number from 0 to 7 or a name",
        ),
        (
            "0 0 * * jan",
            "'0 0 * * jan' is not a valid cron expression: the day-of-week field has 'jan'; "
            "use a number from 0 to 7 or a name",
        ),
        (
            "30-10 * * * *",
            "'30-10 * * * *' is not a valid cron expression: the minute range '30-10' is "
            "reversed; write the lower value first",
        ),
        (
            "0 0 * * fri-mon",
            "'0 0 * * fri-mon' is not a valid cron expression: the day-of-week range "
            "'fri-mon' is reversed; write the lower value first",
        ),
        (
            "*/0 * * * *",
            "'*/0 * * * *' is not a valid cron expression: the minute step 0 is not "
            "between 1 and 59",
        ),
        (
            "*/60 * * * *",
            "'*/60 * * * *' is not a valid cron expression: the minute step 60 is not "
            "between 1 and 59",
        ),
        (
            "0 */24 * * *",
            "'0 */24 * * *' is not a valid cron expression: the hour step 24 is not "
            "between 1 and 23",
        ),
        (
            "0 0 */31 * *",
            "'0 0 */31 * *' is not a valid cron expression: the day-of-month step 31 is not "
            "between 1 and 30",
        ),
        (
            "0 0 * * */8",
            "'0 0 * * */8' is not a valid cron expression: the day-of-week step 8 is not "
            "between 1 and 7",
        ),
        (
            "1-2-3 * * * *",
            "'1-2-3 * * * *' is not a valid cron expression: the minute field has '1-2-3'",
        ),
        (
            "0 0 1,,2 * *",
            "'0 0 1,,2 * *' is not a valid cron expression: the day-of-month field has ''",
        ),
        (
            "0 0 L-5 * *",
            "'0 0 L-5 * *' is not a valid cron expression: the day-of-month field has 'L'; "
            "use a number from 1 to 31",
        ),
    ],
)
def test_a_field_refusal_is_the_whole_sentence(expression: str, message: str) -> None:
    assert refusal(expression) == message
