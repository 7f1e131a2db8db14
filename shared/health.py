"""Evidence health: what a retirement leaves unsupported or weakened, and how independent evidence counts. Pure.

Support is computed, not asserted. A claim whose every cited source is retired is `unsupported`; the verdict
is `weakened` once any of its bases loses support (the basis relation ended with its claim, or the basis
claim became unsupported). Review applies `rerate` in the retirement's own transaction; the read side and
the argument map read the ratings it recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

ACTIVE = "active"
SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
WEAKENED = "weakened"
LOST_CAP = 20  # records named per rating; a rating names what took its support, bounded


@dataclass(frozen=True)
class Basis:
    """A direct edge into the verdict: the relation and the claim it runs from."""

    relation_id: str
    claim_id: str


@dataclass(frozen=True)
class Rating:
    """A claim or verdict re-rated: its health and the records whose retirement took its support."""

    claim_id: str
    health: str
    lost: tuple[tuple[str, str], ...]  # (record, id)

    def to_json(self) -> dict[str, object]:
        return {"claimId": self.claim_id, "health": self.health,
                "lost": [{"record": record, "id": record_id} for record, record_id in self.lost]}


def _bounded(lost: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(dict.fromkeys(lost))[:LOST_CAP]


def rerate(*, retired: Sequence[tuple[str, str]], citations: Mapping[str, Mapping[str, str]],
           verdict_id: str | None, bases: Sequence[Basis],
           current: Mapping[str, Sequence[tuple[str, str]]]) -> list[Rating]:
    """The ratings one retirement changes.

    `retired`: every (record, id) the step retired, links ended with a claim included. `citations`: per active
    claim citing a source retired now, the status of each source it cites (as they are after the step).
    `bases`: the active verdict's basis links, ended ones included. `current`: ratings recorded before
    (claim id → what it had lost), so that a verdict weakened again keeps naming what it lost first, and a
    verdict accepted on a claim that is already unsupported is weakened from the start (`retired` empty).
    """
    gone = set(retired)
    ratings: list[Rating] = []
    unsupported_now: dict[str, tuple[tuple[str, str], ...]] = {}
    for claim_id, cited in citations.items():
        if claim_id == verdict_id or claim_id in current or not cited:
            continue
        if all(status != ACTIVE for status in cited.values()):
            unsupported_now[claim_id] = _bounded(("source", s) for s in cited)
            ratings.append(Rating(claim_id, UNSUPPORTED, unsupported_now[claim_id]))
    if verdict_id is not None:
        lost: list[tuple[str, str]] = []
        for basis in bases:
            if ("relation", basis.relation_id) in gone:
                lost += [("claim", basis.claim_id), ("relation", basis.relation_id)]
            elif basis.claim_id in unsupported_now:
                lost += [("claim", basis.claim_id), *unsupported_now[basis.claim_id]]
            elif verdict_id not in current and basis.claim_id in current:  # a new verdict on an unsupported claim
                lost += [("claim", basis.claim_id), *current[basis.claim_id]]
        if lost:
            before = [(record, record_id) for record, record_id in current.get(verdict_id, ())]
            ratings.append(Rating(verdict_id, WEAKENED, _bounded([*before, *lost])))
    return ratings


def independent_origins(publishers: Iterable[str]) -> int:
    """Sources from the same publisher count once: how many independent origins the publishers amount to."""
    return len({" ".join(p.casefold().split()) for p in publishers if p.strip()})
