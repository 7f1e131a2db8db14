"""The search index, kept by the projection: rows written per change, rebuilt per case from the ledger.

A ledger change adds the rows of the records it adds and marks those it supersedes or retires; a staged
proposal adds its pending items, a decision drops the items it decided (accepted ones arrive as ledger
records with the same revision). Each statement also moves the counts of the case's words (the stems its
texts hold, which similar spellings are matched against), so a change costs the size of the change. A row's text
is indexed without its accents (its `plain` column), so that a rebuild and this upkeep index the same words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from shared import search_text
from shared.kinds import KINDS

CANONICAL, PENDING, RETIRED = "canonical", "pending", "retired"
_ADDED = (("sourcesAdded", "source"), ("claimsAdded", "claim"), ("relationsAdded", "relation"),
          ("groupsAdded", "group"))
_CHUNK = 2000


@dataclass(frozen=True)
class IndexRow:
    kind: str
    record_id: str
    proposal_id: str
    status: str
    headline: str
    body: str
    dup_key: str | None

    @classmethod
    def of(cls, kind: str, payload: Mapping[str, Any], status: str = CANONICAL, proposal_id: str = "") -> IndexRow:
        record_id = payload.get("groupId") if kind == "group" else payload.get("id")
        return cls(kind, str(record_id), proposal_id, status, search_text.headline(kind, payload),
                   search_text.body(kind, payload), search_text.duplicate_key(kind, payload))


def pending_rows(proposal_id: str, proposal_kind: str, items: Iterable[Mapping[str, Any]]) -> list[IndexRow]:
    """The rows of a proposal's pending items (a verdict patch: its claim)."""
    kind = KINDS[proposal_kind]
    return [IndexRow.of(kind.record, kind.record_payload(dict(item)), PENDING, proposal_id) for item in items]


def change_rows(changes: Mapping[str, Any]) -> list[IndexRow]:
    return [IndexRow.of(kind, record) for key, kind in _ADDED for record in changes.get(key, [])]


# The words a statement's rows add (sign +1) or take away (-1), counted per case into search_words.
_MOVE_WORDS = """
INSERT INTO search_words (case_id, word, n)
SELECT case_id, word, {sign} * count(*) FROM {rows}, unnest(tsvector_to_array(tsv)) AS word
GROUP BY case_id, word ORDER BY case_id, word
ON CONFLICT (case_id, word) DO UPDATE SET n = search_words.n + excluded.n
"""
_ADD = """
WITH added AS (
  INSERT INTO search_records (case_id, kind, record_id, proposal_id, status, headline, body, plain, dup_key)
  SELECT * FROM unnest(CAST(:case_ids AS text[]), CAST(:kinds AS text[]), CAST(:ids AS text[]),
                       CAST(:proposals AS text[]), CAST(:statuses AS text[]), CAST(:headlines AS text[]),
                       CAST(:bodies AS text[]), CAST(:plains AS text[]), CAST(:dup_keys AS text[]))
  ON CONFLICT DO NOTHING
  RETURNING case_id, tsv)
""" + _MOVE_WORDS.format(sign=1, rows="added")
_DROP = """
WITH dropped AS (
  DELETE FROM search_records r
  USING unnest(CAST(:kinds AS text[]), CAST(:ids AS text[]), CAST(:proposals AS text[])) AS k(kind, record_id, proposal_id)
  WHERE r.case_id = :case_id AND r.kind = k.kind AND r.record_id = k.record_id AND r.proposal_id = k.proposal_id
  RETURNING r.case_id, r.tsv)
""" + _MOVE_WORDS.format(sign=-1, rows="dropped")
_RETIRE = """
UPDATE search_records SET status = 'retired'
FROM unnest(CAST(:kinds AS text[]), CAST(:ids AS text[])) AS k(kind, record_id)
WHERE case_id = :case_id AND search_records.kind = k.kind AND search_records.record_id = k.record_id
  AND proposal_id = ''
"""

# What a rebuild reads: every record the ledger ever held (as change events carry them), and pending items.
_LEDGER_RECORDS = """
SELECT 'source' AS kind, status, jsonb_build_object('id', source_id, 'title', title, 'publisher', publisher,
  'authority', authority, 'evidenceText', evidence_text, 'provenanceNote', provenance_note, 'url', url) AS payload
FROM sources WHERE case_id = :case_id
UNION ALL
SELECT 'claim', status, jsonb_build_object('id', claim_id, 'text', text, 'transformationNote', transformation_note,
  'proposalRationale', proposal_rationale) FROM claims WHERE case_id = :case_id
UNION ALL
SELECT 'relation', status, jsonb_build_object('id', relation_id, 'rationale', rationale, 'type', type,
  'sourceClaimId', source_claim_id, 'targetClaimId', target_claim_id) FROM relations WHERE case_id = :case_id
UNION ALL
SELECT 'group', status, jsonb_build_object('groupId', group_id, 'label', label, 'rationale', rationale)
FROM merge_groups WHERE case_id = :case_id
"""
_PENDING_ITEMS = """
SELECT p.case_id, p.proposal_id::text, p.kind, i.payload FROM proposals p JOIN proposal_items i USING (proposal_id)
WHERE {which}
  AND NOT EXISTS (SELECT 1 FROM closed_proposals c WHERE c.proposal_id = p.proposal_id)
  AND NOT EXISTS (SELECT 1 FROM item_decisions d WHERE d.proposal_id = i.proposal_id AND d.item_id = i.item_id)
ORDER BY p.proposal_id, i.position
"""
_OF_CASE = "p.case_id = :case_id"
_OF_PROPOSALS = ("(p.case_id, p.proposal_id) IN (SELECT * FROM unnest(CAST(:case_ids AS text[]), "
                 "CAST(:proposal_ids AS uuid[])))")


