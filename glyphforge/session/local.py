"""The ``local`` session: every task in this process, one after another."""
from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any

from glyphforge.session.base import Session, TaskError, failure_summary


class LocalSession(Session):
    """Run tasks serially in the calling process (debugging, tiny builds).

    A failing task raises `TaskError` chained to the original exception, so a
    debugger's post-mortem lands in the task itself.
    """

    kind = "local"

    @property
    def n_workers(self) -> int:
        return 1

    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[int, Any]]:
        for index, item in enumerate(items):
            try:
                result = fn(item)
            except Exception as exc:
                raise TaskError(index, traceback.format_exc(), failure_summary(exc)) from exc
            yield index, result
