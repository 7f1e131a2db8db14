"""The gateway's `kinds` parser, shared by the search API and the search page."""

from __future__ import annotations

import pytest

from services.gateway.search_api import KINDS_CHARS, search_kinds
from shared.errors import InvalidArgument


def test_kinds_are_read_comma_separated_and_repeated_without_duplicates():
    assert search_kinds(["claim, source", "claim", "group"]) == ["claim", "source", "group"]
    assert search_kinds(None) is None and search_kinds([" , "]) is None


def test_a_kinds_value_longer_than_its_bound_is_refused_naming_kinds_however_few_values_there_are():
    with pytest.raises(InvalidArgument) as refused:
        search_kinds(["claim," * 1000])
    assert refused.value.field == "kinds" and refused.value.message.startswith("kinds: ")
    assert f"at most {KINDS_CHARS}" in refused.value.message
    assert search_kinds(["claim," + " " * (KINDS_CHARS - 6)]) == ["claim"]


def test_an_unknown_kind_is_refused_naming_kinds():
    with pytest.raises(InvalidArgument) as refused:
        search_kinds(["claim,nope"])
    assert refused.value.field == "kinds" and "'nope'" in refused.value.message
