"""A complete Threadline event subscriber: a durable JetStream consumer that survives restarts.

It keeps, per case, the last revision it applied (in a small JSON state file), so a redelivered event
is recognised and skipped: JetStream delivers at least once, this makes the effect exactly once.
Run it with a NATS URL carrying subscriber credentials (`subscriberNatsUrl` in the data dir's
credentials.json, written by `threadline up`):

    THREADLINE_NATS_URL=nats://subscriber:…@127.0.0.1:45495 python docs/examples/subscriber.py --name my-dashboard

Stop it with Ctrl-C; start it again with the same --name and it continues where it stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from pathlib import Path

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="durable consumer name: one per subscriber")
    parser.add_argument("--case", help="only this case's events")
    parser.add_argument("--state", type=Path, help="state file (default: ./<name>.state.json)")
    parser.add_argument("--exit-when-idle", type=float, help="exit after this many quiet seconds")
    args = parser.parse_args()

    prefix = os.environ.get("THREADLINE_NATS_PREFIX", "threadline")
    stream = f"{prefix.upper().replace('-', '_')}_EVENTS"
    subject = f"{prefix}.events.case.{args.case}.>" if args.case else f"{prefix}.events.>"
    state_file = args.state or Path(f"{args.name}.state.json")
    applied: dict[str, int] = json.loads(state_file.read_text()) if state_file.exists() else {}

    connection = await nats.connect(os.environ.get("THREADLINE_NATS_URL", "nats://127.0.0.1:4222"))
    js = connection.jetstream()
    # The subscriber owns its durable consumer: it starts at the first event, then resumes where it acked.
    await js.add_consumer(stream, ConsumerConfig(
        durable_name=args.name, filter_subject=subject, deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT, ack_wait=30, max_deliver=-1))
    subscription = await js.pull_subscribe_bind(args.name, stream=stream)

    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    quiet = 0.0
    while not stop.is_set():
        try:
            messages = await subscription.fetch(32, timeout=1)
        except (TimeoutError, nats.errors.TimeoutError):
            quiet += 1
            if args.exit_when_idle and quiet >= args.exit_when_idle:
                break
            continue
        quiet = 0.0
        for message in messages:
            event = json.loads(message.data)
            if event["type"] == "threadline.ledger.changed":
                case_id, revision = event["data"]["caseId"], event["revision"]
                if revision <= applied.get(case_id, 0):
                    await message.ack()  # already applied: a redelivery
                    continue
                # ... act on the change here: update a dashboard, index the new claims, alert ...
                print(json.dumps({"case": case_id, "revision": revision, "summary": event["data"]["summary"],
                                  "seq": message.metadata.sequence.stream}), flush=True)
                applied[case_id] = revision
                state_file.write_text(json.dumps(applied))  # record the effect before acknowledging
            await message.ack()
    await connection.close()


if __name__ == "__main__":
    asyncio.run(main())
