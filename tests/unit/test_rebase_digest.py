"""A rebase digest names the ids of every kind of change a revision's log lists."""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel

from services.staging.domain import RECORD_ID_KEYS
from shared.events import LedgerChange


def _record_models(annotation: object) -> list[type[BaseModel]]:
    """The models a list field of LedgerChange holds (each member of a union)."""
    (item,) = typing.get_args(annotation)
    members = typing.get_args(item) if isinstance(item, types.UnionType) or typing.get_origin(item) is typing.Union \
        else (item,)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def test_every_kind_of_change_names_its_records_by_a_key_the_digest_reads():
    for kind, field in LedgerChange.model_fields.items():
        models = _record_models(field.annotation)
        assert models, kind
        for model in models:
            keys = {f.alias or name for name, f in model.model_fields.items()}
            keys |= {model.model_config["alias_generator"](name) for name in model.model_fields}
            assert keys & set(RECORD_ID_KEYS), (kind, model.__name__, sorted(keys))
