"""Kernel library tests against numpy and analytic cycle models."""
