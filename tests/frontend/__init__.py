"""Frontend tests against eager PyTorch."""
