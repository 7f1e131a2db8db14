"""Search a case: an exact or prefix id first, then full-text matches (English stemming), then similar spellings.

Finds the hits in the projection's search index (shared/db/search_tables.py) and, for the gap filter, its unresolved
view, never by scanning the ledger; then reads, by key and for the page's hits only, the case's revision and the
grounding of its claims from the ledger's `cases`, `claim_sources` and `sources` (shared/grounding.py) and the
sources a pending claim cites from staging's `proposals` and `proposal_items`. The query `*` lists every record the
filters keep, by id. Full text is matched by PostgreSQL's `websearch_to_tsquery`, which takes any text (quotes, `-`,
`or`, stray `'&|!:*()`) without a parser error. Records are indexed and queries searched without accents, so that a
word typed either way finds it written either way ("Zurich" finds Zürich, "héat" heat) while snippets keep the
record's own text; similar spellings replace each word of the query by the case's indexed stems that resemble it
(pg_trgm), and a record matches when it holds one of them for every word. Ranked, ten hits a page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from services.projection.ports import ProjectionUnitOfWork
from shared import cursors, ledger, search_text
from shared.contracts import ToolRequest
from shared.errors import InvalidArgument, NotFound
from shared.grounding import grounding_for, grounding_of_citations
from shared.kinds import KINDS as KINDS_OF_ITEM
from shared.search_contracts import EVERYTHING, MAX_CURSOR, PAGE, CaseSearch, SearchWorkspaceArgs

KINDS = ("source", "claim", "relation", "group")
STATUSES = {"canonical": ("canonical",), "pending": ("pending",), "retired": ("retired",),
            "any": ("canonical", "pending", "retired")}
FUZZY_WORDS = 8  # the query's words looked up for similar spellings, at most
FUZZY_CANDIDATES = 4  # the indexed stems each may stand for
FUZZY_FLOOR = 0.3  # the least trigram similarity of a stem to a misspelled word
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# Each stem of the query and the case's indexed stems that stand for it (migration 0014's function).
_SIMILAR_WORDS = f"""
SELECT i, word, exact FROM threadline_similar_words(:case_id, :query, {FUZZY_FLOOR}, {FUZZY_WORDS}, {FUZZY_CANDIDATES})
"""
# With a gap, only the canonical claims the unresolved view (view_unresolved, kept by the projection from each change
# and rebuilt with the index) holds an item of that type for, or of any type.
_FILTER = """case_id = :case_id AND kind = ANY(CAST(:kinds AS text[])) AND status = ANY(CAST(:statuses AS text[]))
  AND (CAST(:gap AS text) IS NULL OR (kind = 'claim' AND proposal_id = '' AND EXISTS (
    SELECT 1 FROM view_unresolved u WHERE u.case_id = :case_id AND u.claim_id = search_records.record_id
      AND (CAST(:gap AS text) = 'any' OR u.type = CAST(:gap AS text)))))"""
_SEARCH = f"""
WITH hits AS (
  SELECT kind, record_id, proposal_id, status, headline, 0 AS tier,
         CASE WHEN record_id = :id THEN 2.0 ELSE 1.0 END AS score
  FROM search_records WHERE {_FILTER} AND :id <> '' AND record_id LIKE CAST(:id_prefix AS text) COLLATE "C"
  UNION ALL
  SELECT kind, record_id, proposal_id, status, headline, 0, 1.5  -- a claim's active relations, after the claim
  FROM search_records WHERE {_FILTER} AND :id <> '' AND kind = 'relation' AND proposal_id = '' AND record_id IN (
    SELECT relation_id FROM relations WHERE case_id = :case_id AND status = 'active'
      AND (source_claim_id = :id OR target_claim_id = :id))
  UNION ALL
  SELECT kind, record_id, proposal_id, status, headline, 1, ts_rank_cd(tsv, websearch_to_tsquery('english', :plain))
  FROM search_records WHERE {_FILTER} AND tsv @@ websearch_to_tsquery('english', :plain)
  UNION ALL
  SELECT kind, record_id, proposal_id, status, headline, 2, ts_rank_cd(tsv, CAST(:fuzzy AS tsquery))
  FROM search_records WHERE {_FILTER} AND tsv @@ CAST(:fuzzy AS tsquery)
),
best AS (
  SELECT DISTINCT ON (kind, record_id, proposal_id) * FROM hits
  ORDER BY kind, record_id, proposal_id, tier, score DESC)
