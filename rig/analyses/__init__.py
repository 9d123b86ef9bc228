"""Analyses over several runs: compare, token-level divergence, accuracy under load."""
