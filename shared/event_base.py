"""The base of every event's `data` schema (camelCase on the wire), beside shared/events.py so that the
schemas of one feature can live in their own module."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class EventData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)
