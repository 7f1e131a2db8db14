"""The reviewers' queue at scale: proposals filtered by kind, agent, words of their items and possible
duplicates, ordered by age and paged by a stable keyset cursor; and the "duplicate of X" decision, which
rejects an item naming the record it restates, in a note the agent reads in its guidance."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from services.review import views
from services.review.checks_view import with_staged_checks
from services.review.domain import StoredProposal
from services.review.duplicate_views import STILL_OPEN, with_possible_duplicates
from services.review.ports import ReviewUnitOfWork
from services.review.queue_repository import QueueQuery
from shared import cursors
from shared.contracts import Decide, ListProposals
from shared.errors import InvalidArgument
from shared.problems import Problem, bounded

MAX_WORDS = 8  # words of `q`, each of which must appear in the proposal's items
DUPLICABLE = {"claims": "claim", "sources": "source"}  # the proposals whose items can restate a record


def words_of(q: str | None) -> tuple[str, ...]:
    found = tuple(dict.fromkeys(w for w in (q or "").split() if w))
    if len(found) > MAX_WORDS:
        raise InvalidArgument(f"q has {len(found)} words; the queue matches at most {MAX_WORDS}", field="q",
                              hint="use fewer, more telling words (or the case search for long texts)")
    return found


def _fingerprint(cmd: ListProposals, words: tuple[str, ...], newest_first: bool) -> str:
    """What a cursor is bound to: the same status, filters and order (a cursor of another query is refused)."""
    return cursors.fingerprint([cmd.case_id, cmd.status, cmd.kind, cmd.agent, list(words), cmd.duplicates,
                                newest_first])


def encode_cursor(last: StoredProposal, fingerprint: str) -> str:
    return cursors.encode([last.created_at.isoformat(), last.proposal_id], fingerprint)


def _after(key: list[Any]) -> tuple[datetime, str]:
    at, proposal_id = key
    return datetime.fromisoformat(at), str(proposal_id)


def decode_cursor(cursor: str, fingerprint: str) -> tuple[datetime, str]:
    return cursors.decode(cursor, fingerprint, _after, of="queue",
                          keep="keep status, kind, agent, q, duplicates and sort as they were, or start again")


def plain_listing(cmd: ListProposals) -> bool:
    """Decided proposals asked for without filters, order or cursor: the most recently decided first."""
    return (cmd.status in ("accepted", "rejected", "decided") and cmd.sort is None and cmd.cursor is None
            and cmd.kind is None and cmd.agent is None and not cmd.q and not cmd.duplicates)


async def list_proposals(cmd: ListProposals, uow: ReviewUnitOfWork, found_case: dict[str, Any]) -> dict[str, Any]:
    """A page of the queue (in the unit of work `list_proposals` opened): pending oldest first by default,
    every other status newest staged first; `nextCursor` reads the next page of the same query."""
    words = words_of(cmd.q)
    newest_first = cmd.sort == "newest" if cmd.sort else cmd.status != "pending"
    fingerprint = _fingerprint(cmd, words, newest_first)
    after = decode_cursor(cmd.cursor, fingerprint) if cmd.cursor else None
    wanted = QueueQuery(case_id=cmd.case_id, status=cmd.status, limit=cmd.limit, newest_first=newest_first,
                        kind=cmd.kind, agent=cmd.agent, words=words, duplicates=cmd.duplicates, after=after)
    page = await uow.proposals.with_items(await uow.queue.page(wanted))
    more, page = len(page) > cmd.limit, page[: cmd.limit]
    decided = await uow.proposals.decisions_of([p.proposal_id for p in page])
    flagged = await uow.proposals.possible_duplicates(cmd.case_id, [p.proposal_id for p in page])
    checked = await uow.proposals.staged_checks([p.proposal_id for p in page])
    return {
        "caseId": cmd.case_id,
        "revision": found_case["revision"],
        "status": cmd.status,
        "sort": "newest" if newest_first else "oldest",
        "proposals": [with_staged_checks(with_possible_duplicates(
            views.proposal_view(p, decisions=decided.get(p.proposal_id, [])), flagged), checked) for p in page],
        "total": await uow.queue.count(wanted),  # on every page: how many the filters match in all
        "nextCursor": encode_cursor(page[-1], fingerprint) if more else None,
    }



# --- "a duplicate of X" -----------------------------------------------------------------------------


def check_duplicates(proposal: StoredProposal, cmd: Decide) -> None:
    """The `duplicates` of a decision, as far as the proposal alone can tell: items of a proposal of claims or
    sources, each listed once, decided one way, and not a duplicate of itself. Refuses naming every fault."""
    if cmd.duplicates and proposal.kind not in DUPLICABLE:
        raise InvalidArgument(f"the items of a {proposal.kind} proposal are not claims or sources",
                              field="duplicates[0].itemId", hint="reject them with reject and say why in note")
    problems = bounded(_duplicate_problems(proposal, cmd))
    if problems:
        raise InvalidArgument.of(problems)


def _duplicate_problems(proposal: StoredProposal, cmd: Decide) -> Iterator[Problem]:
    known = {item.item_id for item in proposal.items}
    listed: set[str] = set()
    for i, entry in enumerate(cmd.duplicates):
        item = f"duplicates[{i}].itemId"
        if entry.item_id not in known:
            yield Problem(item, f"{entry.item_id!r} is not an item of proposal {proposal.proposal_id}",
                          f"use the proposal's item ids: {', '.join(sorted(known))}")
        elif entry.item_id in listed:
            yield Problem(item, f"{entry.item_id!r} is listed twice", "name one record it duplicates")
        elif entry.item_id in cmd.accept or entry.item_id in cmd.reject:
            yield Problem(item, f"{entry.item_id!r} is also listed in "
                                f"{'accept' if entry.item_id in cmd.accept else 'reject'}",
                          "an item in duplicates is rejected as a duplicate: list it there only")
        if entry.of == entry.item_id:
            yield Problem(f"duplicates[{i}].of", f"{entry.item_id!r} cannot be a duplicate of itself",
                          "name the canonical or pending record it restates")
        listed.add(entry.item_id)


async def resolve_duplicates(cmd: Decide, proposal: StoredProposal, uow: ReviewUnitOfWork) -> tuple[list[str], str | None]:
    """Under the case lock: every `of` named is a canonical or pending record of the case (of the item's
    kind). Returns what the decision rejects and the note it stores, which names each record duplicated."""
    if not cmd.duplicates:
        return list(cmd.reject), cmd.note
    record = DUPLICABLE[proposal.kind]
    named = await uow.queue.records_named(proposal.case_id, record, [d.of for d in cmd.duplicates])
    parts, problems = [], []
    for i, entry in enumerate(cmd.duplicates):
        status = named.get(entry.of)
        if status not in STILL_OPEN:
            problem = f"is {status}" if status else "is neither canonical nor pending"
            problems.append(Problem(f"duplicates[{i}].of", f"the {record} {entry.of!r} {problem} in case "
                                    f"{proposal.case_id}", f"name a canonical or pending {record} of the case "
                                    "(search the case for it), or reject the item with reject and a note"))
        parts.append(f"{record} {entry.item_id} duplicates the {status} {record} {entry.of}")
    if problems:
        raise InvalidArgument.of(bounded(problems))
    said = "Rejected as a duplicate: " + "; ".join(parts) + "."
    note = f"{said} {cmd.note}" if cmd.note else said
    return list(cmd.reject) + [d.item_id for d in cmd.duplicates], note
