"""Ctrl-C during a simulation: SIGINT held back while an engine call is in flight and
delivered between calls, so an interrupted run leaves the state of its last whole chunk."""

from __future__ import annotations

import signal
import threading


class HeldInterrupts:
    """SIGINT (Ctrl-C) held back while an engine call is in flight, and handed to the
    handler it was meant for by `deliver`, between calls. Raised anywhere else, the
    KeyboardInterrupt could land after the engine took the state (its buffers are donated)
    and before the simulator stored the new one, losing both; and the interpreter runs a
    Python handler only between engine calls anyway. Only the main thread receives signals
    and may set handlers; elsewhere, or when SIGINT is ignored or kills the process, nothing
    changes."""

    def __init__(self):
        self.handler = None  # the handler SIGINT had, while it is held back
        self.held = None  # (signum, frame) of a SIGINT not yet delivered

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if callable(handler):  # not SIG_IGN, SIG_DFL, or set outside Python (None)
                self.handler = handler
                signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame):
        self.held = (signum, frame)

    def deliver(self):
        """Run the original handler for a held SIGINT (the default one raises
        KeyboardInterrupt)."""
        if self.held is not None:
            held, self.held = self.held, None
            self.handler(*held)

    def __exit__(self, *exc):
        if self.handler is not None:
            signal.signal(signal.SIGINT, self.handler)
            self.deliver()  # one that came after the last call
