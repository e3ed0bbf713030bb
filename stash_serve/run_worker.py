"""A Dagster run worker that stops itself once its run is terminated.

The scale profile (docker/compose.scale.yml) starts each run in a container of its own
through the Docker socket, and only the daemon, which starts them, holds that socket:
the socket is root on the host, and the UI is the service people reach. Terminate in
the UI marks the run CANCELING in Dagster's storage and then asks the run launcher to
stop the worker; dagster-docker's launcher would stop the run's container through the
socket, which the UI's container no longer has, so that second step fails there
(the UI shows the error) and the run would go on to its end.

Dagster has the other half built in: a run worker can watch its own run and interrupt
itself once it is CANCELING or CANCELED (``dagster._core.execution.run_cancellation_thread``,
polling every ``run_monitoring.cancellation_thread_poll_interval_seconds``, 10 s by
default). The interrupt is the one Ctrl-C gives: steps stop, and the run ends CANCELED
("Execution of run ... was interrupted"). The open-source instance leaves that watch
off (``DagsterInstance.should_start_background_run_thread`` is False); this entry point
turns it on and runs the command the launcher gave, in this process, unchanged::

    python -m stash_serve.run_worker dagster api execute_run <json>

(``docker/scale/dagster.yaml`` makes it the run containers' entrypoint.) So Terminate
stops a running run within about ten seconds, without the socket; "Force termination"
marks the run CANCELED at once and the worker stops the same way. A command that is not
``dagster ... api ...`` is run as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def enable_cancellation_watch() -> None:
    """Make every Dagster instance of this process start the run-cancellation watch in a run worker."""
    from dagster._core.instance import DagsterInstance

    DagsterInstance.should_start_background_run_thread = property(lambda self: True)  # type: ignore[assignment,method-assign]


def dagster_arguments(argv: Sequence[str]) -> list[str] | None:
    """The ``api …`` arguments of a ``dagster api …`` or ``python -m dagster api …`` command, else None."""
    for index, word in enumerate(argv[:-1]):
        if os.path.basename(word) == "dagster" and argv[index + 1] == "api":
            return list(argv[index + 1:])
    return None


def main(argv: Sequence[str] | None = None) -> None:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        raise SystemExit("usage: python -m stash_serve.run_worker dagster api execute_run <json>")
    arguments = dagster_arguments(command)
    if arguments is None:
        os.execvp(command[0], command)
    enable_cancellation_watch()
    from dagster._cli import main as dagster_main

    sys.argv = ["dagster", *arguments]
    dagster_main()


if __name__ == "__main__":
    main()
