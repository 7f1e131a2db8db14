"""Exports of a case's ledger as of a revision, streamed page by page: W3C PROV-O (JSON-LD, Turtle),
nanopublications (TriG), AIF (JSON)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

from services.gateway.exports import rdf
from services.gateway.exports.aif import aif_json
from services.gateway.exports.nanopub import trig
from services.gateway.exports.prov import Provenance
from services.gateway.exports.records import Iris, LedgerPages

Format = Literal["prov-jsonld", "prov-turtle", "nanopub-trig", "aif-json"]
CHUNK = 64 * 1024  # bytes gathered before a write: one write per record would cost more than the record


async def _turtle(pages: LedgerPages, iris: Iris) -> AsyncIterator[str]:
    yield rdf.prefixes()
    async for item in Provenance(pages, iris).nodes():
        yield rdf.turtle(item)


async def _jsonld(pages: LedgerPages, iris: Iris) -> AsyncIterator[str]:
    yield rdf.jsonld_head()
    first = True
    async for item in Provenance(pages, iris).nodes():
        yield rdf.jsonld(item, first)
        first = False
    yield rdf.JSONLD_TAIL


async def _aif(pages: LedgerPages, iris: Iris) -> AsyncIterator[str]:
    async for text in aif_json(pages):
        yield text


@dataclass(frozen=True)
class Writer:
    media_type: str
    extension: str
    write: Callable[[LedgerPages, Iris], AsyncIterator[str]]


FORMATS: dict[str, Writer] = {
    "prov-jsonld": Writer("application/ld+json", "jsonld", _jsonld),
    "prov-turtle": Writer("text/turtle", "ttl", _turtle),
    "nanopub-trig": Writer("application/trig", "trig", trig),
    "aif-json": Writer("application/json", "json", _aif),
}


async def chunks(texts: AsyncIterator[str], size: int = CHUNK) -> AsyncIterator[bytes]:
    """The texts as UTF-8, gathered into writes of about `size` bytes."""
    gathered: list[bytes] = []
    length = 0
    async for text in texts:
        data = text.encode()
        gathered.append(data)
        length += len(data)
        if length >= size:
            yield b"".join(gathered)
            gathered, length = [], 0
    if gathered:
        yield b"".join(gathered)
