"""What a record says, as search and duplicate detection read it: its searchable text and its normalised form.

One module for the projection (which indexes records), staging (which compares a staged item with them) and
the search bench, so that a record is read the same way everywhere. Payloads are the records as the ledger's
change events and proposal items carry them (camelCase keys); ledger rows are read into the same shape.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

SNIPPET_CHARS = 240  # a hit's snippet: the record's headline text, at most this long

# What each kind of record is searched by (its headline first: the snippet shows it).
_FIELDS: dict[str, tuple[str, ...]] = {
    "claim": ("text", "transformationNote", "proposalRationale"),
    "source": ("title", "publisher", "authority", "evidenceText", "provenanceNote"),
    "relation": ("rationale",),
    "group": ("label", "rationale"),
}


def body(kind: str, payload: Mapping[str, Any]) -> str:
    """Every searchable text of a record, one per line."""
    return "\n".join(str(payload[f]) for f in _FIELDS[kind] if payload.get(f))


def headline(kind: str, payload: Mapping[str, Any]) -> str:
    """The record's headline (a claim's text, a source's title, a relation's rationale, a group's label)."""
    first = str(payload.get(_FIELDS[kind][0]) or "")
    if kind == "relation":
        first = f"{payload.get('sourceClaimId')} {payload.get('type')} {payload.get('targetClaimId')}: {first}"
    return first[:SNIPPET_CHARS]


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


def _number(match: re.Match[str]) -> str:
    digits = match.group().replace(",", "")
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    return digits.lstrip("0") or "0"


# Letters Unicode does not decompose into a plain letter and an accent, spelt as typed on a plain keyboard.
_PLAIN_LETTERS = str.maketrans({"Ø": "O", "ø": "o", "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ð": "D", "ð": "d",
                                "Ħ": "H", "ħ": "h", "ı": "i", "ß": "ss", "ẞ": "SS", "Æ": "AE", "æ": "ae",
                                "Œ": "OE", "œ": "oe", "Þ": "TH", "þ": "th"})


# The accents of Latin, Greek and Cyrillic letters; the marks of other scripts (a kana's voicing mark) are letters'
# own, and Hangul syllables, which decompose into their parts, are composed again.
_DIACRITICS = re.compile("[\u0300-\u036f]")


def plain(text: str) -> str:
    """The text as full-text search indexes a record and reads a query: without the accents of its letters, and
    the letters that are not a plain letter with an accent spelt plainly too (Łódź → Lodz, Øresund → Oresund,
    Straße → Strasse), so that a word typed with or without its accents finds it written either way."""
    bare = _DIACRITICS.sub("", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", bare).translate(_PLAIN_LETTERS)


def normalise(text: str) -> str:
    """A claim's text as duplicates are compared: lowercase, without accents as search reads it (`plain`: Łódź as
    Lodz, but が is not か), numbers in one form (no thousands separators, no trailing decimal zeros, `%` as
    `percent`), punctuation stripped, spaces collapsed."""
    text = plain(text).lower().replace("%", " percent ")
    text = _NUMBER.sub(_number, text)
    text = _PUNCT.sub(" ", text.replace("_", " "))
    return _SPACE.sub(" ", text).strip()


# Query parameters that say how a reader arrived (campaign tags, click ids), never which page: a URL is the same
# page without them. Any `utm_*` parameter, and these names.
TRACKING_PARAMETERS = frozenset({"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "igshid", "_ga"})


def _tracking(parameter: str) -> bool:
    name = parameter.partition("=")[0].lower()
    return name.startswith("utm_") or name in TRACKING_PARAMETERS


def normalise_url(url: str) -> str:
    """A source's URL as duplicates are compared and the ledger keys it (`sources.url_key`): no scheme, `www.`,
    fragment, default port (80, 443) or trailing slash; the host lowercased, an IPv6 one in its brackets (so that
    `[::1]:8080` and `[::1:8080]` differ); the query without tracking parameters (`TRACKING_PARAMETERS`), the
    others sorted, as written. Spellings of one URL it does not unify — `+` and `%20`, `%2f` and `%2F`, an
    encoded letter and the letter — only miss a duplicate, never make two URLs one."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: no port to keep
        port = None
    if port and port not in (80, 443):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = "&".join(sorted(p for p in parts.query.split("&") if p and not _tracking(p)))
    return f"{host}{path}" + (f"?{query}" if query else "")


def duplicate_key(kind: str, payload: Mapping[str, Any]) -> str | None:
    """What a claim or a source is compared by (normalised text, normalised URL); None for other records."""
    if kind == "claim":
        return normalise(str(payload.get("text") or ""))
    if kind == "source":
        return normalise_url(str(payload.get("url") or ""))
    return None