class SqlSearchIndex:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def add(self, case_id: str, rows: Sequence[IndexRow]) -> None:
        await self.add_to_cases([(case_id, row) for row in rows])

    async def add_to_cases(self, rows: Sequence[tuple[str, IndexRow]]) -> None:
        """Rows of any number of cases, each with its case id: one statement per chunk, whatever the cases."""
        for start in range(0, len(rows), _CHUNK):
            chunk = rows[start:start + _CHUNK]
            await self.connection.execute(text(_ADD), {
                "case_ids": [c for c, _ in chunk], "kinds": [r.kind for _, r in chunk],
                "ids": [r.record_id for _, r in chunk], "proposals": [r.proposal_id for _, r in chunk],
                "statuses": [r.status for _, r in chunk], "headlines": [r.headline for _, r in chunk],
                "bodies": [r.body for _, r in chunk], "plains": [search_text.plain(r.body) for _, r in chunk],
                "dup_keys": [r.dup_key for _, r in chunk]})

    async def drop(self, case_id: str, keys: Sequence[tuple[str, str, str]]) -> None:
        """Drop rows by (kind, record id, proposal id)."""
        if keys:
            await self.connection.execute(text(_DROP), {
                "case_id": case_id, "kinds": [k for k, _, _ in keys], "ids": [i for _, i, _ in keys],
                "proposals": [p for _, _, p in keys]})

    async def retire(self, case_id: str, records: Sequence[tuple[str, str]]) -> None:
        if records:
            await self.connection.execute(text(_RETIRE), {
                "case_id": case_id, "kinds": [k for k, _ in records], "ids": [i for _, i in records]})

    async def apply_change(self, case_id: str, changes: Mapping[str, Any]) -> None:
        """A ledger change: the records it adds, and those it supersedes or retires."""
        ended = [(r["record"], r["id"]) for key in ("superseded", "retired") for r in changes.get(key, [])]
        await self.retire(case_id, ended)
        await self.add(case_id, change_rows(changes))

    async def stage(self, case_id: str, proposal_id: str) -> None:
        """A staged proposal: its items still undecided, as pending rows."""
        await self.stage_many([(case_id, proposal_id)])

    async def stage_many(self, staged: Sequence[tuple[str, str]]) -> None:
        """Staged proposals (case id, proposal id) of any cases: their undecided items read in one query
        and added in one statement, so a batch of proposals costs about as many round trips as one."""
        if not staged:
            return
        result = await self.connection.execute(text(_PENDING_ITEMS.format(which=_OF_PROPOSALS)), {
            "case_ids": [c for c, _ in staged], "proposal_ids": [p for _, p in staged]})
        await self.add_to_cases([(case_id, r) for case_id, p, kind, item in result
                                 for r in pending_rows(p, kind, [item])])

    async def decide(self, case_id: str, proposal_id: str, item_ids: Iterable[str]) -> None:
        """A decision: its items are pending no more (accepted ones come as ledger records)."""
        result = await self.connection.execute(text(
            "SELECT kind, record_id FROM search_records WHERE case_id = :case_id AND proposal_id = :proposal_id "
            "AND record_id = ANY(CAST(:ids AS text[]))"), {"case_id": case_id, "proposal_id": proposal_id,
                                                            "ids": list(item_ids)})
        await self.drop(case_id, [(kind, record_id, proposal_id) for kind, record_id in result])

    async def rebuild(self, case_id: str) -> None:
        """Every row of the case again, from the ledger and the pending proposals."""
        for table in ("search_records", "search_words"):
            await self.connection.execute(text(f"DELETE FROM {table} WHERE case_id = :case_id"), {"case_id": case_id})
        ledger = await self.connection.execute(text(_LEDGER_RECORDS), {"case_id": case_id})
        rows = [IndexRow.of(kind, payload, CANONICAL if status == "active" else RETIRED)
                for kind, status, payload in ledger]
        pending = await self.connection.execute(text(_PENDING_ITEMS.format(which=_OF_CASE)), {"case_id": case_id})
        rows += [r for _, p, kind, item in pending for r in pending_rows(p, kind, [item])]
        await self.add(case_id, rows)
