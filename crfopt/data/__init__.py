"""Layer ``data``: text (or other raw files) → problem, once.

``sources`` (raw files: where, download, checksums) → ``readers`` (formats → corpus) →
``features`` (templates) with ``vocabulary`` (attribute → column: grown on training,
frozen after) → ``corpus`` (corpus → problem) → ``cache`` (built problems, keyed by the
files' checksums).

Imports only :mod:`crfopt.core` and :mod:`crfopt.kernels`. Dataset plugins use
:mod:`crfopt.data.sources`, :mod:`crfopt.data.readers`, :mod:`crfopt.data.corpus` and
:mod:`crfopt.data.cache`.
"""
