"""A complete reader of Threadline's HTTP event feed (Server-Sent Events), with nothing but the standard library.

It follows one case's events and keeps the `id:` of the last one it handled (a stream sequence) in a state
file; started again, it sends that id as `Last-Event-ID` and the feed continues right after it, so
nothing is missed and nothing comes twice. A dropped connection is resumed the same way.

    THREADLINE_URL=http://127.0.0.1:8700 THREADLINE_TOKEN=tl_subscriber_… \\
      python docs/examples/feed_reader.py --case demo-heat-pumps

(`threadline token create --role subscriber --name my-dashboard` gives a token that may only read events.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path


def events(url: str, token: str, last_id: str | None, idle: float | None):
    """Yield (id, type, event) from the feed until the connection ends or stays quiet for `idle` seconds."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    request = urllib.request.Request(url, headers=headers)
    # The feed sends a comment every 15 s, so a read timeout means the connection is gone (or, with
    # --exit-when-idle, that nothing happened for that long).
    with urllib.request.urlopen(request, timeout=idle or 60) as response:
        fields: dict[str, str] = {}
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":  # several data: lines make one value, joined by newlines
                    fields["data"] = f"{fields['data']}\n{value}" if "data" in fields else value
                elif name:  # a line starting with ':' is a comment (the feed's keep-alive)
                    fields[name] = value
                continue
            if "data" in fields:  # a blank line ends an event; comments (pings) carry no data
                yield fields.get("id"), fields.get("event"), json.loads(fields["data"])
            fields = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--state", type=Path, default=Path("feed.state"), help="the last event id handled")
    parser.add_argument("--exit-when-idle", type=float, help="exit after this many quiet seconds")
    args = parser.parse_args()

    base = os.environ.get("THREADLINE_URL", "http://127.0.0.1:8700").rstrip("/")
    url = f"{base}/api/v1/events?{urllib.parse.urlencode({'caseId': args.case})}"
    token = os.environ["THREADLINE_TOKEN"]
    while True:
        last_id = args.state.read_text().strip() if args.state.exists() else None
        try:
            for event_id, event_type, event in events(url, token, last_id, args.exit_when_idle):
                # ... act on the event here ...
                print(json.dumps({"id": int(event_id), "type": event_type, "revision": event.get("revision")}),
                      flush=True)
                args.state.write_text(event_id)  # record it only once it has been handled
        except TimeoutError:
            if args.exit_when_idle:
                return
        except (urllib.error.URLError, ConnectionError) as error:
            if isinstance(error, urllib.error.HTTPError) and error.code == 409:
                # The state's id is past the stream's end: the stream was made anew (a restore). Decide by hand:
                # delete the state file to read it from its first event (skip the revisions already applied).
                refusal = json.loads(error.read())["error"]
                sys.exit(f"the feed refused {args.state}: {refusal['message']}; {refusal.get('hint', '')}")
            print(f"feed unavailable ({error}); retrying", flush=True, file=sys.stderr)
            time.sleep(2)


if __name__ == "__main__":
    main()
