"""A time zone field finds a zone by its city; only exact IANA names are zones."""

from __future__ import annotations

import pytest

from app.scheduling.zones import iana_zone_names, zone_by_city


@pytest.mark.parametrize(
    ("typed", "zone"),
    [
        ("berlin", "Europe/Berlin"),
        ("New York", "America/New_York"),
        ("new_york", "America/New_York"),
        ("  Tokyo ", "Asia/Tokyo"),
        ("europe/berlin", "Europe/Berlin"),
        ("utc", "UTC"),
        ("Europe/Berlin", "Europe/Berlin"),
    ],
)
def test_a_city_or_a_name_in_any_case_finds_its_zone(typed: str, zone: str) -> None:
    assert zone_by_city(typed) == zone


@pytest.mark.parametrize("typed", ["Berlinn", "Eastern", "Indianapolis", "", "x" * 200])
def test_what_names_no_zone_or_several_is_left_for_the_zone_rule_to_refuse(typed: str) -> None:
    """ "Eastern" is only an old alias's city; two zones are named Indianapolis."""
    assert zone_by_city(typed) == typed


def test_every_city_found_is_a_zone() -> None:
    for name in iana_zone_names():
        assert zone_by_city(name) == name
        assert zone_by_city(name.rsplit("/", 1)[-1]) in iana_zone_names() | {
            name.rsplit("/", 1)[-1]
        }
