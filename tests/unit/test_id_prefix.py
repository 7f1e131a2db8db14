"""Ids named by their first characters: the range a prefix covers, and the one id it names."""

from __future__ import annotations

import pytest

from shared.errors import InvalidArgument, NotFound
from shared.id_prefix import full_uuid, resolve, the_one, uuid_range

ID = "f8208a12-3c4d-4e5f-8a6b-7c8d9e0f1a2b"


def test_a_prefix_covers_the_uuids_that_start_with_it_and_nothing_else():
    assert uuid_range("f8208a12") == ("f8208a12-0000-0000-0000-000000000000", "f8208a12-ffff-ffff-ffff-ffffffffffff")
    assert uuid_range("F8208A12-3") == ("f8208a12-3000-0000-0000-000000000000", "f8208a12-3fff-ffff-ffff-ffffffffffff")
    low, high = uuid_range(ID)
    assert low == high == ID
    for impossible in ("", "f820-8a12", "f8208a12x", "g", ID + "0", "../etc"):
        assert uuid_range(impossible) is None, impossible
    assert uuid_range("f8208a12-") == ("f8208a12-0000-0000-0000-000000000000", "f8208a12-ffff-ffff-ffff-ffffffffffff")


def test_a_whole_id_is_taken_as_it_is_and_a_prefix_names_one_id_or_is_refused():
    assert full_uuid(ID.upper()) == ID and full_uuid(ID[:8]) is None and full_uuid("x" * 36) is None
    hint = "list them"
    assert the_one("f8208a12", [ID], what="proposal", field="proposalId", hint=hint) == ID
    other = "f8208a12-0000-4000-8000-000000000000"
    with pytest.raises(InvalidArgument) as several:
        the_one("f8208a12", [other, ID], what="proposal", field="proposalId", hint=hint)
    assert several.value.message == f"'f8208a12' is the start of several proposal ids: {other}, {ID}"
    assert several.value.field == "proposalId" and "more of the id" in several.value.hint
    with pytest.raises(NotFound) as none:
        the_one("f8208a13", [], what="proposal", field="proposalId", hint=hint)
    assert (none.value.field, none.value.hint) == ("proposalId", hint)


async def test_resolve_names_the_whole_id_and_refuses_what_no_id_can_start_with_as_the_caller_words_it():
    asked: list[tuple[str, str, int]] = []

    async def ids_between(low: str, high: str, limit: int) -> list[str]:
        asked.append((low, high, limit))
        return [i for i in (ID,) if low <= i <= high][:limit]

    named = {"what": "delta", "field": "operationId", "hint": "list them"}
    assert await resolve(ID.upper(), ids_between, **named) == ID and asked == [], "a whole id needs no lookup"
    assert await resolve(ID[:8], ids_between, **named) == ID
    with pytest.raises(NotFound) as plain:
        await resolve("0000000x", ids_between, **named)
    assert (plain.value.message, plain.value.field, plain.value.hint) == ("there is no delta '0000000x'",
                                                                           "operationId", "list them")
    with pytest.raises(NotFound) as worded:
        await resolve("0000000x", ids_between, **named, missing="there is no delta 0000000x")
    assert worded.value.message == "there is no delta 0000000x" and len(asked) == 1
