"""`python -m tests.readyz_probe URL`: GET URL/readyz on one kept-alive connection, every 5 ms, until stdin
closes; says `ready` once connected, then prints each probe's start (time.time()) and duration as one JSON
list.

A process of its own, as an orchestrator's probe is: what it measures is the gateway, not the test's own
event loop sending the calls the gateway is probed beside."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit

PAUSE = 0.005


def main() -> None:
    url = urlsplit(sys.argv[1])
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    connection.request("GET", "/readyz")
    connection.getresponse().read()
    print("ready", flush=True)  # connected: what follows times the gateway, not a start-up
    probes: list[tuple[float, float, int]] = []
    while not stop.is_set():
        started, clock = time.time(), time.perf_counter()
        connection.request("GET", "/readyz")
        response = connection.getresponse()
        response.read()
        probes.append((started, time.perf_counter() - clock, response.status))
        time.sleep(PAUSE)
    print(json.dumps(probes))


if __name__ == "__main__":
    main()
