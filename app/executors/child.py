"""`python -m app.executors.child`: run one job in a fresh process (the subprocess model).

Reads one JSON request on stdin and writes one JSON reply on stdout. The handler's own
prints go to stderr, so they cannot corrupt the reply. The worker starts this process as
the leader of a new session and kills the whole group on timeout or cancel.
"""

from __future__ import annotations

import json
import os
import sys

from app.executors.outcomes import failed
from app.executors.protocol import encode_reply, serve_request
from app.handlers import HandlerModuleError, default_registry, load_modules
from app.handlers.job_process import become_job_child
from app.jobs import Outcome


def main() -> int:
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # from now on, fd 1 (and print) writes to stderr
    become_job_child()
    request = json.loads(sys.stdin.buffer.read())
    outcome: Outcome
    try:
        load_modules(request.get("handler_modules") or ())
    except HandlerModuleError as exc:
        outcome = failed(str(exc))
    else:
        outcome = serve_request(request, default_registry)
    sys.stdout.flush()
    with os.fdopen(reply_fd, "wb") as reply:
        reply.write(encode_reply(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
