"""Errors the fabric raises: each names what is wrong and where (PE, color, task, symbol)."""


class FabricError(Exception):
    """Base class of every error the simulator raises on bad programs or bad runs."""


class BuildError(FabricError, ValueError):
    """A program cannot be lowered to tables (SRAM overflow, bad route, undefined name...)."""


class RunError(FabricError, RuntimeError):
    """A running program did something invalid (its report names the PEs)."""


class DeadlockError(RunError):
    """Work was pending but nothing moved for `deadlock_window` cycles."""

    def __init__(self, message: str, report):
        super().__init__(message)
        self.report = report


class CycleLimitError(RunError):
    """The cycle limit of `run` was reached before the fabric went quiet."""
