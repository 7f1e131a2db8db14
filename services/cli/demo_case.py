"""The demo case's research loop as data: what the demo agent stages, in order, and what the reviewer does.

Every record is demo data shipped with Threadline (example.org addresses), not a real publication.
"""

from __future__ import annotations

from typing import Any

DEMO_NOTE = "Demo record shipped with Threadline; not a real publication."


def _source(source_id: str, publisher: str, title: str, type_: str, authority: str, evidence: str,
            published: str = "2024-02-12") -> dict[str, Any]:
    return {"id": source_id, "publisher": publisher, "title": title, "url": f"https://example.org/demo/{source_id}",
            "publicationDate": published, "snapshotDate": "2026-11-01", "type": type_, "authority": authority,
            "evidenceText": evidence, "provenanceNote": DEMO_NOTE}


def _claim(claim_id: str, text: str, sources: list[str], kind: str = "observation",
           confidence: str = "supported") -> dict[str, Any]:
    return {"id": claim_id, "text": text, "kind": kind, "confidence": confidence, "sourceIds": sources,
            "transformationNote": "Restated the source's figure as one sentence.",
            "proposalRationale": "A reviewer can check it against the cited record alone."}


def _relation(relation_id: str, source: str, target: str, type_: str, rationale: str) -> dict[str, Any]:
    return {"id": relation_id, "sourceClaimId": source, "targetClaimId": target, "type": type_,
            "rationale": rationale}


STAGED_SOURCES = [
    _source("demo-agency-summary", "Example Energy Agency (demo data)", "Press summary of the cold-climate field trial",
            "official", "The agency's own summary of its trial (the same origin as the trial report).",
            "Heat pumps in the trial homes cut heating emissions by about two fifths compared with gas boilers."),
    _source("demo-cold-snap-study", "Example University Building Lab (demo data)",
            "Heat pump performance during extreme cold snaps", "analysis",
            "Peer-reviewed monitoring study of 40 homes through two cold winters (demo record).",
            "Below -20 C the seasonal performance factor fell to 1.8; on a coal-heavy grid, emissions on those "
            "days exceeded those of a condensing gas boiler."),
    _source("demo-vendor-blog", "Example Heat Pump Vendor (demo data)", "Customers cut their heating bills by 35%",
            "reporting", "A vendor's marketing post; figures self-reported by customers (demo record).",
            "Our customers cut their heating bills by 35% in their first winter with a heat pump."),
]

CLAIMS = [
    _claim("demo-claim-trial-cut", "In the 120-home field trial, heat pumps cut heating CO2 emissions by 41% "
           "compared with the gas boilers they replaced.", ["demo-field-trial-2023"], confidence="established"),
    _claim("demo-claim-summary-cut", "The agency's summary reports that trial homes cut heating emissions by about "
           "two fifths.", ["demo-agency-summary"]),
    _claim("demo-claim-grid", "Winter grid carbon intensity fell from 410 g/kWh in 2019 to 260 g/kWh in 2025.",
           ["demo-grid-outlook"], confidence="established"),
    _claim("demo-claim-cold-snap", "Below -20 C, heat pump emissions can exceed a gas boiler's on a coal-heavy grid.",
           ["demo-cold-snap-study"], kind="interpretation"),
]

BILLS = _claim("demo-claim-bills", "Households with heat pumps cut their heating bills by 35% in the first winter.",
               ["demo-vendor-blog"], kind="interpretation", confidence="disputed")

RELATIONS = [
    _relation("demo-rel-grid-amplifies", "demo-claim-grid", "demo-claim-trial-cut", "amplifies",
              "A cleaner grid widens the emissions cut the trial measured."),
    _relation("demo-rel-cold-qualifies", "demo-claim-cold-snap", "demo-claim-trial-cut", "qualifies",
              "The trial's average hides the coldest days, when the advantage shrinks."),
]

GROUP = {"groupId": "demo-group-trial-cut", "label": "Field-trial emissions cut",
         "memberClaimIds": ["demo-claim-trial-cut", "demo-claim-summary-cut"], "confidence": "high",
         "rationale": "The summary restates the trial report's own figure: one origin, counted once."}

VERDICT = {
    "claim": {"id": "demo-verdict", "text": "Yes: in cold climates residential heat pumps cut household heating "
              "emissions substantially, though less on the coldest days.", "kind": "verdict",
              "confidence": "supported", "sourceIds": ["demo-field-trial-2023", "demo-grid-outlook"],
              "transformationNote": "Weighed the trial's measured cut against the cold-snap study.",
              "lane": "verdict", "order": 1},
    "relations": [
        _relation("demo-basis-trial", "demo-claim-trial-cut", "demo-verdict", "supports",
                  "The measured cut is the verdict's main ground."),
        _relation("demo-basis-bills", "demo-claim-bills", "demo-verdict", "supports",
                  "Lower bills make the switch, and so the cut, likely to last."),
        _relation("demo-basis-cold", "demo-claim-cold-snap", "demo-verdict", "contradicts",
                  "On the coldest days the advantage can reverse."),
    ],
}

# (tool, the first id it creates — present once the step is done, arguments, the reviewer's note)
DEMO_LOOP: list[tuple[str, str, dict[str, Any], str]] = [
    ("stage_sources", "demo-agency-summary", {"sources": STAGED_SOURCES},
     "Accepted: the summary, the monitoring study and the vendor post are what the agent read."),
    ("stage_claims", "demo-claim-trial-cut", {"claims": CLAIMS}, "Accepted: each claim restates its source."),
    ("stage_claims", "demo-claim-bills", {"claims": [BILLS]}, "Accepted as disputed: the figures are self-reported."),
    ("stage_relations", "demo-rel-grid-amplifies", {"relations": RELATIONS}, "Accepted."),
    ("stage_merge", "demo-group-trial-cut", {"groups": [GROUP]}, "Accepted: one origin, counted once."),
    ("stage_verdict", "demo-verdict", VERDICT, "Accepted: supported, with the cold-snap caveat."),
]

RETIRED = {"id": "demo-vendor-blog", "note": "The vendor withdrew the post; its bill figures were never measured."}

PENDING = ("stage_claims", "demo-claim-backup-heat", {"claims": [_claim(
    "demo-claim-backup-heat", "112 of the 120 trial homes needed no backup heating through the 2023 winter.",
    ["demo-field-trial-2023"])]})

# A prediction stated as established, from a record of past carbon intensity: its review checks show on the
# proposal page and in the stage answer (docs/review-checks.md).
PENDING_PREDICTION = ("stage_claims", "demo-claim-zero-emission", {"claims": [_claim(
    "demo-claim-zero-emission", "The grid will be fully decarbonised by 2027, so heat pumps become zero-emission.",
    ["demo-grid-outlook"], kind="prediction", confidence="established")]})

LEFT_PENDING = (PENDING, PENDING_PREDICTION)  # staged and left for a reviewer (the README counts them)
