"""RDF written as text while it streams: Turtle and TriG statements, JSON-LD node objects. Pure.

A node is a JSON-LD node object whose keys are prefixed names (`prov:wasDerivedFrom`) and whose values are
literals (str, int, bool), `{"@id": iri}` or `{"@value": text, "@type": "xsd:dateTime"}`; the same node
prints as one Turtle statement or one element of a JSON-LD `@graph`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from typing import Any

VOCAB = "urn:threadline:vocab#"
PREFIXES = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "prov": "http://www.w3.org/ns/prov#",
    "dct": "http://purl.org/dc/terms/",
    "np": "http://www.nanopub.org/nschema#",
    "tl": VOCAB,
}
Node = dict[str, Any]
_LOCAL = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# Turtle string escapes: the two characters that end or escape a string, and every control character.
_ESCAPES = str.maketrans({**{chr(c): f"\\u{c:04X}" for c in range(0x20)}, "\\": "\\\\", '"': '\\"'})
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\]')


def ref(iri: str) -> dict[str, str]:
    return {"@id": iri}


def when(value: str | datetime | None) -> dict[str, str] | None:
    if value is None:
        return None
    return {"@value": value.isoformat() if isinstance(value, datetime) else value, "@type": "xsd:dateTime"}


def day(value: str | None) -> dict[str, str] | None:
    """A calendar day (YYYY-MM-DD) as an xsd:date."""
    return None if value is None else {"@value": value, "@type": "xsd:date"}


def node(iri: str, types: Iterable[str], **properties: Any) -> Node:
    """A node; properties are given as prefix__local=value (None values and empty lists are left out)."""
    found: Node = {"@id": iri, "@type": list(types)}
    for key, value in properties.items():
        if value is None or value == []:
            continue
        found[key.replace("__", ":", 1)] = value
    return found


# --- Turtle and TriG --------------------------------------------------------------------------------


def prefixes() -> str:
    return "".join(f"@prefix {name}: <{iri}> .\n" for name, iri in PREFIXES.items()) + "\n"


def _term(value: str) -> str:
    prefix, sep, local = value.partition(":")
    if sep and prefix in PREFIXES and _LOCAL.match(local):
        return value
    return "<" + _NOT_IN_IRI.sub(lambda m: f"%{ord(m.group()):02X}", value) + ">"


@lru_cache(maxsize=512)
def _name(value: str) -> str:
    """A property or class: few of them, each written once per record."""
    return _term(value)


def _string(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def _object(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        if "@id" in value:
            return _term(value["@id"])
        return f"{_string(value['@value'])}^^{_name(value['@type'])}"
    return _string(str(value))


def turtle(item: Node, indent: str = "") -> str:
    """One node as one Turtle statement (subject, `a` its types, then each property)."""
    lines = []
    if item.get("@type"):
        lines.append("a " + ", ".join(_name(t) for t in item["@type"]))
    for key, value in item.items():
        if key.startswith("@"):
            continue
        values = value if isinstance(value, list) else [value]
        lines.append(f"{_name(key)} " + ", ".join(_object(v) for v in values))
    return f"{indent}{_term(item['@id'])} " + f" ;\n{indent}    ".join(lines) + " .\n"


def graph(name: str, items: Iterable[Node]) -> str:
    """A TriG named graph holding these nodes."""
    return f"{_term(name)} {{\n" + "".join(turtle(i, "    ") for i in items) + "}\n"


# --- JSON-LD ----------------------------------------------------------------------------------------


def jsonld_head() -> str:
    return '{"@context": ' + json.dumps(PREFIXES) + ',\n "@graph": [\n'


def jsonld(item: Node, first: bool) -> str:
    return ("  " if first else ",\n  ") + json.dumps(item, ensure_ascii=False)


JSONLD_TAIL = "\n]}\n"
