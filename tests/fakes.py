"""In-memory units of work: the services' use cases run against these in unit tests — no servers, no sleeps.

One `Store` stands for the database: a unit of work snapshots it on entry and puts the snapshot back
unless the use case commits, so a refused call leaves it exactly as it was, as a rolled-back
transaction would. Committed events land in `store.outbox`.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from services.projection.company_context import get_company_context
from services.projection.ports import ProjectionUnitOfWork
from services.review.domain import Decision, StoredItem, StoredProposal
from services.review.ports import ReviewUnitOfWork
from services.staging.domain import Prior, Proposal, StageFacts
from services.staging.ports import REPLAYED, STORED, StagingUnitOfWork
from services.thesis_delta.domain import Company, Operation, SourceFile, ThesisClaim, ThesisStep
from services.thesis_delta.ports import ThesisUnitOfWork
from shared.contracts import Actor, GetCompanyContextArgs, ToolRequest
from shared.errors import Unavailable
from shared.events import Event, LedgerChanged, Origin
from shared.grounding import label
from shared.health import Basis, Rating
from shared.ledger import VERDICT, ClaimFact, LedgerFacts, Provenance, RecordHistory, References
from shared.replies import CompanyContext
from shared.review_checks import CheckFacts
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
    ratings: dict[tuple[str, str], Rating] = field(default_factory=dict)  # (case, claim) → evidence health
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
                          digest: str, compared: tuple[list[str], list[str]] = ([], [])) -> StageFacts | None:
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

    async def grounding(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        records = self.store.records
        active = {claim_id: [records[(case_id, "source", s)] for s in records[(case_id, "claim", claim_id)]["sources"]
                             if records.get((case_id, "source", s), {}).get("status") == ACTIVE]
                  for claim_id in claim_ids}
        return {claim_id: label((s.get("type", "primary"), s.get("publisher", "")) for s in found)
                for claim_id, found in active.items()}

    async def review_facts(self, case_id: str, items: Sequence[Any], relations: bool) -> CheckFacts:
        """The fake store keeps no source metadata: the checks' facts are read from PostgreSQL only."""
        return CheckFacts()

    async def add_sources(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None:
        for item in items:
            self.store.add_record(case_id, "source", item.id, type=item.type, publisher=item.publisher,
                                  revision=provenance.revision)

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

    async def citations_of(self, case_id: str, source_ids: list[str]) -> dict[str, dict[str, str]]:
        return {cid: {s: self.store.status(case_id, "source", s) for s in r["sources"]}
                for (case, record, cid), r in self.store.records.items()
                if case == case_id and record == "claim" and r["status"] == ACTIVE
                and set(r["sources"]) & set(source_ids)}

    async def verdict_bases(self, case_id: str) -> tuple[str | None, list[Basis]]:
        verdict = next((cid for (case, record, cid), r in self.store.records.items() if case == case_id
                        and record == "claim" and r["kind"] == VERDICT and r["status"] == ACTIVE), None)
        return verdict, [Basis(rid, r["ends"][0]) for (case, record, rid), r in self.store.records.items()
                         if case == case_id and record == "relation" and r["basis"] and r["ends"][1] == verdict]

    async def ratings(self, case_id: str) -> dict[str, list[tuple[str, str]]]:
        return {cid: list(r.lost) for (case, cid), r in self.store.ratings.items() if case == case_id}

    async def rate(self, case_id: str, ratings: Sequence[Rating], revision: int) -> None:
        self.store.ratings.update({(case_id, r.claim_id): r for r in ratings})

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

    async def possible_duplicates(self, case_id: str, proposal_ids: Sequence[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        return {}  # flagged by staging's SQL only (tests/e2e/test_search.py)

    async def staged_checks(self, proposal_ids: Sequence[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        return {}  # stored by staging's SQL only (tests/e2e/test_review_queue.py)

    async def case_of(self, proposal_id: str) -> str | None:
        found = self.store.proposals.get(proposal_id)
        return found.case_id if found else None

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return sorted(p for p in self.store.proposals if low <= p <= high)[:limit]

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


# --- theses: companies, their claims, source files and delta operations, and the projection's context ----


@dataclass
class CompanyStore(Store):
    """The thesis tables as plain data beside the case records (deep-copied for rollback like the rest)."""

    companies: dict[str, Company] = field(default_factory=dict)
    thesis_claims: dict[str, dict[str, ThesisClaim]] = field(default_factory=dict)  # company → claims, oldest first
    claim_history: list[dict[str, Any]] = field(default_factory=list)
    source_files: dict[str, dict[str, Any]] = field(default_factory=dict)  # file, text, added_at
    operations: dict[str, Operation] = field(default_factory=dict)

    def add_company(self, ticker: str = "ACME", name: str = "Acme plc") -> Company:
        company = Company(str(uuid.uuid4()), ticker, name, 0)
        self.companies[company.company_id] = company
        self.thesis_claims[company.company_id] = {}
        return company

    def add_thesis_claim(self, company_id: str, text: str, label: str = "INFERRED", section: str = "Growth",
                         source_url: str | None = None) -> ThesisClaim:
        company = self.companies[company_id] = replace(self.companies[company_id],
                                                       thesis_revision=self.companies[company_id].thesis_revision + 1)
        claim = ThesisClaim(str(uuid.uuid4()), text, label, section, source_url, ACTIVE, company.thesis_revision)
        self.thesis_claims[company_id][claim.claim_id] = claim
        return claim

    def add_source_file(self, company_id: str, title: str = "Q3 report", url: str = "https://example.org/q3",
                        text: str = "Revenue grew 14%.") -> SourceFile:
        source = SourceFile(str(uuid.uuid4()), company_id, title, url, len(text))
        self.source_files[source.source_file_id] = {"file": source, "text": text, "added_at": self.clock}
        return source


class ThesisRecords:
    """A fake thesis repository: a view of the store's thesis tables."""

    def __init__(self, store: CompanyStore) -> None:
        self.store = store


class FakeCompanies(ThesisRecords):
    async def get(self, company_id: str, *, lock: bool = False) -> Company | None:
        return self.store.companies.get(company_id)

    async def by_ticker(self, ticker: str) -> Company | None:
        return next((c for c in self.store.companies.values() if c.ticker == ticker), None)

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return sorted(c for c in self.store.companies if low <= c <= high)[:limit]

    async def add(self, company: Company, created_by: str) -> bool:
        if company.company_id in self.store.companies or await self.by_ticker(company.ticker):
            return False
        self.store.companies[company.company_id] = company
        self.store.thesis_claims[company.company_id] = {}
        return True

    async def bump(self, company_id: str) -> int:
        company = self.store.companies[company_id]
        self.store.companies[company_id] = replace(company, thesis_revision=company.thesis_revision + 1)
        return company.thesis_revision + 1

    async def listed(self, ticker: str | None) -> list[tuple[Company, int]]:
        def committed(company: Company) -> int:
            return sum(1 for o in self.store.operations.values()
                       if o.company_id == company.company_id and o.status == "committed")

        chosen = [c for c in self.store.companies.values() if ticker is None or c.ticker == ticker.upper()]
        return [(c, committed(c)) for c in sorted(chosen, key=lambda c: c.ticker)]

    # the projection's read of the same records (its Theses port), so the fake context is the real use case's
    async def company(self, company_id: str | None, ticker: str | None) -> Company | None:
        return await self.get(company_id) if company_id else await self.by_ticker(ticker)

    async def thesis_claims_of(self, company_id: str) -> list[ThesisClaim]:
        claims = list(self.store.thesis_claims[company_id].values())
        return sorted(claims, key=lambda c: c.section)  # stable: oldest first within a section

    async def source_files_of(self, company_id: str) -> list[Any]:
        files = [f for f in self.store.source_files.values() if f["file"].company_id == company_id]
        return [SimpleNamespace(**vars(f["file"]), length=f["file"].characters, created_at=f["added_at"])
                for f in reversed(files)]

    async def deltas_of(self, company_id: str, statuses: tuple[str, ...], newest_by: str,
                        limit: int) -> tuple[list[Operation], int]:
        chosen = [o for o in self.store.operations.values() if o.company_id == company_id and o.status in statuses]
        chosen.sort(key=lambda o: getattr(o, newest_by), reverse=True)
        return chosen[:limit], len(chosen)


class FakeThesisClaims(ThesisRecords):
    async def of(self, company_id: str) -> dict[str, ThesisClaim]:
        return dict(self.store.thesis_claims[company_id])

    async def by_ids(self, company_id: str, claim_ids: Sequence[str]) -> list[ThesisClaim]:
        claims = self.store.thesis_claims[company_id]
        return [claims[claim_id] for claim_id in claim_ids if claim_id in claims]

    async def add(self, step: ThesisStep, claim_id: str, claim: dict[str, Any]) -> None:
        self.store.thesis_claims[step.company_id][claim_id] = ThesisClaim(
            claim_id, claim["text"], claim["label"], claim["section"], claim.get("sourceUrl"), ACTIVE, step.revision)
        self._history(step, claim_id, "add", None, {**claim, "claimId": claim_id})

    async def update(self, step: ThesisStep, claim_id: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        self._change(step, claim_id, text=after["text"], label=after["label"], section=after["section"],
                     source_url=after.get("sourceUrl"))
        self._history(step, claim_id, "update", before, after)

    async def retire(self, step: ThesisStep, claim_id: str, before: dict[str, Any]) -> None:
        self._change(step, claim_id, status="retired")
        self._history(step, claim_id, "retire", before, None)

    def _change(self, step: ThesisStep, claim_id: str, **values: Any) -> None:
        claims = self.store.thesis_claims[step.company_id]
        claims[claim_id] = replace(claims[claim_id], **values, revision=step.revision)

    def _history(self, step: ThesisStep, claim_id: str, action: str, before: Any, after: Any) -> None:
        self.store.claim_history.append({"claimId": claim_id, "revision": step.revision, "action": action,
                                         "before": before, "after": after, "actor": step.actor,
                                         "operationId": step.operation_id})


class FakeSourceFiles(ThesisRecords):
    async def get(self, source_file_id: str) -> SourceFile | None:
        found = self.store.source_files.get(source_file_id)
        return found["file"] if found else None

    async def add(self, source: SourceFile, text: str, created_by: str) -> None:
        self.store.source_files[source.source_file_id] = {"file": replace(source, characters=len(text)), "text": text,
                                                          "added_at": self.store.clock}

    async def of(self, company_id: str) -> list[SourceFile]:
        return [f["file"] for f in self.store.source_files.values() if f["file"].company_id == company_id]


class FakeOperations(ThesisRecords):
    async def get(self, operation_id: str, *, lock: bool = False) -> Operation | None:
        return self.store.operations.get(operation_id)

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return sorted(o for o in self.store.operations if low <= o <= high)[:limit]

    async def by_key(self, company_id: str, caller: str, key: str) -> Operation | None:
        return next((o for o in self.store.operations.values()
                     if (o.company_id, o.caller, o.idempotency_key) == (company_id, caller, key)), None)

    async def add(self, operation: Operation) -> bool:
        if await self.by_key(operation.company_id, operation.caller, operation.idempotency_key):
            return False
        self.store.operations[operation.operation_id] = operation
        return True

    async def save(self, operation: Operation) -> None:
        self.store.operations[operation.operation_id] = operation

    async def of(self, company_id: str, status: str | None, limit: int = 100) -> list[Operation]:
        chosen = [o for o in self.store.operations.values()
                  if o.company_id == company_id and status in (None, o.status)]
        return sorted(chosen, key=lambda o: o.created_at, reverse=True)[:limit]


class FakeProjectionUnitOfWork(FakeUnitOfWork, ProjectionUnitOfWork):
    """Only what get_company_context reads: the thesis records (`theses`)."""

    def __init__(self, store: CompanyStore) -> None:
        super().__init__(store)
        self.theses = FakeCompanies(store)


class FakeCompanyContexts:
    """The projection's answer, made by its own get_company_context over the store; `unavailable` (a reason)
    stands for a projection that does not answer."""

    def __init__(self, store: CompanyStore, unavailable: str | None = None) -> None:
        self.store = store
        self.unavailable = unavailable

    async def of(self, company_id: str, actor: Actor) -> CompanyContext:
        if self.unavailable:
            raise Unavailable(self.unavailable)
        request = ToolRequest(actor=actor, args=GetCompanyContextArgs(company_id=company_id))
        return CompanyContext.model_validate(await get_company_context(request, FakeProjectionUnitOfWork(self.store)))


class FakeThesisUnitOfWork(FakeUnitOfWork, ThesisUnitOfWork):
    """Thesis-delta's unit of work over a CompanyStore; the secret, the TTL and the store's clock are the test's."""

    def __init__(self, store: CompanyStore, *, ttl: timedelta = timedelta(hours=1),
                 contexts: FakeCompanyContexts | None = None, origin: Origin | None = None) -> None:
        super().__init__(store, origin)
        self.secret = b"test-secret"
        self.operation_ttl = ttl
        self.contexts = contexts or FakeCompanyContexts(store)
        self.companies, self.claims = FakeCompanies(store), FakeThesisClaims(store)
        self.source_files, self.operations = FakeSourceFiles(store), FakeOperations(store)
