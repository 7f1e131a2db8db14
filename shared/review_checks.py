"""Review checks: deterministic rules that flag, beside the human reviewer, what a careful reviewer would
notice in a staged item against its own provenance. Each has a name, a severity and a one-line explanation;
they run at staging (the stage answer's `reviewChecks`, never a refusal) and again when a reviewer opens the
proposal, against the ledger as it is then. `THREADLINE_REVIEW_CHECKS_DISABLED=name,name` turns checks off.

Everything here is pure: `evaluate` reads only the items and the `CheckFacts` one statement loaded
(shared/review_check_facts.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from shared.contracts import ClaimItem, MergeGroupItem, RelationItem, SourceItem, VerdictClaim, VerdictPatch
from shared.grounding import label
from shared.health import origin
from shared.search_text import normalise_url

WARNING, INFO = "warning", "info"
FLAGS_CAP = 50  # flags shown per proposal: a stage answer stays bounded


@dataclass(frozen=True)
class Check:
    name: str
    severity: str
    explanation: str


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("prediction-established", WARNING,
          "a prediction is stated as established, though what has not happened yet cannot be"),
    Check("confidence-beyond-sources", WARNING,
          "stated as established, but its evidence is social-only, comes from a single origin, or is no active source"),
    Check("observation-after-sources", WARNING,
          "an observation about a year later than every one of its sources' publication dates"),
    Check("support-cycle", WARNING,
          "this supports relation would close a cycle of support: the claims would end up supporting themselves"),
    Check("verdict-single-origin", WARNING,
          "every basis of the verdict draws on sources of one origin, so they are not independent"),
    Check("source-url-restaged", WARNING,
          "a source staged again under a new id with the URL of a canonical source"),
    Check("source-url-retired", WARNING,
          "a source staged with the URL of a source a reviewer retired (inspect_sources gives the reviewer's note)"),
    Check("contradicted-as-support", WARNING,
          "a claim rated contradicted is offered as support for another"),
    Check("snapshot-before-publication", WARNING,
          "the source's snapshot date is earlier than its publication date"),
    Check("snapshot-in-future", WARNING,
          "the source's snapshot date, the day it was accessed, is later than today"),
    Check("prediction-year-passed", WARNING,
          "a prediction about a year that has already passed: what happened can be observed, not predicted"),
    Check("prediction-without-year", INFO,
          "a prediction names no year by which it can be resolved true or false"),
    Check("merge-across-kinds", INFO,
          "a merge group joins claims of different kinds (observation, interpretation, prediction)"),
)}

YEAR = re.compile(r"(?<![\d.,])(1[89]\d\d|2[01]\d\d)(?![\d.,]\d)")


def years_in(text: str) -> list[int]:
    return [int(y) for y in YEAR.findall(text)]


@dataclass(frozen=True)
class SourceFact:
    source_id: str
    type: str
    publisher: str
    publication_date: str
    url: str = ""


@dataclass(frozen=True)
class ClaimFact:
    claim_id: str
    kind: str
    confidence: str
    sources: tuple[SourceFact, ...] = ()


@dataclass
class CheckFacts:
    """The canonical records a proposal's items lean on, as they are at one moment."""

    sources: dict[str, SourceFact] = field(default_factory=dict)  # active sources the items cite
    claims: dict[str, ClaimFact] = field(default_factory=dict)  # active claims the items name, with their sources
    supports: list[tuple[str, str]] = field(default_factory=list)  # the case's active supports edges
    urls: dict[str, list[str]] = field(default_factory=dict)  # normalise_url -> active sources with it
    retired_urls: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # -> (retired source, revision)
    today: date | None = None  # the day the checks run (a prediction's year may have passed by then)


@dataclass(frozen=True)
class Flag:
    item_id: str
    check: str
    severity: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"itemId": self.item_id, "check": self.check, "severity": self.severity, "message": self.message}


def wanted(items: Sequence[Any]) -> tuple[set[str], set[str], set[str]]:
    """The source ids, claim ids and normalised URLs the checks of these items read."""
    source_ids: set[str] = set()
    claim_ids: set[str] = set()
    urls: set[str] = set()
    for item in items:
        if isinstance(item, VerdictPatch):
            source_ids.update(item.claim.source_ids)
            claim_ids.update(r.source_claim_id for r in item.relations)
        elif isinstance(item, ClaimItem | VerdictClaim):
            source_ids.update(item.source_ids)
        elif isinstance(item, RelationItem):
            claim_ids.update((item.source_claim_id, item.target_claim_id))
        elif isinstance(item, MergeGroupItem):
            claim_ids.update(item.member_claim_ids)
        elif isinstance(item, SourceItem):
            urls.add(normalise_url(item.url))
    return source_ids, claim_ids, urls


def evaluate(items: Sequence[Any], facts: CheckFacts, disabled: Iterable[str] = ()) -> list[Flag]:
    """Every check each item triggers, in item order, bounded."""
    off = set(disabled)
    flags: list[Flag] = []
    staged_supports: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, VerdictPatch):  # its relations are checked as staged ones are, under the verdict's id
            found = (_claim(item.claim, facts) + _verdict(item, facts)
                     + [flag for r in item.relations for flag in _relation(r, facts, staged_supports)])
        elif isinstance(item, ClaimItem):
            found = _claim(item, facts)
        elif isinstance(item, RelationItem):
            found = _relation(item, facts, staged_supports)
        elif isinstance(item, SourceItem):
            found = _source(item, facts)
        elif isinstance(item, MergeGroupItem):
            found = _merge(item, facts)
        else:
            found = []
        flags += [Flag(_item_id(item), name, CHECKS[name].severity, message)
                  for name, message in found if name not in off]
    return flags[:FLAGS_CAP]


