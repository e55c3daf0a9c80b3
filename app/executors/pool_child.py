"""`python -m app.executors.pool_child`: a process-pool child running jobs one by one.

It imports the handler modules named on its command line, writes a "ready" frame, then
reads framed JSON requests on stdin and writes one framed JSON reply per request on
stdout, after log frames while the handler runs (see `prepare_job_child` and
`app.executors.protocol`). It exits at end of stdin, or is killed by the worker
(timeout, cancel) together with its process group, or kills its group itself once the
worker is gone.
"""

from __future__ import annotations

import json
import sys

from app.core.launcher import end_descendants
from app.core.logs import json_lines_in_child
from app.executors.child_setup import prepare_job_child, send_reply
from app.executors.framing import encode_frame, read_frame_blocking, write_frame
from app.executors.protocol import encode_reply, serve_request
from app.handlers import HandlerModuleError, default_registry, load_modules


def main(handler_modules: list[str]) -> int:
    json_lines_in_child("job-child")  # first: what goes wrong from here is one JSON line
    requests, replies = prepare_job_child()
    try:
        load_modules(handler_modules)
    except HandlerModuleError as exc:
        write_frame(replies, json.dumps({"ready": False, "error": str(exc)}).encode())
        return 1
    write_frame(replies, json.dumps({"ready": True}).encode())
    while (frame := read_frame_blocking(requests)) is not None:
        request = json.loads(frame)
        outcome = serve_request(request, default_registry, lambda m: write_frame(replies, m))
        end_descendants()  # the run has ended: so has everything it started
        sys.stdout.flush()
        reply = encode_frame(encode_reply(outcome))
        if not send_reply(replies, reply, request.get("run_id"), request.get("attempt")):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
