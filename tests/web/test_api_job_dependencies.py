"""A job definition's services over the API, against a real database: create, read and
change them (a change of anything else keeps them), and refusals as 422 naming the field,
as the schema (the OpenAPI document's) says."""

from __future__ import annotations

from app.core.db import connect
from app.runs import breakers
from tests.helpers.api_client import api_as

JOB = {"name": "charge", "handler": "noop"}


def test_a_job_names_reads_and_changes_the_services_its_runs_call(db_url: str) -> None:
    with api_as(db_url, "editor") as api:
        made = api.post("/api/v1/jobs", json={**JOB, "dependencies": ["payments-api", "ledger"]})
        assert made.status_code == 201, made.text
        assert made.json()["job"]["dependencies"] == ["payments-api", "ledger"]
        assert api.get("/api/v1/jobs/charge").json()["dependencies"] == ["payments-api", "ledger"]
        listed = api.get("/api/v1/jobs").json()["jobs"]
        assert listed[0]["dependencies"] == ["payments-api", "ledger"]

        kept = api.patch("/api/v1/jobs/charge", json={"priority": 3})
        assert kept.status_code == 200, kept.text
        assert kept.json()["job"]["dependencies"] == ["payments-api", "ledger"]
        changed = api.patch("/api/v1/jobs/charge", json={"dependencies": ["  mail ", "mail"]})
        assert changed.status_code == 200, changed.text
        assert changed.json()["job"]["dependencies"] == ["mail"]
        assert (
            api.patch("/api/v1/jobs/charge", json={"dependencies": []}).json()["job"][
                "dependencies"
            ]
            == []
        )
    with connect(db_url, autocommit=True) as conn:
        assert sorted(b.name for b in breakers.overview(conn)) == ["ledger", "mail",
                                                                   "payments-api"]  # fmt: skip


def test_bad_services_are_422_naming_the_field(db_url: str) -> None:
    with api_as(db_url, "editor") as api:
        for body, message in [
            ({"dependencies": "payments-api"}, "should be a valid array"),
            ({"dependencies": [1]}, "should be a valid string"),
            ({"dependencies": [""]}, "at least 1 character"),
            ({"dependencies": ["a\nb"]}, "should match pattern"),
            ({"dependencies": [f"s{n}" for n in range(21)]}, "at most 20 items"),
        ]:
            refused = api.post("/api/v1/jobs", json={**JOB, **body})
            assert refused.status_code == 422, (body, refused.text)
            error = refused.json()["error"]
            assert error["field"] == "dependencies" or error["field"].startswith("dependencies"), (
                error
            )
            assert message in error["message"], (body, error)
        assert api.post("/api/v1/jobs", json=JOB).status_code == 201
        refused = api.patch("/api/v1/jobs/charge", json={"dependencies": None})
        assert refused.status_code == 422 and "dependencies" in refused.text
        paths = api.get("/api/v1/openapi.json").json()
        schemas = paths["components"]["schemas"]
        assert "dependencies" in schemas["JobIn"]["properties"]
        assert "dependencies" in schemas["JobChanges"]["properties"]
