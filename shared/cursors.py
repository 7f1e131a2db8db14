"""Opaque cursors of keyset pages: the key of the last row a page showed, bound to what was asked (a fingerprint
of the case, the filters and the order), so that a cursor of another listing is refused instead of paging it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from shared.errors import InvalidArgument

Key = TypeVar("Key")
_PAGE_ON = "page on with the nextCursor of the previous page, or leave cursor out"


def fingerprint(asked: list[Any]) -> str:
    """What a cursor is bound to: a digest of the case, filters and order it was given for."""
    return hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]


def encode(key: list[Any], bound: str) -> str:
    raw = json.dumps([*key, bound], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str, bound: str, read: Callable[[list[Any]], Key], *, of: str, keep: str) -> Key:
    """The key `cursor` carries, as `read` makes it of the list encoded (raising ValueError or TypeError for a list
    it cannot read); refused naming cursor when it is not one `of` gave, or was given for other filters (`keep`
    says which to keep)."""
    try:
        *values, given = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        key = read(values)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidArgument(f"cursor: it is not one this {of} gave", field="cursor", hint=_PAGE_ON) from error
    if given != bound:
        raise InvalidArgument(f"cursor: it belongs to a {of} of another case or with other filters", field="cursor",
                              hint=keep)
    return key
