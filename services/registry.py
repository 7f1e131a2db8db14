"""Where each backend service's process entry point lives."""

from __future__ import annotations

import importlib
from types import ModuleType

from shared.subjects import Service

APP_MODULES = {
    Service.STAGING: "services.staging.app",
    Service.REVIEW: "services.review.app",
    Service.THESIS_DELTA: "services.thesis_delta.app",
    Service.PROJECTION: "services.projection.app",
    Service.RELAY: "services.relay.app",
    Service.WEBHOOKS: "services.webhooks.app",
}


def app_module(service: Service) -> ModuleType:
    """The module with `SERVICE`, `build_router`, `BACKGROUND` and `main(settings)` for a backend service."""
    return importlib.import_module(APP_MODULES[service])
