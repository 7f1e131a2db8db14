"""Message contracts of the webhooks service's commands (beside shared/contracts.py, which lists every command's)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from shared.contract_base import Actor, Contract, Slug, web_url

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Uuid = Annotated[str, StringConstraints(min_length=36, max_length=36, pattern=UUID_PATTERN)]
# A webhook's id, or a unique start of it: the pages show 8 of its 36 characters.
WebhookId = Annotated[str, StringConstraints(min_length=1, max_length=36)]
# An event's id, or a unique start of it among the webhook's deliveries (the pages show 8 characters too).
EventId = Annotated[str, StringConstraints(min_length=1, max_length=36)]
EventTypeName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^threadline(\.[a-z]+)+$")]


class RegisterWebhook(Contract):
    """An admin registers a receiver for one case, one company or every event; `types` narrows it."""

    actor: Actor
    url: web_url(2000)
    case_id: Slug | None = None
    company_id: Uuid | None = None
    types: Annotated[list[EventTypeName], Field(max_length=20)] = []

    @field_validator("company_id")
    @classmethod
    def _one_scope(cls, company_id: str | None, info: ValidationInfo) -> str | None:
        if company_id is not None and info.data.get("case_id") is not None:
            raise PydanticCustomError(
                "one_scope", "a webhook follows one case or one company, not both",
                {"hint": "send caseId or companyId (or neither, for every event)"})
        return company_id


class ListWebhooks(Contract):
    actor: Actor


class WebhookRef(Contract):
    actor: Actor
    webhook_id: WebhookId


class ListDeliveries(Contract):
    """A webhook's delivery log, newest event first."""

    actor: Actor
    webhook_id: WebhookId
    status: Literal["pending", "delivered", "failed", "all"] = "all"
    limit: Annotated[int, Field(ge=1, le=500)] = 50


class Redeliver(Contract):
    actor: Actor
    webhook_id: WebhookId
    event_id: EventId
