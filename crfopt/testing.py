"""``crfopt.testing``: the conformance suite for optimizer plugins, under its public name.

The implementation lives in :mod:`crfopt.bench.conformance` (it runs optimizers under
budgets, so it belongs to the bench layer); this module *is* that module.
"""

import sys

from crfopt.bench import conformance

sys.modules[__name__] = conformance
