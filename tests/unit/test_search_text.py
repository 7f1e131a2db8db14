"""What duplicate detection compares (normalised texts and URLs), the plain form full-text search indexes and reads,
and the similar-spellings query search builds."""

from __future__ import annotations

from services.projection.search import fuzzy_query
from services.staging import duplicates
from shared.search_text import normalise, normalise_url, plain


def test_restatements_normalise_alike_and_other_claims_do_not():
    original = "Acme Corp shipped 1,200 turbines (12.50% more) to Zürich in March 2024."
    for restated in ("acme corp shipped 1200 turbines 12.5 percent more to Zurich in March 2024",
                     "ACME CORP SHIPPED 1,200 TURBINES — 12.5% MORE — TO ZÜRICH IN MARCH 2024!"):
        assert normalise(restated) == normalise(original)
    assert normalise(original) == "acme corp shipped 1200 turbines 12 5 percent more to zurich in march 2024"
    assert normalise("Acme Corp shipped 1,300 turbines") != normalise("Acme Corp shipped 1,200 turbines")


def test_duplicates_drop_accents_as_search_does():
    """One rule for both: Łódź restates Lodz (a letter without a decomposition spelt plainly), and a kana keeps its
    voicing mark (ガス is not カス), as `plain` reads them."""
    assert normalise("Heat pumps in Łódź, Øresund and Straße") == normalise("heat pumps in Lodz, Oresund and Strasse")
    assert normalise("Łódź") == "lodz" == normalise("Lodz")
    assert normalise("が") != normalise("か") and normalise("ガス") != normalise("カス")
    assert normalise("서울의 열펌프") == "서울의 열펌프"


def test_urls_normalise_across_scheme_host_case_www_slash_and_fragment():
    same = {normalise_url(u) for u in ("https://www.Example.org/a/b/", "http://example.org/a/b#top",
                                       "HTTPS://EXAMPLE.ORG:443/a/b")}
    assert same == {"example.org/a/b"}
    assert normalise_url("https://example.org/a/b?page=2") != normalise_url("https://example.org/a/b?page=3")
    assert normalise_url("https://example.org/A") != normalise_url("https://example.org/a")  # paths keep case


def test_urls_normalise_without_tracking_parameters_and_with_the_others_in_one_order():
    same = {normalise_url(u) for u in (
        "https://x.org/grid-outlook", "https://x.org/grid-outlook?utm_source=x",
        "https://www.x.org:443/grid-outlook/?utm_source=news&utm_medium=email&fbclid=abc#top",
        "http://x.org/grid-outlook?gclid=1&dclid=2&msclkid=3&mc_cid=4&mc_eid=5&igshid=6&_ga=7&UTM_Campaign=8")}
    assert same == {"x.org/grid-outlook"}
    assert normalise_url("https://x.org/a?year=2024&page=2&utm_source=x") == \
        normalise_url("https://x.org/a?page=2&year=2024") == "x.org/a?page=2&year=2024"
    assert normalise_url("https://x.org/a?page=2&utm=keep") == "x.org/a?page=2&utm=keep"  # only utm_* is tracking
    assert normalise_url("https://x.org:8443/a") == "x.org:8443/a" != normalise_url("https://x.org/a")
    assert normalise_url("https://x.org:port/a") == "x.org/a"  # a port that is no number is not kept


def test_an_ipv6_host_keeps_its_brackets_so_its_port_stays_apart_from_the_address():
    assert normalise_url("http://[::1]:8080/a") == "[::1]:8080/a"
    assert normalise_url("http://[::1:8080]/a") == "[::1:8080]/a"
    assert normalise_url("https://[2001:DB8::1]:443/a/") == "[2001:db8::1]/a"
    assert normalise_url("http://127.0.0.1:8080/a") == "127.0.0.1:8080/a"


def test_urls_spelt_with_another_encoding_are_not_unified_only_missed_as_duplicates():
    assert normalise_url("https://x.org/a?q=heat+pump") != normalise_url("https://x.org/a?q=heat%20pump")
    assert normalise_url("https://x.org/a%2fb") != normalise_url("https://x.org/a%2Fb")


def test_search_reads_text_without_accents_whatever_letters_carry_them_and_leaves_plain_text_as_it_is():
    assert plain("Zürich, São Paulo, Nestlé, Kraków, Łódź, Øresund, Straße, Æsir, ﬁnance") == \
        "Zurich, Sao Paulo, Nestle, Krakow, Lodz, Oresund, Strasse, AEsir, finance"
    ascii_text = "Heat pumps cut emissions by 30% (2024) — the report's \"figures\"."
    assert plain(ascii_text) == ascii_text
    assert plain("서울의 열펌프, ヒートポンプの導入が進む, Ёлка") == "서울의 열펌프, ヒートポンプの導入が進む, Елка"  # other scripts' own marks stay


def test_the_similar_spellings_query_quotes_every_stem():
    assert fuzzy_query({}) is None
    assert fuzzy_query({2: ["b"], 1: ["a", "it's", "back\\slash"]}) == "('a' | 'it''s' | 'back\\\\slash') & ('b')"


def test_flags_name_the_item_and_leave_out_a_replayed_proposals_own_items():
    flags = duplicates.flagged(["c-1", "c-2"], [[1, "c-9", "canonical", "", 0.91], [2, "c-1", "pending", "p-own", 0.99],
                                                [2, "c-8", "pending", "p-other", 0.75]],
                               ["s-1"], [[1, "s-0"]], own_proposal="p-own")
    assert flags == [
        {"itemId": "c-1", "of": {"kind": "claim", "id": "c-9", "status": "canonical"}, "similarity": 0.91},
        {"itemId": "c-2", "of": {"kind": "claim", "id": "c-8", "status": "pending", "proposalId": "p-other"},
         "similarity": 0.75},
        {"itemId": "s-1", "of": {"kind": "source", "id": "s-0", "status": "canonical"}, "similarity": 1.0},
    ]
    assert [(r["item_id"], r["rank"]) for r in duplicates.rows(flags)] == [("c-1", 0), ("c-2", 0), ("s-1", 0)]
