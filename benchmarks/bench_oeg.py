"""Seconds per epoch of OEG and the SG baselines against one full oracle pass, same run.

Single-threaded, after one untimed epoch (OEG's first epoch is its trial-heavy one).
``oeg[linear_marginals=false]`` is the trial path before issue 47 (marginals as exp of the
log-marginals; plugins/oeg.py): equal to rounding, more expensive.
"""

from __future__ import annotations

import pytest

from conftest import record_epochs_vs_full_pass

VARIANTS = ["oeg", "oeg[linear_marginals=false]", "sg", "asg", "adagrad"]


@pytest.mark.parametrize("name", ["ocr", "conll2000"])
def test_oeg_epoch(name, recorder):
    record_epochs_vs_full_pass(recorder, "OEG / SG", name, VARIANTS)
