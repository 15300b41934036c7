"""Layer ``apps``: what users run — the CLI, training and tagging, model files and the
scikit-learn style estimator. Imports every layer below it.
"""
