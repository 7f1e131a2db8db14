"""An event the relay could never publish is refused with its change, not left to block the stream."""

from __future__ import annotations

import pytest

from shared import outbox
from shared.errors import InvalidArgument
from shared.events import GuidanceAdded, Origin, case, new_event
from shared.subjects import Subjects


def guidance_event(text: str):
    data = GuidanceAdded(case_id="c", note_id="n", author="reviewer", text=text)
    return new_event(Origin(Subjects("t"), "review"), case("c"), data)


async def test_an_event_above_the_publishable_size_is_refused_before_anything_is_written():
    with pytest.raises(InvalidArgument) as refused:
        await outbox.append(None, [guidance_event("x" * outbox.MAX_EVENT_BYTES)])  # never reaches the database
    assert "threadline.guidance.added" in refused.value.message and "smaller steps" in refused.value.hint


def test_the_limit_leaves_room_under_the_nats_default_max_payload():
    assert outbox.MAX_EVENT_BYTES + 64 * 1024 < 1024 * 1024  # headers and envelope overhead fit too
