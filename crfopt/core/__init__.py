"""Layer ``core``: the CRF problem (data, sizes, counted oracles), weight layout, duality.

Imports only :mod:`crfopt.kernels`; no I/O.
"""
