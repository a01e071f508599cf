"""A spinner line on stderr naming the agents at work: "⠋ developer-1, developer-2 working · 12s".

Thread-safe: parallel developers start and stop from their own threads. Shown only while
at least one agent works and only when stderr is a terminal; otherwise nothing is printed.
Never writes to stdout (it carries the `--json` document).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

__all__ = ["Activity"]


class Activity:
    """Which agents run, and for how long, as one live line on a terminal."""

    def __init__(
        self, console: Console | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from rich.console import Console
        from rich.spinner import Spinner

        self._console = console if console is not None else Console(stderr=True)
        self._clock = clock
        # _lock guards _running and is all the refresh thread takes (in _render);
        # _live_lock orders starting and stopping the display and is never held by it.
        # Live.stop joins the refresh thread, so it must run without _lock held.
        self._lock = threading.Lock()
        self._live_lock = threading.Lock()
        self._running: dict[str, float] = {}  # agent -> when it started, in start order
        self._spinner = Spinner("dots")
        self._live: Live | None = None

    def start(self, agent: str) -> None:
        with self._live_lock:
            with self._lock:
                self._running.setdefault(agent, self._clock())
            if self._live is not None:
                self._live.refresh()
            elif self._console.is_terminal:
                from rich.live import Live

                # stdout stays untouched; stderr writes while the line shows go above it.
                self._live = Live(
                    console=self._console,
                    get_renderable=self._render,
                    refresh_per_second=8,
                    transient=True,
                    redirect_stdout=False,
                    redirect_stderr=True,
                )
                self._live.start()

    def stop(self, agent: str) -> None:
        with self._live_lock:
            with self._lock:
                self._running.pop(agent, None)
                idle = not self._running
            if idle:
                self._hide()
            elif self._live is not None:
                self._live.refresh()

    def close(self) -> None:
        """Stop showing anything, whoever still runs (call it when the run ends)."""
        with self._live_lock:
            with self._lock:
                self._running.clear()
            self._hide()

    def text(self) -> str:
        """The line without its spinner: who works and for how long ("" when nobody does)."""
        with self._lock:
            if not self._running:
                return ""
            since = min(self._running.values())
            return f"{', '.join(self._running)} working · {_duration(self._clock() - since)}"

    def __enter__(self) -> Activity:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _render(self) -> Any:
        self._spinner.update(text=self.text())
        return self._spinner

    def _hide(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
