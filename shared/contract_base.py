"""What every message contract is built from: the frozen base model, who is calling, and the scalar types
more than one contract module uses (shared/contracts.py, shared/webhook_contracts.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

SLUG_PATTERN = r"^[a-z][a-z0-9-]*$"
Slug = Annotated[str, StringConstraints(min_length=1, max_length=96, pattern=SLUG_PATTERN)]
Role = Literal["agent", "reviewer", "admin", "subscriber"]


def _storable(value: str) -> str:
    # PostgreSQL text cannot hold NUL: refuse it as bad input instead of failing to store it.
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "must not contain NUL characters (\\u0000)",
                                  {"hint": "remove the NUL characters"})
    return value


Storable = AfterValidator(_storable)


def web_url(max_length: int) -> Any:
    return Annotated[str, StringConstraints(min_length=8, max_length=max_length, pattern=r"^https?://"), Storable]


class Contract(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Actor(Contract):
    """Who is calling, as the gateway authenticated them."""

    name: str
    role: Role
    token_id: str | None = None
