"""Layer ``data``: raw files and their sources, readers, feature templates, corpus → problem,
and the featurization cache.

Imports only :mod:`crfopt.core` and :mod:`crfopt.kernels`. Dataset plugins use
:mod:`crfopt.data.sources`, :mod:`crfopt.data.readers` and :mod:`crfopt.data.corpus`.
"""
