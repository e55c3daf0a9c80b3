"""The DAG macro (templates/shared/_dag.html): names escaped, status in words as well as
colour, links, and a text list that says what the picture says."""

from __future__ import annotations

from app.dags.dag_layout import layout
from app.web.render import env


def _draw(**kwargs: object) -> str:
    macro = env.get_template("shared/_dag.html").module.dag  # type: ignore[attr-defined]
    return str(macro(**kwargs))


def test_names_are_escaped_and_statuses_written_out() -> None:
    evil = "<script>alert(1)</script>"
    picture = layout([evil, "load"], [(evil, "load")])
    html = _draw(
        layout=picture,
        status_of={evil: "completed", "load": "timed_out"},
        link_of={"load": "/runs/7"},
        id="t",
    )
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # boxes that are links make it a group: an image may not hold interactive parts
    assert 'role="group"' in html and 'aria-labelledby="t-title"' in html
    assert "2 steps in 2 levels" in html
    assert 'class="dag-node status-timed_out"' in html
    assert ">timed out</text>" in html  # in words inside the box
    legend = html.split('class="dag-legend"')[1].split("</ul>")[0]
    assert "completed" in legend and "timed out" in legend and "running" not in legend
    assert '<a href="/runs/7">load</a> — timed out — runs after &lt;script&gt;' in html
    assert html.count('marker-end="url(#t-arrow)"') == 1


def test_long_names_are_shortened_in_the_box_but_whole_in_the_list() -> None:
    name = "a-very-long-step-name-that-goes-on"
    html = _draw(layout=layout([name], []))
    assert ">a-very-long-step-na…</text>" in html
    assert f"<title>{name}</title>" in html
    assert f"<li>{name} — starts first</li>" in html
    assert "dag-legend" not in html  # no statuses, no legend


def test_wide_pictures_scroll_instead_of_shrinking() -> None:
    fan = layout(["r", *(f"f{i}" for i in range(8))], [("r", f"f{i}") for i in range(8)])
    assert "dag-wide" in _draw(layout=fan)
    assert "dag-wide" not in _draw(layout=layout(["a", "b"], [("a", "b")]))
