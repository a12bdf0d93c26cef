"""A long-running ``cep`` command (``cep stream`` without ``--once``) run in the test's own process, on the suite's
SparkSession, and stopped as a service manager stops it: SIGTERM, then the command's clean stop.

The command installs its SIGINT/SIGTERM handlers only in the main thread, so it runs there; the test's watching
(sending events, waiting for what it expects) runs in a helper thread, which sends the SIGTERM when it is done or
has failed. No child process, so no Spark driver JVM of its own to start (docs/testing.md).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from cep.cli import main

JOIN_SECONDS = 60  # the helper's last step after the command ended is a SIGTERM it no longer sends


def run_until_watched(argv: list[str], watch: Callable[[threading.Event], None]) -> int:
    """``main(argv)`` in this thread while ``watch(command_done)`` runs in a helper thread; when ``watch`` returns
    or raises, the command is sent SIGTERM (unless it has ended by itself). Returns the command's exit code;
    raises what ``watch`` raised. ``command_done`` is set once the command has returned (a ``watch`` that waits
    for something the command should produce checks it, to fail at once instead of at its deadline)."""
    assert threading.current_thread() is threading.main_thread(), "the command's signal handlers need the main thread"
    command_done = threading.Event()
    failures: list[BaseException] = []

    def helper() -> None:
        try:
            watch(command_done)
        except BaseException as failure:  # noqa: BLE001 - raised again in the test's thread below
            failures.append(failure)
        finally:
            if not command_done.is_set():
                os.kill(os.getpid(), signal.SIGTERM)  # the command's handler while it runs, else the no-op below

    # A SIGTERM that arrives after the command restored this handler is ignored, never the end of pytest.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    thread = threading.Thread(target=helper, name="cep-command-watch", daemon=True)
    try:
        thread.start()
        code = main(argv)
        command_done.set()
        thread.join(JOIN_SECONDS)
    finally:
        command_done.set()
        if not thread.is_alive():  # else it may still send its SIGTERM: the no-op handler stays
            signal.signal(signal.SIGTERM, previous)
    if failures:
        raise failures[0]
    return code
