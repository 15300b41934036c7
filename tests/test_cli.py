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


def test_resolve_sets_splits_problem_and_optimizer_names():
    from crfopt.apps.cli import resolve_sets

    problems, optimizers = resolve_sets(
        ["synthetic.n=5", "sdca.sub_precision=0.1", "synthetic.seed=2"],
        problems=["synthetic"],
        optimizers=["sdca", "lbfgs"],
    )
    assert problems == {"synthetic": {"n": 5, "seed": 2}}
    assert optimizers == {"sdca": {"sub_precision": 0.1}}


def test_resolve_sets_rejects_names_the_command_does_not_use():
    import click

    from crfopt.apps.cli import resolve_sets

    with pytest.raises(click.BadParameter) as info:
        resolve_sets(["sdca.x=1", "synthetic.n=3"], problems=["synthetic"], optimizers=["lbfgs"])
    text = info.value.format_message()
    assert "unknown name(s) sdca" in text and "synthetic, lbfgs" in text


@pytest.mark.parametrize("command", ["optimum", "info"])
def test_set_with_an_unknown_name_is_a_usage_error_naming_the_valid_ones(
    command, tmp_path, monkeypatch
):
    """`optimum` used to drop `--set` names other than the problem's without a word."""
    monkeypatch.setenv("CRFOPT_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(main, [command, "--problem", "synthetic", "--set", "synthetc.n=20"])
    assert res.exit_code == 2, res.output
    assert "unknown name(s) synthetc" in res.output and "applies to synthetic" in res.output
    assert not (tmp_path / "cache").exists()  # nothing was computed


def test_compare_set_with_an_unknown_name_names_the_valid_ones(tmp_path):
    res = CliRunner().invoke(
        main,
        ["compare", "--problem", "synthetic", "--optimizers", "lbfgs,sdca[seed_dual=0]",
         "--set", "sgd.step_size=1", "--out", str(tmp_path / "r"), "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "unknown name(s) sgd" in res.output and "synthetic, lbfgs, sdca" in res.output
    assert not (tmp_path / "r").exists()


def test_the_cli_is_a_package_with_one_module_per_command_family():
    import crfopt.apps.cli as cli

    owners = {name: cmd.callback.__module__ for name, cmd in main.commands.items()}
    assert owners == {
        "list": "crfopt.apps.cli.problems",
        "info": "crfopt.apps.cli.problems",
        "optimum": "crfopt.apps.cli.problems",
        "fetch": "crfopt.apps.cli.problems",
        "compile": "crfopt.apps.cli.kernels",
        "compare": "crfopt.apps.cli.compare",
        "report": "crfopt.apps.cli.compare",
        "train": "crfopt.apps.cli.models",
        "tag": "crfopt.apps.cli.models",
        "evaluate": "crfopt.apps.cli.models",
    }
    assert cli.main is main
