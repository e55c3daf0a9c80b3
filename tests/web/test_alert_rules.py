"""The shipped Prometheus alert rules load, have the shape Prometheus expects, and read only
metrics a real /metrics scrape exposes."""

from __future__ import annotations

import re

import yaml

from app.core.resources import ALERT_RULES
from tests.helpers.api_client import make_token, request

NEEDED = {"SundialScheduleLagOverSLO", "SundialDeadLettersGrowing", "SundialNoLiveWorker",
          "SundialTriggerWithoutLeader"}  # fmt: skip
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def rules() -> list[dict[str, object]]:
    document = yaml.safe_load(ALERT_RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_the_rules_have_the_shape_prometheus_expects() -> None:
    document = yaml.safe_load(ALERT_RULES.read_text())
    assert set(document) == {"groups"}
    for group in document["groups"]:
        assert isinstance(group["name"], str) and group["rules"]
    names = set()
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert isinstance(rule["alert"], str) and isinstance(rule["expr"], str)
        assert re.fullmatch(r"\d+[smh]", str(rule["for"])), rule["for"]
        assert isinstance(rule["labels"], dict) and "severity" in rule["labels"]
        assert isinstance(rule["annotations"], dict) and rule["annotations"]["summary"]
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule["expr"]
        names.add(rule["alert"])
    assert NEEDED <= names


def test_every_metric_the_rules_read_is_exposed(live_server: str, db_url: str) -> None:
    scrape = request(live_server, "GET", "/metrics", make_token(db_url, "viewer", "read"))
    assert scrape.status == 200
    exposed = set(re.findall(r"^# TYPE (\S+) ", scrape.body, re.MULTILINE))
    for rule in rules():
        for metric in re.findall(r"\bsundial_[a-z_]+", str(rule["expr"])):
            family = metric
            for suffix in HISTOGRAM_SUFFIXES:
                if metric.endswith(suffix) and metric.removesuffix(suffix) in exposed:
                    family = metric.removesuffix(suffix)
            assert family in exposed, f"{rule['alert']} reads {metric}, which /metrics lacks"
