"""Every review check: an item that triggers it and one that does not; a check turned off by configuration."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import ValidationError

from shared.contracts import ClaimItem, MergeGroupItem, RelationItem, SourceItem, VerdictPatch
from shared.grounding import label
from shared.health import independent_origins
from shared.review_checks import CHECKS, CheckFacts, ClaimFact, SourceFact, evaluate, years_in
from shared.search_text import normalise_url
from shared.settings import Settings
from tests.factories import claim_item, merge_item, relation_item, source_item, verdict_claim

PRIMARY = SourceFact("grid-2023", "official", "National Grid ESO", "2023-06-01", "https://grid.example/2023")
SECOND = SourceFact("lab-2024", "analysis", "Energy Lab", "2024-02-01", "https://lab.example/a")
POST = SourceFact("post", "social", "someone", "2024-01-01")
POST2 = SourceFact("post2", "social", "someone else", "2024-01-01")
LIVING = SourceFact("page", "reporting", "Daily", "living")


def facts(*sources: SourceFact, claims: tuple[ClaimFact, ...] = (), supports: tuple = (), urls: dict | None = None):
    return CheckFacts(sources={s.source_id: s for s in sources}, claims={c.claim_id: c for c in claims},
                      supports=list(supports), urls=urls or {})


def claim(claim_id: str = "c1", sources: tuple[str, ...] = ("grid-2023",), **overrides) -> ClaimItem:
    return ClaimItem.model_validate(claim_item(claim_id, list(sources), **overrides))


def checks(items, found: CheckFacts, disabled=()) -> set[str]:
    return {f.check for f in evaluate(items, found, disabled)}


def test_every_check_has_a_name_a_severity_and_a_one_line_explanation():
    for check in CHECKS.values():
        assert check.severity in ("warning", "info") and check.explanation and "\n" not in check.explanation


def test_prediction_stated_as_established():
    established = claim(kind="prediction", confidence="established", text="Prices fall by 2030.",
                        sources=("grid-2023", "lab-2024"))
    assert "prediction-established" in checks([established], facts(PRIMARY, SECOND))
    assert "prediction-established" not in checks([claim(kind="prediction", confidence="supported",
                                                         text="Prices fall by 2030.")], facts(PRIMARY))
    assert "prediction-established" not in checks([claim(confidence="established")], facts(PRIMARY))


def test_confidence_stronger_than_sources_allow():
    social = claim(confidence="established", sources=("post", "post2"))
    single = claim(confidence="established", sources=("grid-2023",))
    two_origins = claim(confidence="established", sources=("grid-2023", "lab-2024"))
    found = facts(PRIMARY, SECOND, POST, POST2)
    assert [f.message for f in evaluate([social], found)] == ["established on social posts only"]
    assert "single origin (National Grid ESO)" in evaluate([single], found)[0].message
    assert checks([two_origins], found) == set()
    assert checks([claim(confidence="supported", sources=("post",))], found) == set()


def test_established_on_no_active_source_is_confidence_beyond_sources():
    retired = claim(confidence="established", sources=("grid-2023",))
    assert [f.message for f in evaluate([retired], facts(SECOND))] == ["established on no active source"]
    assert checks([claim(confidence="supported", sources=("grid-2023",))], facts(SECOND)) == set()


def test_observation_about_a_year_later_than_every_source():
    later = claim(text="Emissions fell 8% in 2025.", sources=("grid-2023", "lab-2024"))
    assert "observation-after-sources" in checks([later], facts(PRIMARY, SECOND))
    assert checks([claim(text="Emissions fell 8% in 2024.", sources=("grid-2023", "lab-2024"))],
                  facts(PRIMARY, SECOND)) == set()
    # A living source may have been updated since: nothing can be said.
    assert checks([claim(text="Emissions fell in 2025.", sources=("page",))], facts(LIVING)) == set()
    # A figure such as 2,500 or 2025.5 is not a year.
    assert years_in("2,500 homes and 2025.5 units, in 1999") == [1999]


def test_relation_that_would_close_a_support_cycle():
    closing = RelationItem.model_validate(relation_item("r3", "c3", "c1"))
    found = facts(supports=[("c1", "c2"), ("c2", "c3")])
    assert [f.check for f in evaluate([closing], found)] == ["support-cycle"]
    assert checks([RelationItem.model_validate(relation_item("r3", "c1", "c3"))], found) == set()
    assert checks([RelationItem.model_validate(relation_item("r3", "c3", "c1", "contradicts"))], found) == set()
    # Within one proposal: the second relation closes the cycle the first one opened.
    pair = [RelationItem.model_validate(relation_item("ra", "x", "y")),
            RelationItem.model_validate(relation_item("rb", "y", "x"))]
    assert [(f.item_id, f.check) for f in evaluate(pair, facts())] == [("rb", "support-cycle")]


def test_verdict_whose_bases_all_share_one_origin():
    grid = SourceFact("grid-2024", "official", "national grid  ESO", "2024-01-01")
    bases = (ClaimFact("b1", "observation", "supported", (PRIMARY,)), ClaimFact("b2", "observation", "supported",
                                                                               (grid,)))
    patch = VerdictPatch.model_validate({"claim": verdict_claim("v", ["lab-2024"]), "relations": [
        relation_item("vb1", "b1", "v"), relation_item("vb2", "b2", "v")]})
    assert "verdict-single-origin" in checks([patch], facts(SECOND, claims=bases))
    mixed = (bases[0], ClaimFact("b2", "observation", "supported", (SECOND,)))
    assert "verdict-single-origin" not in checks([patch], facts(SECOND, claims=mixed))


def test_source_staged_again_under_a_new_id_with_a_canonical_url():
    again = SourceItem.model_validate(source_item("grid-again", url="http://www.Grid.example:443/2023/?utm_source=x#top"))
    found = facts(urls={normalise_url(PRIMARY.url): ["grid-2023"]})
    assert normalise_url(again.url) == normalise_url(PRIMARY.url) == "grid.example/2023"
    flags = evaluate([again], found)
    assert [f.check for f in flags] == ["source-url-restaged"] and "grid-2023" in flags[0].message
    assert checks([SourceItem.model_validate(source_item("other", url="https://grid.example/2024"))], found) == set()
    # The canonical source itself, seen again when a reviewer opens its accepted proposal, is no restaging.
    assert checks([SourceItem.model_validate(source_item("grid-2023", url=PRIMARY.url))], found) == set()


def test_source_staged_with_the_url_of_a_retired_source_points_to_the_reviewers_note():
    again = SourceItem.model_validate(source_item("grid-again", url="https://www.grid.example/2023/"))
    found = CheckFacts(retired_urls={normalise_url(PRIMARY.url): [("grid-2023", 7)]})
    flags = evaluate([again], found)
    assert [(f.check, f.message) for f in flags] == [("source-url-retired", "source grid-2023 with this URL was retired "
                                                      "at revision 7; inspect_sources grid-2023 gives the reviewer's note")]
    assert checks([SourceItem.model_validate(source_item("other", url="https://grid.example/2024"))], found) == set()


def test_contradicted_claim_offered_as_support():
    found = facts(claims=(ClaimFact("weak", "observation", "contradicted"), ClaimFact("fine", "observation",
                                                                                       "supported")))
    assert checks([RelationItem.model_validate(relation_item("r", "weak", "t"))], found) == {"contradicted-as-support"}
    assert checks([RelationItem.model_validate(relation_item("r", "fine", "t"))], found) == set()
    assert checks([RelationItem.model_validate(relation_item("r", "weak", "t", "contradicts"))], found) == set()


def test_a_verdicts_support_from_a_contradicted_claim_is_flagged_under_the_verdict():
    found = facts(PRIMARY, claims=(ClaimFact("weak", "observation", "contradicted", (PRIMARY,)),
                                   ClaimFact("fine", "observation", "supported", (SECOND,))))

    def patch(*relations) -> VerdictPatch:
        return VerdictPatch.model_validate({"claim": verdict_claim("v", ["grid-2023"]), "relations": list(relations)})

    flags = evaluate([patch(relation_item("vw", "weak", "v"), relation_item("vf", "fine", "v"))], found)
    assert [(f.item_id, f.check) for f in flags if f.check == "contradicted-as-support"] == [("v", "contradicted-as-support")]
    assert "weak is rated contradicted" in next(f.message for f in flags if f.check == "contradicted-as-support")
    assert "contradicted-as-support" not in checks([patch(relation_item("vf", "fine", "v"),
                                                          relation_item("vw", "weak", "v", "contradicts"))], found)


def test_a_snapshot_dated_after_today_is_flagged_a_day_of_time_zones_aside():
    today = CheckFacts(today=date(2026, 12, 7))
    ahead = SourceItem.model_validate(source_item("s", publicationDate="2024-01-01", snapshotDate="2999-01-01"))
    flags = evaluate([ahead], today)
    assert [(f.check, f.message) for f in flags] == [
        ("snapshot-in-future", "snapshot 2999-01-01 is after today (2026-12-07): no one accessed it then")]
    for day in ("2026-12-07", "2026-12-08"):  # today, or already tomorrow somewhere
        fine = SourceItem.model_validate(source_item("s", publicationDate="2024-01-01", snapshotDate=day))
        assert checks([fine], today) == set()
    assert checks([ahead], facts()) == set()  # no day known, no judgement


def test_snapshot_before_publication():
    early = SourceItem.model_validate(source_item("s", publicationDate="2026-11-05", snapshotDate="2026-11-01"))
    assert checks([early], facts()) == {"snapshot-before-publication"}
    assert checks([SourceItem.model_validate(source_item("s"))], facts()) == set()
    assert checks([SourceItem.model_validate(source_item("s", publicationDate="living"))], facts()) == set()


def test_prediction_without_a_year():
    assert "prediction-without-year" in checks([claim(kind="prediction", text="Prices will fall.")], facts(PRIMARY))
    assert "prediction-without-year" not in checks([claim(kind="prediction", text="Prices fall by 2030.")],
                                                   facts(PRIMARY))


def test_prediction_about_a_year_already_passed():
    found = facts(PRIMARY)
    found.today = date(2026, 12, 7)
    passed = claim(kind="prediction", confidence="supported", text="Heat pump sales double by 2020.")
    flags = [f for f in evaluate([passed], found) if f.check == "prediction-year-passed"]
    assert [(f.severity, f.message[:19]) for f in flags] == [("warning", "names 2020, which h")]
    for text in ("Heat pump sales double by 2026.", "Sales fall from their 2019 level by 2030.", "Sales double."):
        assert "prediction-year-passed" not in checks([claim(kind="prediction", text=text)], found), text
    assert "prediction-year-passed" not in checks([claim(text="Heat pump sales doubled by 2020.")], found)
    assert "prediction-year-passed" not in checks([passed], found, ["prediction-year-passed"])


def test_merge_group_across_kinds():
    group = MergeGroupItem.model_validate(merge_item("g", ["a", "b"]))
    mixed = facts(claims=(ClaimFact("a", "observation", "supported"), ClaimFact("b", "prediction", "supported")))
    same = facts(claims=(ClaimFact("a", "observation", "supported"), ClaimFact("b", "observation", "supported")))
    assert checks([group], mixed) == {"merge-across-kinds"}
    assert checks([group], same) == set()


@pytest.mark.parametrize("disabled", ["prediction-established", " prediction-established , support-cycle"])
def test_a_check_is_turned_off_by_configuration(disabled):
    off = Settings(review_checks_disabled=disabled).disabled_review_checks
    item = claim(kind="prediction", confidence="established", text="By 2027 it is done.",
                 sources=("grid-2023", "lab-2024"))
    assert checks([item], facts(PRIMARY, SECOND)) == {"prediction-established"}
    assert checks([item], facts(PRIMARY, SECOND), off) == set()


def test_a_misspelt_check_turned_off_is_refused_naming_it_and_the_checks():
    with pytest.raises(ValidationError) as refused:
        Settings(review_checks_disabled="support-cycle, prediction-establishd")
    said = str(refused.value)
    assert "names no check prediction-establishd;" in said and all(name in said for name in CHECKS)
    assert "support-cycle," not in said.split(";")[0]  # the known name is not called unknown


def test_a_blank_publisher_is_no_origin_to_grounding_as_to_evidence_health():
    sources = [("official", "Example Agency"), ("analysis", " "), ("reporting", "")]
    assert label(sources)["independentOrigins"] == independent_origins(p for _, p in sources) == 1
    blank = SourceFact("blank", "official", "  ", "2024-01-01")
    found = facts(PRIMARY, blank)
    assert [f.message for f in evaluate([claim(confidence="established", sources=("blank", "grid-2023"))], found)] \
        == ["established on evidence from a single origin (National Grid ESO)"]
    assert [f.message for f in evaluate([claim(confidence="established", sources=("blank",))], found)] \
        == ["established on evidence that names no publisher"]
