"""``crfopt list optimizers [NAME]``: every parameter is discoverable (issue 21 item 4).

The truth is the registry's own declarations (``Param``: type, default, help) and a few
ranges written out by hand from the optimizers' sources.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from crfopt.apps.cli import main
from crfopt.apps.cli import options as cli_options
from crfopt.optim.registry import get_registry


@pytest.fixture
def wide(monkeypatch):
    """A console wide enough that no table row wraps: one parameter, one line."""
    monkeypatch.setattr(cli_options.console, "width", 400)


def _text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return "none" if v is None else str(v)


def _row(output: str, name: str) -> list[str]:
    """The cells of the first table row whose first cell is ``name``."""
    rows = _rows(output, name)
    if not rows:
        raise AssertionError(f"no row {name!r} in:\n{output}")
    return rows[0]


def _rows(output: str, name: str) -> list[list[str]]:
    """The cells of every table row whose first cell is ``name``."""
    rows = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells and cells[0] == name:
            rows.append(cells)
    return rows


def test_list_optimizers_name_shows_one_variant_in_full(wide):
    res = CliRunner().invoke(main, ["list", "optimizers", "sdca-gap"])
    assert res.exit_code == 0, res.output
    spec = get_registry().optimizer("sdca-gap")
    assert f"sdca-gap: {spec.summary}" in res.output
    assert f"reference: {spec.reference}" in res.output
    assert "capabilities: gap_estimate, has_dual, line_search, stochastic" in res.output
    for name, p in spec.parameters().items():
        assert _row(res.output, name)[1:3] == [p.type.__name__, _text(p.default)]
        assert _row(res.output, name)[4] == p.help
    # ranges and choices, written out from the declarations in plugins/sdca.py
    assert _row(res.output, "non_uniformity")[2:4] == ["0.8", "[0, 1]"]
    assert _row(res.output, "sampler")[3] == "importance | gap | gapimp | max"
    assert _row(res.output, "refresh_period")[3] == "≥ 1 or none"
    assert _row(res.output, "fixed_step")[2:4] == ["none", "[0, 1] or none"]
    # only that variant
    assert "lbfgs" not in res.output and "problems" not in res.output


def test_list_optimizers_shows_every_parameter_with_type_default_range_and_help(wide):
    runner = CliRunner()
    res = runner.invoke(main, ["list", "optimizers"])
    assert res.exit_code == 0, res.output
    reg = get_registry()
    # every parameter of every variant appears with its help line
    for spec in reg.optimizers.values():
        for name, p in spec.parameters().items():
            assert any(
                line.strip().strip("│").split("│")[0].strip().startswith(name)
                and p.help in line
                and f"│ {p.type.__name__}" in line
                for line in res.output.splitlines()
            ), (spec.name, name)
    # a family's parameter shared with one default, and one whose default differs
    assert _row(res.output, "step_size")[1:4] == ["float", "0.1", "≥ 0"]
    assert _row(res.output, "memory")[1:4] == ["int", "10", "≥ 1"]
    assert _row(res.output, "init_score")[2] == "10.0 (oeg, oeg-norp); 0.0 (oeg-c0)"
    # (the SG family's sg-nus has a non_uniformity of its own: one row per family table)
    assert ["0.5 (sag-nus-star, saga-nus)", "[0, 1]"] in [
        r[2:4] for r in _rows(res.output, "non_uniformity")
    ]
    # the same name declared differently in one family gets one row per declaration
    assert _row(res.output, "sampler (sdca, sdca-cyclic, sdca-perm)")[3] == (
        "uniform | permutation | cyclic"
    )
    # a second call (served from the listing cache) prints the same
    again = runner.invoke(main, ["list", "optimizers"])
    assert again.exit_code == 0 and again.output == res.output


def test_list_optimizers_with_an_unknown_name_lists_the_registered_ones():
    res = CliRunner().invoke(main, ["list", "optimizers", "sdca-gapp"])
    assert res.exit_code == 2
    assert "unknown optimizer 'sdca-gapp'" in res.output and "sdca-gap," in res.output
    res = CliRunner().invoke(main, ["list", "problems", "sdca-gap"])
    assert res.exit_code == 2 and "list optimizers NAME" in res.output
