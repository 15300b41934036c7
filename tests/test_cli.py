"""The command line, driven in-process with click's runner."""

from __future__ import annotations

from click.testing import CliRunner

from crfopt.cli import main, parse_sets


def test_info_synthetic():
    res = CliRunner().invoke(main, ["info", "--problem", "synthetic", "--set", "synthetic.n=37"])
    assert res.exit_code == 0, res.output
    assert "sequences n" in res.output and " 37 " in res.output
    assert "dual memory (float64)" in res.output


def test_info_unknown_problem_is_a_usage_error():
    res = CliRunner().invoke(main, ["info", "--problem", "nope"])
    assert res.exit_code == 2
    assert "Registered problems" in res.output


def test_info_unknown_parameter_lists_valid_ones():
    res = CliRunner().invoke(main, ["info", "--problem", "synthetic", "--set", "synthetic.nn=3"])
    assert res.exit_code == 2
    assert "valid parameters" in res.output


def test_parse_sets_types():
    out = parse_sets(["a.x=1", "a.y=0.5", "b-c.z=true", "b-c.s=gap", "a.n=none", "a.e=1e-3"])
    assert out == {"a": {"x": 1, "y": 0.5, "n": None, "e": 1e-3}, "b-c": {"z": True, "s": "gap"}}
