"""The review UI against hostile pages and text: no login CSRF, no token in the cookie, no reordered text."""

from __future__ import annotations

import re

import httpx2
from sqlalchemy import text

from services.gateway.ui import COOKIE, SIGNIN_COOKIE, csrf_token
from tests.factories import agent_session, claim_item, seed, ui_sign_in

RLO = "\u202e"


def signin_csrf(page: httpx2.Response) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)


async def test_a_sign_in_posted_from_a_foreign_origin_or_without_the_form_is_refused(stack):
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        csrf = signin_csrf(await http.get("/ui/signin"))
        token = stack.tokens["reviewer"]
        foreign = await http.post("/ui/signin", data={"token": token, "next": "/ui", "csrf": csrf},
                                  headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "another site" in foreign.text
        assert COOKIE not in foreign.cookies
        forged = await http.post("/ui/signin", data={"token": token, "next": "/ui", "csrf": "0" * 32})
        assert forged.status_code == 403 and COOKIE not in forged.cookies
        http.cookies.clear()  # a cross-site form carries none of this site's SameSite=Strict cookies
        bare = await http.post("/ui/signin", data={"token": token, "next": "/ui", "csrf": csrf},
                               headers={"Origin": stack.http_url})
        assert bare.status_code == 403 and COOKIE not in bare.cookies
        same_site = await ui_sign_in(http, token)
        assert same_site.status_code == 303 and http.cookies.get(COOKIE)
        assert http.cookies.get(SIGNIN_COOKIE) is None


async def test_the_cookie_holds_a_revocable_expiring_session_id_never_the_token(stack):
    token = await stack.issue_token("reviewer", "cookie-reviewer")  # its own: the test revokes it
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        signed = await ui_sign_in(http, token)
        session_id = http.cookies[COOKIE]
        assert token not in signed.headers["set-cookie"] and token.split("_", 2)[2] not in session_id
        assert (await http.get("/ui")).status_code == 200

        await http.post("/ui/signout", data={"csrf": csrf_token(session_id)})
        http.cookies.set(COOKIE, session_id, path="/ui")  # the old cookie, kept by a thief
        assert (await http.get("/ui")).status_code == 303

        await ui_sign_in(http, token)
        async with stack.db.engine.begin() as connection:
            await connection.execute(text(
                "UPDATE ui_sessions SET expires_at = now() - interval '1 second' WHERE token_id = "
                "(SELECT token_id FROM api_tokens WHERE name = 'cookie-reviewer')"))
        assert (await http.get("/ui")).status_code == 303

        await ui_sign_in(http, token)
        assert (await http.get("/ui")).status_code == 200
        async with stack.api("admin") as api:
            listed = (await api.get("/api/v1/tokens")).json()["tokens"]
            token_id = next(t["tokenId"] for t in listed if t["name"] == "cookie-reviewer")
            assert (await api.delete(f"/api/v1/tokens/{token_id}")).status_code == 200
        assert (await http.get("/ui")).status_code == 303  # revoking the token ends its sessions


async def test_right_to_left_overrides_in_agent_text_are_shown_as_visible_escapes(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item(
            "reordered", [source], text=f"Emissions fell {RLO}%04 yb{RLO} in 2023.")])
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            await ui_sign_in(http, stack.tokens["reviewer"])
            page = await http.get(f"/ui/proposals/{staged['proposalId']}")
    assert page.status_code == 200
    assert RLO not in page.text
    assert "Emissions fell [U+202E]%04 yb[U+202E] in 2023." in page.text
