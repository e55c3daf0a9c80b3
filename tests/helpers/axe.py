"""Accessibility checks in the browser with the vendored axe-core, and where screenshots go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE = Path(__file__).parents[1] / "e2e" / "vendor" / "axe-core" / "axe.min.js"


SHOTS = Path("/tmp/shots")


def violations(page: Any) -> list[str]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in result
        if v["impact"] in ("serious", "critical")
    ]


def violations_with_axe(page: Any) -> list[str]:
    """axe in a page opened without bypassing its CSP: the vendored file's text is
    evaluated through the browser's devtools protocol, which the page's CSP does not
    govern."""
    from tests.helpers.axe import AXE

    page.evaluate(AXE.read_text())
    result = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in result
        if v["impact"] in ("serious", "critical")
    ]
