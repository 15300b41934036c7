"""Layer ``optim``: the optimizer contract and parameters, samplers, the pieces optimizer
families share, plugin hooks and the registry.

Imports only :mod:`crfopt.core` and :mod:`crfopt.kernels`.
"""
