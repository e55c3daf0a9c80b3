"""The runs search as typed (`customer_id = 42 and order.region = eu`) -> containment
documents: numbers and words match their string too, quotes only the string, the result by
its prefix, and every mistake a sentence."""

from __future__ import annotations

import pytest

from app.core.errors import UsageError
from app.runs.run_search import HOW, MAX_CONDITIONS, Search, parse


def test_a_number_matches_the_number_and_the_same_text_as_a_string() -> None:
    assert parse("customer_id = 42") == Search(args=[{"customer_id": 42}, {"customer_id": "42"}])
    assert parse("  amount=-1.5 ").args == [{"amount": -1.5}, {"amount": "-1.5"}]
    assert parse("n = 1e3").args == [{"n": 1000.0}, {"n": "1e3"}]


def test_a_quoted_value_matches_only_the_string() -> None:
    assert parse('customer_id = "42"').args == [{"customer_id": "42"}]
    assert parse('name = "Tom and Jerry"').args == [{"name": "Tom and Jerry"}]
    assert parse(r'quote = "say \"hi\" = ok"').args == [{"quote": 'say "hi" = ok'}]


def test_text_is_a_string_as_typed_and_not_a_json_number_stays_text() -> None:
    assert parse("region = EU West").args == [{"region": "EU West"}]
    assert parse("code = 007").args == [{"code": "007"}]
    assert parse("big = 1e999").args == [{"big": "1e999"}]


def test_true_false_and_null_match_the_value_or_the_word() -> None:
    assert parse("urgent = true").args == [{"urgent": True}, {"urgent": "true"}]
    assert parse("note = NULL").args == [{"note": None}, {"note": "NULL"}]


def test_nested_fields_and_several_conditions_make_one_document_per_combination() -> None:
    assert parse("order.region = eu").args == [{"order": {"region": "eu"}}]
    found = parse("customer_id = 42 AND order.region = eu and order.lines = 3")
    assert found.args == [
        {"customer_id": 42, "order": {"region": "eu", "lines": 3}},
        {"customer_id": 42, "order": {"region": "eu", "lines": "3"}},
        {"customer_id": "42", "order": {"region": "eu", "lines": 3}},
        {"customer_id": "42", "order": {"region": "eu", "lines": "3"}},
    ]
    assert found.result == []


def test_the_result_is_searched_by_its_prefix_and_args_names_an_arg_called_result() -> None:
    assert parse("result.total = 3") == Search(result=[{"total": 3}, {"total": "3"}])
    assert parse("result = ok") == Search(result=["ok"])
    assert parse("args.result = ok") == Search(args=[{"result": "ok"}])
    both = parse("customer_id = c1 and result.status = sent")
    assert both == Search(args=[{"customer_id": "c1"}], result=[{"status": "sent"}])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", HOW),
        ("customer_id", HOW),
        ("= 42", HOW),
        ("customer_id =", HOW),
        ("customer_id = 42 and", HOW),
        ("customer id = 42", "is not a field"),
        ("order..region = eu", "is not a field"),
        ('name = "Tom', "missing its closing"),
        ('name = "a" b', "is not one quoted value"),
        ("a = 1 and a = 2", "a is named twice"),
        ("order = x and order.region = eu", "order is given a value and fields at once"),
        ("result = ok and result.total = 3", "as a whole once"),
        (" and ".join(f"k{n} = {n}" for n in range(MAX_CONDITIONS + 1)), "at most 5 conditions"),
        ("k = " + "x" * 600, "at most 500 characters"),
    ],
)
def test_a_search_that_cannot_be_read_is_a_sentence(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as raised:
        parse(text)
    assert raised.value.field == "search"