def _item_id(item: Any) -> str:
    if isinstance(item, VerdictPatch):
        return item.claim.id
    return item.group_id if isinstance(item, MergeGroupItem) else item.id


def _claim(item: ClaimItem | VerdictClaim, facts: CheckFacts) -> list[tuple[str, str]]:
    found = []
    cited = [facts.sources[s] for s in item.source_ids if s in facts.sources]
    if item.kind == "prediction" and item.confidence == "established":
        found.append(("prediction-established", "a prediction stated as established; until it resolves, "
                                                 "supported is the strongest its sources allow"))
    if item.confidence == "established" and not cited:
        found.append(("confidence-beyond-sources", "established on no active source"))
    elif item.confidence == "established":
        grounding = label((s.type, s.publisher) for s in cited)
        if grounding["grounding"] == "social-only":
            found.append(("confidence-beyond-sources", "established on social posts only"))
        elif grounding["independentOrigins"] == 1:
            publisher = next(s.publisher for s in cited if origin(s.publisher))
            found.append(("confidence-beyond-sources", f"established on evidence from a single origin ({publisher})"))
        elif grounding["independentOrigins"] == 0:
            found.append(("confidence-beyond-sources", "established on evidence that names no publisher"))
    if item.kind == "observation" and cited and (years := years_in(item.text)):
        published = [int(s.publication_date[:4]) for s in cited if s.publication_date[:4].isdigit()]
        if len(published) == len(cited) and max(years) > max(published):
            found.append(("observation-after-sources",
                          f"observes {max(years)}, but its latest source was published in {max(published)}"))
    if item.kind == "prediction" and not years_in(item.text):
        found.append(("prediction-without-year", "name the year by which this prediction is true or false"))
    if item.kind == "prediction" and facts.today and (years := years_in(item.text)) and max(years) < facts.today.year:
        found.append(("prediction-year-passed",
                      f"names {max(years)}, which has passed: stage what happened as an observation, or have the "
                      "prediction resolved"))
    return found


def _reaches(edges: Iterable[tuple[str, str]], start: str, goal: str) -> bool:
    following: dict[str, list[str]] = {}
    for source, target in edges:
        following.setdefault(source, []).append(target)
    seen, frontier = {start}, [start]
    while frontier:
        node = frontier.pop()
        if node == goal:
            return True
        for after in following.get(node, []):
            if after not in seen:
                seen.add(after)
                frontier.append(after)
    return False


def _relation(item: RelationItem, facts: CheckFacts, staged: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if item.type != "supports":
        return []
    found = []
    edges = [*facts.supports, *staged]
    if _reaches(edges, item.target_claim_id, item.source_claim_id):
        found.append(("support-cycle", f"{item.target_claim_id} already supports {item.source_claim_id}, "
                                       "directly or through others"))
    staged.append((item.source_claim_id, item.target_claim_id))
    basis = facts.claims.get(item.source_claim_id)
    if basis is not None and basis.confidence == "contradicted":
        found.append(("contradicted-as-support", f"{item.source_claim_id} is rated contradicted"))
    return found


def _verdict(item: VerdictPatch, facts: CheckFacts) -> list[tuple[str, str]]:
    bases = [facts.claims[r.source_claim_id] for r in item.relations if r.source_claim_id in facts.claims]
    origins = {origin(s.publisher) for basis in bases for s in basis.sources} - {""}
    if len(bases) >= 1 and len(origins) == 1:
        publisher = next(s.publisher for basis in bases for s in basis.sources if origin(s.publisher))
        return [("verdict-single-origin", f"all {len(bases)} bases draw on {publisher} alone")]
    return []


def _source(item: SourceItem, facts: CheckFacts) -> list[tuple[str, str]]:
    found = []
    same = [s for s in facts.urls.get(normalise_url(item.url), []) if s != item.id]
    if same:
        found.append(("source-url-restaged", f"canonical source {same[0]} has this URL; cite it instead"))
    if retired := [(s, revision) for s, revision in facts.retired_urls.get(normalise_url(item.url), []) if s != item.id]:
        found.append(("source-url-retired", f"source {retired[0][0]} with this URL was retired at revision "
                                            f"{retired[0][1]}; inspect_sources {retired[0][0]} gives the reviewer's note"))
    if item.publication_date[:4].isdigit() and item.snapshot_date < item.publication_date:
        found.append(("snapshot-before-publication",
                      f"snapshot {item.snapshot_date} precedes publication {item.publication_date}"))
    # Compared as text (ISO dates sort as days do): a day later than tomorrow, which is today somewhere already.
    if facts.today and item.snapshot_date > (facts.today + timedelta(days=1)).isoformat():
        found.append(("snapshot-in-future",
                      f"snapshot {item.snapshot_date} is after today ({facts.today}): no one accessed it then"))
    return found


def _merge(item: MergeGroupItem, facts: CheckFacts) -> list[tuple[str, str]]:
    kinds = sorted({facts.claims[c].kind for c in item.member_claim_ids if c in facts.claims})
    if len(kinds) > 1:
        return [("merge-across-kinds", "members are " + ", ".join(kinds))]
    return []
