"""`python -m app.executors.child`: run one job in a fresh process (the subprocess model).

Reads one JSON request on stdin and writes framed log messages while the handler runs,
then one framed JSON reply, on stdout (see `prepare_job_child` and
`app.executors.protocol`). The worker starts this process as the leader of a new session and
kills the whole group on timeout or cancel; the child kills its group itself once the
worker is gone.
"""

from __future__ import annotations

import json
import os
import sys

from app.core.launcher import end_descendants
from app.core.logs import json_lines_in_child
from app.executors.child_setup import prepare_job_child, send_reply
from app.executors.framing import encode_frame, write_frame
from app.executors.outcomes import failed
from app.executors.protocol import encode_reply, serve_request
from app.handlers import HandlerModuleError, default_registry, load_modules
from app.handlers.jobs import Outcome


def main() -> int:
    json_lines_in_child("job-child")  # first: what goes wrong from here is one JSON line
    requests, reply_fd = prepare_job_child()
    with requests:
        request = json.loads(requests.read())
    outcome: Outcome
    try:
        load_modules(request.get("handler_modules") or ())
    except HandlerModuleError as exc:
        outcome = failed(str(exc))
    else:
        outcome = serve_request(request, default_registry, lambda m: write_frame(reply_fd, m))
    end_descendants()  # the run has ended: so has everything it started
    sys.stdout.flush()
    reply = encode_frame(encode_reply(outcome))
    sent = send_reply(reply_fd, reply, request.get("run_id"), request.get("attempt"))
    os.close(reply_fd)
    return 0 if sent else 1


if __name__ == "__main__":
    sys.exit(main())
