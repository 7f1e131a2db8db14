"""In-memory units of work: the services' use cases run against these in unit tests — no servers, no sleeps.

One `Store` stands for the database: a unit of work snapshots it on entry and puts the snapshot back
unless the use case commits, so a refused call leaves it exactly as it was, as a rolled-back
transaction would. Committed events land in `store.outbox`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from services.review.domain import Decision, StoredItem, StoredProposal
from services.review.ports import ReviewUnitOfWork
from services.staging.domain import Prior, Proposal, StageFacts
from services.staging.ports import REPLAYED, STORED, StagingUnitOfWork
from shared.events import Event, LedgerChanged, Origin
from shared.ledger import VERDICT, ClaimFact, LedgerFacts, Provenance, RecordHistory, References
from shared.subjects import Subjects
from shared.uow import UnitOfWork

ACTIVE = "active"


@dataclass
class Store:
    """Everything the fakes keep, as plain data (deep-copied for rollback)."""

    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (case, record, id)
    proposals: dict[str, StoredProposal] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # proposal id → request digest
    decisions: list[Decision] = field(default_factory=list)
    change_log: list[LedgerChanged] = field(default_factory=list)
    outbox: list[Event] = field(default_factory=list)
    clock: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))

    def add_case(self, case_id: str, revision: int = 0) -> None:
        self.cases[case_id] = {"case_id": case_id, "title": "t", "question": "q", "revision": revision,
                               "created_by": "tests", "created_at": self.clock}

    def add_record(self, case_id: str, record: str, record_id: str, **fields: Any) -> None:
        self.records[(case_id, record, record_id)] = {"status": ACTIVE, "revision": 0, "ended": None, **fields}

    def status(self, case_id: str, record: str, record_id: str) -> str | None:
        found = self.records.get((case_id, record, record_id))
        return found["status"] if found else None

    def events(self, event_type: str) -> list[dict[str, Any]]:
        return [e.envelope for e in self.outbox if e.event_type.value == event_type]


class FakeUnitOfWork(UnitOfWork):
    def __init__(self, store: Store, origin: Origin | None = None) -> None:
        super().__init__(origin or Origin(Subjects("fake"), "tests", correlation_id="corr-1"))
        self.store = store
        self._snapshot: dict[str, Any] | None = None

    def now(self) -> datetime:
        self.store.clock += timedelta(seconds=1)
        return self.store.clock

    async def _begin(self, read_only: bool = False) -> None:
        self._snapshot = copy.deepcopy({k: v for k, v in vars(self.store).items() if k != "outbox"})

    async def _commit(self, events: list[Event]) -> None:
        self.store.outbox.extend(events)
        self._snapshot = None

    async def _rollback(self) -> None:
        if self._snapshot is not None:
            vars(self.store).update(self._snapshot)
            self._snapshot = None


class FakeCases:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def pin(self, case_id: str) -> int | None:
        found = self.store.cases.get(case_id)
        return found["revision"] if found else None

    lock = pin

    async def bump(self, case_id: str) -> int:
        self.store.cases[case_id]["revision"] += 1
        return self.store.cases[case_id]["revision"]

    async def get(self, case_id: str) -> dict[str, Any] | None:
        found = self.store.cases.get(case_id)
        return dict(found) if found else None


class FakeLedger:
    """The canonical ledger as plain records, read as facts and written as review installs items."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def facts(self, case_id: str, revision: int, refs: References) -> LedgerFacts:
        def status(record: str, record_id: str) -> str | None:
            return self.store.status(case_id, record, record_id)

        claims = {
            cid: ClaimFact(r["kind"], r["status"]) for (case, record, cid), r in self.store.records.items()
            if case == case_id and record == "claim" and (cid in refs.claims or (r["kind"] == VERDICT
                                                                                 and r["status"] == ACTIVE))
        }
        facts = LedgerFacts(
            revision=revision,
            sources={s: status("source", s) for s in refs.sources if status("source", s)},
            claims=claims,
            relations={r for r in refs.relations if status("relation", r)},
            groups={g for g in refs.groups if status("group", g)},
        )
        named = {("source", refs.sources), ("claim", refs.claims), ("relation", refs.relations), ("group", refs.groups)}
        for (case, record, record_id), r in self.store.records.items():
            if case != case_id:
                continue
            if any(record == kind and record_id in ids for kind, ids in named):
                facts.history[(record, record_id)] = RecordHistory(r["status"], r["revision"], r["ended"])
            if record == "claim" and r["kind"] == VERDICT:
                facts.verdict_slot_changed = max(facts.verdict_slot_changed, r["revision"], r["ended"] or 0)
        return facts

    async def stage_facts(self, case_id: str, pin: int, refs: References, agent: str,
                          digest: str) -> StageFacts | None:
        found = self.store.cases.get(case_id)
        if found is None:
            return None
        prior = next((Prior(p.proposal_id, p.kind, p.pinned_revision, p.pinned_revision, [i.item_id for i in p.items])
                      for p in self.store.proposals.values()
                      if p.agent_name == agent and self.store.digests.get(p.proposal_id) == digest), None)
        since: dict[str, dict[str, Any]] = {}
        for step in self.store.change_log:
            if step.case_id == case_id and step.revision > pin:
                for kind, records in step.changes.model_dump(by_alias=True).items():
                    for record in records:
                        entry = since.setdefault(kind, {"count": 0, "first": []})
                        entry["count"] += 1
                        if len(entry["first"]) < 5:
                            entry["first"].append(record.get("id") or record.get("groupId"))
        return StageFacts(found["revision"], await self.facts(case_id, found["revision"], refs), prior, since)

    async def add_sources(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None:
        for item in items:
            self.store.add_record(case_id, "source", item.id, revision=provenance.revision)

    async def add_claims(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None:
        for item in items:
            self.store.add_record(case_id, "claim", item.id, kind=item.kind, sources=list(item.source_ids),
                                  revision=provenance.revision)

    async def add_relations(self, case_id: str, items: Sequence[Any], provenance: Provenance, *,
                            verdict_id: str | None = None) -> None:
        for item in items:
            self.store.add_record(case_id, "relation", item.id, ends=(item.source_claim_id, item.target_claim_id),
                                  basis=item.target_claim_id == verdict_id, revision=provenance.revision)

    async def add_groups(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None:
        for item in items:
            self.store.add_record(case_id, "group", item.group_id, members=list(item.member_claim_ids),
                                  revision=provenance.revision)

    async def supersede_verdict(self, case_id: str, new_verdict_id: str, provenance: Provenance) -> str | None:
        for (case, record, cid), r in self.store.records.items():
            if case == case_id and record == "claim" and r["kind"] == VERDICT and r["status"] == ACTIVE:
                r.update(status="superseded", superseded_by=new_verdict_id, ended=provenance.revision)
                return cid
        return None

    async def end_links(self, case_id: str, claim_id: str, provenance: Provenance) -> list[tuple[str, str]]:
        ended = []
        for (case, record, rid), r in self.store.records.items():
            linked = claim_id in r.get("ends", ()) or claim_id in r.get("members", ())
            if case == case_id and r["status"] == ACTIVE and linked:
                r.update(status="retired", ended=provenance.revision)
                ended.append((record, rid))
        return ended

    async def log(self, step: LedgerChanged, at: datetime, correlation_id: str | None) -> None:
        self.store.change_log.append(step)


class FakeProposals:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.outcome: Any = STORED

    def add(self, proposal: Proposal) -> None:
        """Staging's write (undone unless committed): the proposal as review will read it."""
        earlier = next((pid for pid, digest in self.store.digests.items() if digest == proposal.request_digest
                        and self.store.proposals[pid].agent_name == proposal.agent_name), None)
        if earlier is not None:
            self.outcome = (REPLAYED, earlier)
            return
        self.store.digests[proposal.proposal_id] = proposal.request_digest
        self.store.proposals[proposal.proposal_id] = StoredProposal(
            proposal.proposal_id, proposal.case_id, proposal.kind, proposal.pinned_revision, proposal.agent_name,
            proposal.token_id, proposal.correlation_id, self.store.clock,
            [StoredItem(item_id, i, payload) for i, (item_id, payload) in enumerate(proposal.items)],
            proposal.staged_revision,
        )

    async def case_of(self, proposal_id: str) -> str | None:
        found = self.store.proposals.get(proposal_id)
        return found.case_id if found else None

    async def get(self, proposal_id: str) -> StoredProposal | None:
        return self.store.proposals.get(proposal_id)

    async def decision_by_digest(self, proposal_id: str, reviewer: str, digest: str) -> dict[str, Any] | None:
        found = next((d for d in self.store.decisions if (d.proposal_id, d.reviewer, d.request_digest)
                      == (proposal_id, reviewer, digest)), None)
        return None if found is None else {
            "decision_id": found.decision_id, "reviewer": found.reviewer, "decided_at": found.decided_at,
            "note": found.note, "expected_revision": found.expected_revision, "revision_after": found.revision_after,
            "outcomes": found.outcomes, "refused": found.refused,
        }

    async def record(self, decision: Decision) -> None:
        self.store.decisions.append(decision)
        outcomes = dict(decision.outcomes)
        proposal = self.store.proposals[decision.proposal_id]
        self.store.proposals[decision.proposal_id] = replace(proposal, items=[
            replace(i, outcome=outcomes[i.item_id], decision_id=decision.decision_id, decided_by=decision.reviewer,
                    decided_at=decision.decided_at) if i.item_id in outcomes else i
            for i in proposal.items
        ])


class FakeCaseUnitOfWork(FakeUnitOfWork, StagingUnitOfWork, ReviewUnitOfWork):
    """Staging's and review's unit of work over one store: what one stages, the other decides."""

    def __init__(self, store: Store, origin: Origin | None = None) -> None:
        super().__init__(store, origin)
        self.cases = FakeCases(store)
        self.ledger = FakeLedger(store)
        self.proposals = FakeProposals(store)

    async def _commit(self, events: list[Event]) -> Any:
        await super()._commit(events)
        outcome, self.proposals.outcome = self.proposals.outcome, STORED
        return outcome


FakeStagingUnitOfWork = FakeReviewUnitOfWork = FakeCaseUnitOfWork
