"""Message contract of the argument map's command (beside shared/contracts.py, which lists it)."""

from __future__ import annotations

from shared.contract_base import Actor, Contract, Slug
from shared.contracts import Revision


class CaseGraphRef(Contract):
    """The argument map of a case: whole while it is small, else the claims within two relations of
    `focus` (a claim of the case), of the verdict, or of its most connected claims; as of a revision when
    `as_of` is set."""

    actor: Actor
    case_id: Slug
    focus: Slug | None = None
    as_of: Revision | None = None  # the map as it stood at that revision
