"""The fsspec callback through which an fsspec store's upload tells its progress (imported by an upload only: it
imports fsspec)."""
from __future__ import annotations

from collections.abc import Callable

from fsspec.callbacks import Callback

__all__ = ["SentCallback"]


class SentCallback(Callback):
    """Tells ``sent`` the bytes of each piece an upload sends."""

    def __init__(self, sent: Callable[[int], object]) -> None:
        super().__init__()
        self.sent = sent

    def relative_update(self, inc: int = 1) -> None:
        """Pass the bytes just sent on."""
        self.sent(inc)
