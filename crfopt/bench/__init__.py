"""Layer ``bench``: running optimizers under budgets and comparing them — runner, problems by
name or path, grids and backends, results, reference optima, conformance suite, reports.

Imports :mod:`crfopt.optim`, :mod:`crfopt.core`, :mod:`crfopt.data`, :mod:`crfopt.kernels`.
"""