SELECT kind, record_id, proposal_id, status, headline, tier, score, count(*) OVER () AS total
FROM best ORDER BY tier, score DESC, kind, record_id, proposal_id
LIMIT :limit OFFSET :offset
"""
# `*`: every record the filters keep, by id (then kind, then proposal), for an agent to list them all. Paged by
# keyset from the last hit of the page before (the cursor), so that a page reads a page's rows however far on it is,
# and counted once, on the first page (the cursor carries the count on).
_EVERYTHING = f"""
SELECT kind, record_id, proposal_id, status, headline, 3 AS tier, 1.0 AS score
FROM search_records WHERE {_FILTER}
ORDER BY record_id, kind, proposal_id
LIMIT :limit
"""
_EVERYTHING_AFTER = _EVERYTHING.replace("\nORDER BY", """
  AND record_id >= :after_id AND (record_id, kind, proposal_id) > (:after_id, :after_kind, :after_proposal)
ORDER BY""")
_COUNT_EVERYTHING = f"SELECT count(*) FROM search_records WHERE {_FILTER}"
MATCH = ("id", "text", "fuzzy", "all")


@dataclass(frozen=True)
class Position:
    """Where a `*` listing stopped: its last hit's key, how many hits it has listed, how many it counted at first."""

    key: tuple[str, str, str]  # record id, kind, proposal id
    seen: int
    total: int


@dataclass(frozen=True)
class Search:
    case_id: str
    query: str
    kinds: tuple[str, ...] = KINDS
    status: str = "canonical"
    offset: int = 0  # a ranked search's hits before the page
    gap: str | None = None
    after: Position | None = None  # a `*` listing's page starts after it

    def filters(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "kinds": list(self.kinds), "statuses": list(STATUSES[self.status]),
                "gap": self.gap}

    def fingerprint(self) -> str:
        """What a listing's cursor is bound to: the case and the filters (a cursor of another listing is refused)."""
        return cursors.fingerprint([self.case_id, sorted(self.kinds), self.status, self.gap])


@dataclass(frozen=True)
class Page:
    hits: list[dict[str, Any]]
    total: int
    more: bool  # another page follows
    after: Position | None = None  # a `*` listing's next page starts after it


def encode_position(position: Position, fingerprint: str) -> str:
    return cursors.encode([*position.key, position.seen, position.total], fingerprint)


def _position(key: list[Any]) -> Position:
    record_id, kind, proposal_id, seen, total = key
    if not all(isinstance(v, str) for v in (record_id, kind, proposal_id)) or not all(
            isinstance(n, int) and n >= 0 for n in (seen, total)):
        raise ValueError(key)
    return Position((record_id, kind, proposal_id), seen, total)


def decode_position(cursor: str, fingerprint: str) -> Position:
    return cursors.decode(cursor, fingerprint, _position, of="search",
                          keep="keep kinds, status and gap as they were, or start again without cursor")


def paged(search: Search, cursor: int | str | None) -> Search:
    """The search at the page its cursor names: a ranked search's page number, a `*` listing's position."""
    if checked_query(search.query) == EVERYTHING:
        if isinstance(cursor, int):
            raise InvalidArgument("cursor: a * listing pages by the nextCursor it gave, not by a page number",
                                  field="cursor", hint="page on with the nextCursor of the previous page, or leave "
                                                       "cursor out for the first page")
        return replace(search, after=decode_position(cursor, search.fingerprint()) if cursor else None)
    if isinstance(cursor, str):
        raise InvalidArgument("cursor: a search of words or ids pages by number (the nextCursor it gave), not by a "
                              "* listing's position", field="cursor",
                              hint="page on with the nextCursor of the previous page, or leave cursor out")
    return replace(search, offset=((cursor or 1) - 1) * PAGE)


def _lexeme(word: str) -> str:
    """A stem quoted for a tsquery literal (quotes doubled, backslashes escaped)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def fuzzy_query(groups: dict[int, list[str]]) -> str | None:
    """Every word's group of similar stems (any of them) for every word the case has one for (all of them)."""
    parts = ["(" + " | ".join(_lexeme(w) for w in stems) + ")" for _, stems in sorted(groups.items()) if stems]
    return " & ".join(parts) or None


