"""``synthetic``: a CRF with a planted model, generated on the fly (no download).

The embedded default of every command and the workhorse of the tests; see
:func:`crfopt.make_synthetic` for the parameters.
"""

from __future__ import annotations

import crfopt


@crfopt.hookimpl
def crfopt_register_problems() -> list[crfopt.ProblemSpec]:
    return [
        crfopt.ProblemSpec(
            name="synthetic",
            load=crfopt.make_synthetic,
            defaults={
                "n": 200,
                "labels": 4,
                "attributes": 30,
                "length": 6.0,
                "density": 0.1,
                "dense": False,
                "seed": 0,
                "n_test": None,
                "lam": None,
                "bias": True,
                "scale": 1.0,
            },
            summary="planted-model CRF generated from a seed (sparse by default; dense=True)",
            reference="crfopt.make_synthetic",
            notes="Labels are exact samples of a random CRF; nothing is downloaded.",
        )
    ]
