"""The command line, driven in-process with click's runner."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from crfopt.apps.cli import main, parse_sets


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


@pytest.mark.parametrize("command", sorted(main.commands))
def test_every_command_documents_its_exit_codes(command):
    res = CliRunner().invoke(main, [command, "--help"])
    assert res.exit_code == 0, res.output
    text = res.output[res.output.index("Exit codes:") :]
    for code in ("0    success", "1    ", "2    usage or input error", "130  interrupted"):
        assert code in text, (command, text)


def test_ctrl_c_exits_130_in_every_command(tmp_path, monkeypatch):
    """Click's own default for KeyboardInterrupt is 1; scripts are promised 130."""
    import crfopt.bench.report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(crfopt.bench.report, "make_report", interrupted)
    res = CliRunner().invoke(main, ["report", str(tmp_path), "--out", str(tmp_path / "r")])
    assert res.exit_code == 130, res.output
    assert "interrupted" in res.output
