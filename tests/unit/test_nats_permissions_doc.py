"""deploy/nats-permissions.md shows the role → permissions table of shared/nats_auth.py as it is."""

from __future__ import annotations

from pathlib import Path

from shared.nats_auth import markdown_table
from shared.settings import Settings

DOC = Path(__file__).parents[2] / "deploy" / "nats-permissions.md"


def test_the_deploy_document_shows_the_current_table():
    text = DOC.read_text()
    generated = text.split("<!-- generated from shared/nats_auth.py: begin -->\n")[1].split("\n<!-- generated")[0]
    assert generated.strip() == markdown_table(Settings(nats_prefix="threadline")).strip(), (
        "regenerate the table: python -c 'from shared.nats_auth import markdown_table; "
        "from shared.settings import Settings; print(markdown_table(Settings()))'")
