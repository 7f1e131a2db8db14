"""The AsyncAPI 3.0 document of every NATS subject: the services' commands and the change events."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from shared import version
from shared.command_contracts import command_requests
from shared.deadlines import SENT_AT, TIMEOUT
from shared.events import DATA_SCHEMAS, EventType
from shared.settings import Settings
from shared.subjects import OWNER, Subjects, event_suffix

REF = "#/components/schemas/{model}"

ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string", "description": "Machine-readable reason, e.g. stale_revision, not_found."},
        "message": {"type": "string"},
        "field": {"type": "string", "description": "The argument at fault, as a path (sources[0].url)."},
        "hint": {"type": "string", "description": "How to fix the call."},
        "details": {"type": "object"},
    },
}

DEADLINE_HEADERS = {
    SENT_AT: {"type": "string", "description": "When the caller sent the request: Unix epoch seconds, to the "
                                             "millisecond (1765119024.123)."},
    TIMEOUT: {"type": "string", "description": "How many seconds from then the caller waits (10). A request its "
                                             "caller has stopped waiting for is not handled, and answered "
                                             "`unavailable` (to an inbox nobody reads); a request without these "
                                             "headers is always handled."},
}

REPLY_SCHEMA = {
    "description": "Every command replies with exactly one of `result` or `error`.",
    "oneOf": [
        {"type": "object", "required": ["result"], "properties": {"result": {}}},
        {"type": "object", "required": ["error"], "properties": {"error": {"$ref": REF.format(model="Error")}}},
    ],
}


def _envelope(event_type: EventType, data_ref: str, aggregate: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "CloudEvents 1.0, structured JSON mode.",
        "required": ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"],
        "properties": {
            "specversion": {"const": "1.0"},
            "id": {"type": "string", "format": "uuid", "description": "Unique; also the Nats-Msg-Id header."},
            "source": {"type": "string", "description": "/threadline/<service>"},
            "type": {"const": event_type.value},
            "subject": {"type": "string", "description": f"{aggregate}/<id>"},
            "time": {"type": "string", "format": "date-time"},
            "datacontenttype": {"const": "application/json"},
            "revision": {"type": "integer", "description": "The case's (or thesis's) revision after the change."},
            "correlationid": {"type": "string", "description": "The correlation id of the call that caused it."},
            "traceparent": {"type": "string", "description": "W3C trace context of that call."},
            "data": {"$ref": data_ref},
        },
    }


def _schemas(models: list[type[BaseModel]]) -> tuple[dict[Any, dict[str, Any]], dict[str, Any]]:
    refs, definitions = models_json_schema(
        [(model, "validation") for model in models], by_alias=True, ref_template=REF
    )
    return refs, definitions.get("$defs", {})


def document(settings: Settings) -> dict[str, Any]:
    subjects = Subjects(settings.nats_prefix)
    requests = command_requests()
    event_models = list(dict.fromkeys(DATA_SCHEMAS.values()))
    refs, schemas = _schemas([*requests.values(), *event_models])
    schemas["Error"] = ERROR_SCHEMA
    schemas["Reply"] = REPLY_SCHEMA
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {
        "Reply": {"name": "Reply", "payload": {"$ref": REF.format(model="Reply")}},
    }
    for command, model in requests.items():
        name = f"{command.value}Request"
        messages[name] = {
            "name": name,
            "title": f"{command.value} request",
            "headers": {"type": "object", "properties": {
                "correlation_id": {"type": "string"}, "traceparent": {"type": "string"}, **DEADLINE_HEADERS}},
            "payload": refs[(model, "validation")],
        }
        channel = f"cmd.{command.value}"
        channels[channel] = {
            "address": subjects.command(command),
            "description": f"Request/reply, answered by one {OWNER[command].value} replica "
                           f"(queue group {subjects.queue(OWNER[command])}).",
            "messages": {name: {"$ref": f"#/components/messages/{name}"}},
        }
        channels[f"{channel}.reply"] = {
            "address": None,
            "description": "The requester's inbox.",
            "messages": {"Reply": {"$ref": "#/components/messages/Reply"}},
        }
        operations[command.value] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"{OWNER[command].value}: {command.value.replace('_', ' ')}",
            "messages": [{"$ref": f"#/channels/{channel}/messages/{name}"}],
            "reply": {"channel": {"$ref": f"#/channels/{channel}.reply"},
                      "messages": [{"$ref": f"#/channels/{channel}.reply/messages/Reply"}]},
        }
    for event_type, model in DATA_SCHEMAS.items():
        company = event_type.value.startswith("threadline.thesis")
        aggregate = "company" if company else "case"
        if event_type.value.startswith("threadline.webhook"):
            aggregate = "webhook"
        name = "".join(part.capitalize() for part in event_suffix(event_type.value).split("."))
        messages[name] = {
            "name": name,
            "title": event_type.value,
            "summary": (model.__doc__ or "").strip(),
            "headers": {"type": "object", "properties": {
                "Nats-Msg-Id": {"type": "string", "description": "The event id (JetStream de-duplication)."},
                "ce-type": {"type": "string"}, "ce-revision": {"type": "string"},
                "correlation_id": {"type": "string"}, "traceparent": {"type": "string"}}},
            "payload": _envelope(event_type, refs[(model, "validation")]["$ref"], aggregate),
        }
        channel = f"events.{event_suffix(event_type.value)}"
        key = f"{aggregate}Id"
        address = {"case": subjects.case_event, "company": subjects.company_event,
                   "webhook": subjects.webhook_event}[aggregate](f"{{{key}}}", event_type.value)
        channels[channel] = {
            "address": address,
            "description": f"Stream {settings.stream_name}. Per {aggregate}, in "
                           f"{'publication' if aggregate == 'webhook' else 'revision'} order.",
            "parameters": {key: {"description": f"The {aggregate} id."}},
            "messages": {name: {"$ref": f"#/components/messages/{name}"}},
        }
        operations[f"publish{name}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"Published by the outbox relay after the change committed: {event_type.value}",
            "messages": [{"$ref": f"#/channels/{channel}/messages/{name}"}],
        }
    nats = urlparse(settings.nats_url or "nats://127.0.0.1:4222")
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Threadline",
            "version": version(),
            "description": (
                "Commands (request/reply, one queue group per service) and change events (JetStream stream "
                f"{settings.stream_name}, subjects {subjects.events_wildcard}). Events are CloudEvents 1.0 JSON; "
                "see docs/subscribers.md for ordering, delivery and resuming."
            ),
        },
        "defaultContentType": "application/json",
        # Host and port only: the URL may carry credentials, and this document is public.
        "servers": {"nats": {"host": f"{nats.hostname or '127.0.0.1'}:{nats.port or 4222}", "protocol": "nats"}},
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }
