"""The search bench's text: claims of varied wording (topics, entities, numbers, dates) from a seeded generator,
their restatements (word order, case, punctuation, one word changed, a number reformatted), queries by four
of a claim's words and by a misspelled form. Deterministic for a seed, so runs compare."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_SYLLABLES = ("var", "nol", "tek", "bri", "sor", "lum", "dax", "quin", "mer", "zal", "kor", "fen", "tal", "vex",
              "ombr", "pel", "rin", "gast", "hol", "mir", "cad", "sev", "trel", "ust", "bal", "nex", "yor", "pra")
_SUFFIXES = ("Systems", "Holdings", "Energy", "Labs", "Foods", "Motors", "Logistics", "Pharma", "Bank", "Mining",
             "Networks", "Textiles", "Robotics", "Airlines", "Steel", "Semiconductors", "Water", "Insurance")
_PLACES = ("Norway", "Chile", "Vietnam", "Kenya", "Ontario", "Bavaria", "Texas", "Gujarat", "Queensland",
           "Andalusia", "Sichuan", "Quebec", "Lombardy", "Patagonia", "Java", "Silesia", "Hokkaido", "Moravia")
_METRICS = ("revenue", "shipments", "output", "emissions", "headcount", "exports", "capacity", "orders",
            "deliveries", "margins", "inventory", "subscribers", "production", "losses", "royalties", "bookings",
            "throughput", "wages", "tariffs", "imports", "backlog", "yields", "reserves", "dividends")
_TOPICS = ("battery recycling", "offshore wind", "lithium refining", "cold storage", "rail freight",
           "vaccine trials", "crop insurance", "satellite broadband", "copper smelting", "desalination",
           "hydrogen buses", "textile dyeing", "grain storage", "port automation", "solar glass",
           "data centres", "cement kilns", "fish farming", "paper mills", "chip packaging", "heat pumps",
           "cobalt mining", "tyre retreading", "bus fleets", "timber exports", "wine bottling")
_DOCUMENTS = ("annual report", "quarterly filing", "regulator's register", "press release", "audit letter",
              "earnings call", "customs data", "trade survey", "ministry bulletin", "court filing")
_UP = ("rose", "climbed", "grew", "jumped", "increased", "expanded")
_DOWN = ("fell", "dropped", "declined", "shrank", "slipped", "contracted")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_SWAPS = {"rose": "increased", "fell": "decreased", "grew": "rose", "reported": "disclosed", "according": "per",
          "year": "twelvemonth", "earlier": "before", "record": "peak", "plant": "facility", "said": "stated"}
STOP = {"the", "and", "from", "with", "that", "this", "its", "for", "into", "than", "over", "per", "was", "were",
        "after", "before", "year", "earlier", "according", "percent"}

_TEMPLATES = (
    "{entity} reported {metric} of {amount} in {date}, {move} from {amount2} a year earlier, according to its {doc}.",
    "In {date}, {metric} at {entity}'s {topic} unit in {place} {move} {pct} to {amount}.",
    "{entity} said its {topic} plant in {place} reached {amount} of {metric} by {date}.",
    "The {doc} shows {entity} {move} {metric} by {pct} in {date} as {topic} demand in {place} changed.",
    "{place} regulators recorded {amount} of {topic} {metric} for {entity} in {date}, a record for the region.",
    "{entity} expects {topic} {metric} in {place} to reach {amount} by {date}, up from {amount2} today.",
    "According to a {doc}, {entity} cut {topic} {metric} in {place} by {pct} between {date} and {date2}.",
)


@dataclass(frozen=True)
class Claim:
    claim_id: str
    text: str


def _entity(rng: random.Random) -> str:
    name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
    return f"{name} {rng.choice(_SUFFIXES)}"


def _amount(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return f"{rng.randint(2, 980)}.{rng.randint(1, 9)} million tonnes"
    if roll < 0.7:
        return f"${rng.randint(11, 9800):,} million"
    return f"{rng.randint(1200, 980000):,} units"


def _date(rng: random.Random) -> str:
    year = rng.randint(2009, 2026)
    roll = rng.random()
    if roll < 0.4:
        return f"{rng.choice(_MONTHS)} {year}"
    if roll < 0.7:
        return f"Q{rng.randint(1, 4)} {year}"
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def claim_text(rng: random.Random) -> str:
    template = rng.choice(_TEMPLATES)
    return template.format(
        entity=_entity(rng), metric=rng.choice(_METRICS), amount=_amount(rng), amount2=_amount(rng),
        date=_date(rng), date2=_date(rng), move=rng.choice(_UP if rng.random() < 0.5 else _DOWN),
        doc=rng.choice(_DOCUMENTS), topic=rng.choice(_TOPICS), place=rng.choice(_PLACES),
        pct=f"{rng.randint(1, 60)}.{rng.randint(0, 9)}%",
    )[:240]


def claims(n: int, seed: int, prefix: str) -> list[Claim]:
    rng = random.Random(seed)
    return [Claim(f"{prefix}-{i:06d}", claim_text(rng)) for i in range(n)]


_WORDS = re.compile(r"[A-Za-z][A-Za-z']+|\d[\d,.]*\d|\d")


def content_words(text: str) -> list[str]:
    return [w for w in _WORDS.findall(text) if w.lower() not in STOP and len(w) >= 4]


# The generator's boilerplate: its templates' own words and its small closed lists (documents, verbs, company
# suffixes). A claim's specifics are the rest — who, what, where, how much, when — which is what an agent
# searching for a claim types; boilerplate fills in only when a claim has fewer than four specifics.
BOILERPLATE = {w.lower() for w in _WORDS.findall(" ".join((*_TEMPLATES, *_DOCUMENTS, *_UP, *_DOWN, *_SUFFIXES,
                                                           "million tonnes units")))}


def four_words(text: str, rng: random.Random) -> list[str]:
    """Four of the claim's words, at random among its specifics first."""
    words = list(dict.fromkeys(content_words(text)))
    specific = [w for w in words if w.lower() not in BOILERPLATE]
    chosen = rng.sample(specific, min(4, len(specific)))
    rest = [w for w in words if w not in chosen]
    return chosen + rng.sample(rest, min(4 - len(chosen), len(rest)))


