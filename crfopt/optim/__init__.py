"""Optimizer contract and shared optimizer pieces."""