def checked_query(query: str) -> str:
    stripped = " ".join(query.split())
    if not stripped:
        raise InvalidArgument("query: give a word or an id to search for (it is blank)", field="query",
                              hint="search by an id, or by words of a record's text")
    return stripped


async def run(connection: AsyncConnection, search: Search, limit: int = PAGE) -> Page:
    """One page of hits, how many there are in all, and whether another page follows."""
    query = checked_query(search.query)
    if query == EVERYTHING:
        return await _listing(connection, search, limit)
    plain = search_text.plain(query)  # as the records' texts are indexed
    groups: dict[int, list[str]] = {}
    corrected = False  # a word the case does not hold, replaced by those spelled like it (or left out)
    for i, word, exact in await connection.execute(text(_SIMILAR_WORDS), {"case_id": search.case_id, "query": plain}):
        if word is not None:
            groups.setdefault(i, []).append(word)
        corrected |= not exact
    if not corrected:
        groups = {}  # every word is the case's own: similar spellings would find what full text found
    identifier = query.lower() if _ID.match(query.lower()) and len(query) <= 96 else ""
    return await _page(connection, search, _SEARCH, {
        **search.filters(), "plain": plain, "fuzzy": fuzzy_query(groups), "id": identifier,
        "id_prefix": identifier + "%", "limit": limit, "offset": search.offset})


def _hits(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"kind": r.kind, "id": r.record_id, "status": r.status, "score": round(float(r.score), 4),
             "match": MATCH[r.tier], "snippet": r.headline,
             **({"proposalId": r.proposal_id} if r.proposal_id else {})} for r in rows]


async def _listing(connection: AsyncConnection, search: Search, limit: int) -> Page:
    """A page of `*`: the records after the cursor's, one more read to tell whether another page follows."""
    after, params = search.after, {**search.filters(), "limit": limit + 1}
    if after:
        params.update(after_id=after.key[0], after_kind=after.key[1], after_proposal=after.key[2])
    rows = (await connection.execute(text(_EVERYTHING_AFTER if after else _EVERYTHING), params)).all()
    more, rows = len(rows) > limit, rows[:limit]
    seen = after.seen if after else 0
    if after:  # counted on the first page; at least what the listing has shown, if records came since
        total = max(after.total, seen + len(rows))
    elif more:
        total = int((await connection.execute(text(_COUNT_EVERYTHING), search.filters())).scalar_one())
    else:
        total = len(rows)
    last = rows[-1] if rows else None
    position = Position((last.record_id, last.kind, last.proposal_id), seen + len(rows), total) if more and last \
        else None
    return Page(_hits(rows), total, position is not None, position)


async def _page(connection: AsyncConnection, search: Search, sql: str, params: dict[str, Any]) -> Page:
    rows = (await connection.execute(text(sql), params)).all()
    total = rows[0].total if rows else await _count(connection, search, sql, params)
    return Page(_hits(rows), total, search.offset + len(rows) < total)


async def _count(connection: AsyncConnection, search: Search, sql: str, params: dict[str, Any]) -> int:
    """How many hits there are when a page past the end showed none (its `total` stays exact)."""
    if search.offset == 0:
        return 0
    counted = await connection.execute(text(f"SELECT count(*) FROM ({sql}) page"),
                                       {**params, "limit": MAX_CURSOR * PAGE, "offset": 0})
    return int(counted.scalar_one())


_PENDING_ITEMS = """
SELECT p.proposal_id::text, p.kind, i.payload FROM proposals p JOIN proposal_items i USING (proposal_id)
WHERE p.proposal_id = ANY(CAST(:proposals AS uuid[]))
"""


