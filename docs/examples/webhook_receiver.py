"""A complete Threadline webhook receiver: checks every delivery's signature, applies each revision once.

Threadline signs each POST as Standard Webhooks says; `standardwebhooks` (pip install standardwebhooks)
checks the signature and the timestamp with the secret the registration answered. Deliveries come at
least once, so the receiver keeps, per case, the last revision it applied (in a small JSON state file)
and skips what it has seen. It answers at once; slow work belongs in a queue of your own.

    WEBHOOK_SECRET=whsec_… python docs/examples/webhook_receiver.py --port 8800

Register it first (the answer holds the secret, shown once):

    curl -X POST http://127.0.0.1:8700/api/v1/webhooks -H "Authorization: Bearer $ADMIN_TOKEN" \\
      -H 'Content-Type: application/json' -d '{"url": "http://127.0.0.1:8800/", "caseId": "demo-heat-pumps"}'
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standardwebhooks import Webhook, WebhookVerificationError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8800)
    parser.add_argument("--state", type=Path, default=Path("receiver.state.json"), help="applied revisions")
    parser.add_argument("--exit-when-idle", type=float, help="exit after this many quiet seconds")
    args = parser.parse_args()

    verifier = Webhook(os.environ["WEBHOOK_SECRET"])
    applied: dict[str, int] = json.loads(args.state.read_text()) if args.state.exists() else {}
    lock = threading.Lock()
    activity = threading.Event()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                event = verifier.verify(body, dict(self.headers))  # signature, and a timestamp within 5 min
            except WebhookVerificationError:
                self.send_response(401)  # not from Threadline (or replayed much later): refuse it
                self.end_headers()
                return
            activity.set()
            if event["type"] == "threadline.ledger.changed":
                case_id, revision = event["data"]["caseId"], event["revision"]
                with lock:
                    if revision > applied.get(case_id, 0):  # else: a redelivery, already applied
                        # ... act on the change here: update a dashboard, index the new claims, alert ...
                        print(json.dumps({"case": case_id, "revision": revision, "eventId": event["id"],
                                          "summary": event["data"]["summary"]}), flush=True)
                        applied[case_id] = revision
                        args.state.write_text(json.dumps(applied))  # record the effect before answering
            self.send_response(204)  # any 2xx: delivered; anything else is retried later, in order
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        while True:
            if not activity.wait(timeout=args.exit_when_idle) and args.exit_when_idle:
                break
            activity.clear()
    except KeyboardInterrupt:
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
