"""The scripted OpenAI-compatible model of the tests, served on the compose network (docker/smoke.sh).

Runs in a container of the Stash image with the repository's testkit/ mounted
read-only under /opt/smoke/testkit; listens on 0.0.0.0:8000 and prints one line per
chat request (the stage it answered), so the smoke can see that a run called the model.
"""

from __future__ import annotations

import signal
import sys
import threading

from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel


class LoggedModel(ScriptedModel):
    def __call__(self, request):  # type: ignore[no-untyped-def]
        reply = super().__call__(request)
        print(f"chat request answered; calls so far: {dict(self.calls)}", flush=True)
        return reply


def main() -> None:
    server = ScriptedOpenAI(LoggedModel(), bind=("0.0.0.0", 8000)).start()
    print("scripted model listening on 0.0.0.0:8000", flush=True)
    stop = threading.Event()
    # PID 1 gets no default signal handling: stop on SIGTERM (docker stop) ourselves
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