async def _cited_by_pending(connection: AsyncConnection, hits: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """{(proposal id, claim id): the source ids it cites} for the pending claims among the hits (their items read by
    their proposals' keys: a page's worth)."""
    wanted = {(h["proposalId"], h["id"]) for h in hits if h["kind"] == "claim" and h.get("proposalId")}
    if not wanted:
        return {}
    cited = {}
    for proposal_id, kind, payload in await connection.execute(
            text(_PENDING_ITEMS), {"proposals": sorted({p for p, _ in wanted})}):
        record = KINDS_OF_ITEM[kind].record_payload(payload)
        if (proposal_id, record.get("id")) in wanted:
            cited[(proposal_id, record["id"])] = list(record.get("sourceIds", []))
    return cited


def checked_gap(gap: str | None, kinds: tuple[str, ...], status: str) -> None:
    """A gap is a canonical claim's: refused with a status or kinds that leave no canonical claim to keep."""
    if gap is None:
        return
    if status not in ("canonical", "any"):
        raise InvalidArgument(f"gap: only canonical claims have gaps, and status {status!r} keeps none", field="gap",
                              hint="leave status out (canonical) or give status any, or leave gap out")
    if "claim" not in kinds:
        raise InvalidArgument(f"gap: only claims have gaps, and kinds ({', '.join(kinds)}) keep none", field="gap",
                              hint="add claim to kinds, or leave gap out")


async def _answer(uow: ProjectionUnitOfWork, case_id: str, query: str, kinds: list[str] | None, status: str,
                  cursor: int | str | None, gap: str | None = None) -> dict[str, Any]:
    checked_gap(gap, tuple(kinds or KINDS), status)
    search = paged(Search(case_id, query, tuple(kinds or KINDS), status, gap=gap), cursor)
    async with uow.read():
        connection = uow.search.connection
        revision = (await connection.execute(text("SELECT revision FROM cases WHERE case_id = :c"),
                                             {"c": case_id})).scalar_one_or_none()
        if revision is None:
            raise NotFound(f"there is no case {case_id!r}", field="caseId", hint="list cases first")
        found = await run(connection, search)
        hits, total = found.hits, found.total
        # Every claim a read returns carries its grounding (shared/grounding.py): the ledger's claims (canonical or
        # retired) from their sources, a pending claim from the sources its item cites.
        claims = [h["id"] for h in hits if h["kind"] == "claim" and not h.get("proposalId")]
        grounded = await grounding_for(connection, case_id, claims)
        pending = await grounding_of_citations(connection, case_id, await _cited_by_pending(connection, hits))
        gaps = await uow.views.open_types(case_id, claims) if gap else {}
    for hit in hits:
        if hit["kind"] != "claim":
            continue
        if hit.get("proposalId"):
            hit.update(pending.get((hit["proposalId"], hit["id"]), {}))
        else:
            hit.update(grounded.get(hit["id"], {}))
            hit.update({"gaps": gaps[hit["id"]]} if hit["id"] in gaps else {})
    page = cursor if isinstance(cursor, int) else 1
    answer: dict[str, Any] = {"caseId": case_id, "workspaceRevision": revision, "query": search.query,
                              "kinds": list(search.kinds), "status": status, **({"gap": gap} if gap else {}),
                              "hits": hits, "total": total}
    if found.after:
        answer["nextCursor"] = encode_position(found.after, search.fingerprint())
    elif found.more and page < MAX_CURSOR:
        answer["nextCursor"] = page + 1
    if not hits:
        answer["hint"] = (_nothing_found(search, gap) if total == 0
                          else f"this page is past the last one ({-(-total // PAGE)})")
    return answer


_OF_STATUS = {"canonical": "canonical ", "pending": "pending ", "retired": "retired or superseded ", "any": ""}


def _nothing_found(search: Search, gap: str | None) -> str:
    """What an empty answer means: for words, to change them; for a * listing, what the case has none of."""
    if checked_query(search.query) != EVERYTHING:
        return "no record matches: try fewer or other words, an id, or status=any"
    if gap:
        of_type = "" if gap == "any" else f" of type {gap}"
        return f"no canonical claim has a gap{of_type}: get_workspace scope=unresolved lists the case's gaps"
    record = " or ".join(search.kinds) + " record" if set(search.kinds) != set(KINDS) else "record"
    return f"the case has no {_OF_STATUS[search.status]}{record}" + (" yet" if search.status == "any" else "")


async def search_workspace(request: ToolRequest[SearchWorkspaceArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    args = request.args
    ledger.check_discovered(args.expected_case_id, request.discovered_case_id)
    return await _answer(uow, args.expected_case_id, args.query, args.kinds, args.status, args.cursor, args.gap)


async def case_search(cmd: CaseSearch, uow: ProjectionUnitOfWork) -> dict[str, Any]:
    return await _answer(uow, cmd.case_id, cmd.query, cmd.kinds, cmd.status, cmd.cursor, cmd.gap)
