"""The README's account of what `threadline demo load` leaves behind matches what it does."""

from __future__ import annotations

import re
from pathlib import Path

from services.cli.demo_case import LEFT_PENDING

README = Path(__file__).resolve().parents[2] / "README.md"
COUNTS = {1: "one proposal is", 2: "two proposals are", 3: "three proposals are"}


def test_the_readme_counts_the_proposals_the_demo_leaves_pending():
    text = re.sub(r"\s+", " ", README.read_text())
    said = re.findall(r"(\w+ proposals? (?:is|are)) left pending", text)
    assert said == [COUNTS[len(LEFT_PENDING)]], said