def misspelled(word: str, rng: random.Random) -> str:
    """One typo: two neighbouring letters swapped, a letter dropped or doubled (never the first)."""
    i = rng.randint(1, len(word) - 2)
    roll = rng.random()
    if roll < 0.4:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if roll < 0.7:
        return word[:i] + word[i + 1:]
    return word[:i] + word[i] + word[i:]


def misspelled_query(words: list[str], rng: random.Random) -> str:
    """The four words with the longest alphabetic one misspelled."""
    alphabetic = [w for w in words if w.isalpha() and len(w) >= 5]
    if not alphabetic:
        return " ".join(words)
    target = max(alphabetic, key=len)
    return " ".join(misspelled(w, rng) if w == target else w for w in words)


def _reformat_number(text: str, rng: random.Random) -> str:
    def one(match: re.Match[str]) -> str:
        value = match.group()
        if "," in value:
            return value.replace(",", "")
        if "." in value:
            return value + "0"
        return f"{int(value):,}" if len(value) > 3 else value
    numbers = list(re.finditer(r"\d[\d,]*(?:\.\d+)?", text))
    if not numbers:
        return text
    chosen = rng.choice(numbers)
    out = text[:chosen.start()] + one(chosen) + text[chosen.end():]
    return out.replace("%", " percent", 1) if "%" in out and rng.random() < 0.5 else out


def restated(text: str, rng: random.Random) -> str:
    """The same claim reworded the way agents restate one another: one of five kinds of change."""
    kind = rng.randrange(5)
    if kind == 0:  # word order: the clause after the first comma moved to the front
        head, sep, tail = text.rstrip(".").partition(", ")
        return f"{tail[0].upper()}{tail[1:]}, {head[0].lower()}{head[1:]}." if sep else f"{text.rstrip('.')}"
    if kind == 1:  # case
        return text.upper() if rng.random() < 0.5 else text.lower()
    if kind == 2:  # punctuation
        return text.replace(",", "").replace(".", "").replace("'s", "s") + "!"
    if kind == 3:  # one word changed
        words = text.split(" ")
        swappable = [i for i, w in enumerate(words) if w.strip(",.").lower() in _SWAPS]
        alphabetic = [i for i, w in enumerate(words) if w.strip(",.").isalpha()]
        i = rng.choice(swappable or alphabetic)
        bare = words[i].strip(",.").lower()
        words[i] = words[i].replace(words[i].strip(",."), _SWAPS.get(bare, "notably"))
        return " ".join(words)
    return _reformat_number(text, rng)
