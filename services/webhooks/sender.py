"""Sends one signed event to one receiver: resolve the host, check the address, connect to that address.

The address that was checked is the address connected to (the URL's host is kept in the Host header and
in TLS's server name), so a name that resolves to a public address when checked and to a private one
when connecting cannot steer a delivery into the operator's network. Every attempt is bounded in time,
redirects are not followed, and only a short beginning of the response is read.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2
from standardwebhooks import Webhook as Signer

from services.webhooks import domain
from shared import version
from shared.errors import InvalidArgument, Unavailable
from shared.settings import Settings

CONTENT_TYPE = "application/cloudevents+json"
READ_AT_MOST = 4096


class TargetRefused(Exception):
    """The receiver's address is not one this deployment delivers to."""


class NoSuchHost(LookupError):
    """The name server says the receiver's host does not exist (as opposed to not answering)."""


NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


@dataclass(frozen=True)
class Attempt:
    response_code: int | None
    latency_ms: int
    error: str | None
    excerpt: str | None

    @property
    def succeeded(self) -> bool:
        return domain.accepted(self.response_code)


async def resolve_target(host: str, port: int, *, allow_private: bool, timeout: float) -> str:
    """The address to connect to: the first the host resolves to that this deployment may deliver to."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
    except socket.gaierror as error:
        kind = NoSuchHost if error.errno in NO_SUCH_HOST else LookupError
        raise kind(f"cannot resolve {host}: {error.strerror}") from error
    except (OSError, TimeoutError) as error:
        raise LookupError(f"cannot resolve {host}: {error or 'timed out'}") from error
    reasons = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0])
        reason = None if allow_private else domain.refused_address(address)
        if reason is None:
            return address
        reasons.append(reason)
    raise TargetRefused(f"{reasons[0]}; private and loopback targets are refused "
                        "(THREADLINE_WEBHOOK_ALLOW_PRIVATE is off)")


async def check_registration(url: str, *, allow_private: bool, timeout: float) -> None:
    """Refuse, at registration, a URL this deployment would never deliver to."""
    _, host, port = domain.check_url(url)
    try:
        await resolve_target(host, port, allow_private=allow_private, timeout=timeout)
    except TargetRefused as refused:
        raise InvalidArgument(f"the webhook URL is refused: {refused}", field="url",
                              hint="give a receiver on a public address; an operator may allow private "
                                   "targets with THREADLINE_WEBHOOK_ALLOW_PRIVATE=true") from None
    except NoSuchHost as unknown:
        raise InvalidArgument(f"the webhook URL's host does not exist: {unknown}", field="url",
                              hint="check the host name in the URL") from None
    except LookupError as unresolved:
        raise Unavailable(f"the webhook URL's host cannot be resolved now: {unresolved}", field="url",
                          hint="check the host name, or retry if the name server is down") from None


def body_of(envelope: dict[str, Any]) -> str:
    """The request body: the event in CloudEvents structured JSON, exactly the bytes that are signed."""
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)


def signed_headers(secret: str, event_id: str, body: str, now: datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers: the event id (the same on every retry), when it was sent, the signature."""
    sent = now or datetime.now(UTC)
    return {
        "content-type": CONTENT_TYPE,
        "webhook-id": event_id,
        "webhook-timestamp": str(int(sent.timestamp())),
        "webhook-signature": Signer(secret).sign(event_id, sent, body),
        "user-agent": f"Threadline-Webhooks/{version()}",
    }


class Sender:
    def __init__(self, settings: Settings) -> None:
        self.timeout = settings.webhook_timeout_seconds
        self.allow_private = bool(settings.webhook_allow_private)
        self.client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(self.timeout, connect=min(5.0, self.timeout)),
            follow_redirects=False,
            trust_env=False,  # an operator's HTTP(S)_PROXY is for them, not a path around the address check
            limits=httpx2.Limits(max_connections=settings.webhook_concurrency,
                                 max_keepalive_connections=settings.webhook_concurrency),
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def send(self, url: str, secret: str, envelope: dict[str, Any]) -> Attempt:
        started = time.perf_counter()

        def took() -> int:
            return int((time.perf_counter() - started) * 1000)

        try:
            return await asyncio.wait_for(self._send(url, secret, envelope, took), self.timeout)
        except TimeoutError:
            return Attempt(None, took(), f"no answer within {self.timeout:g} s", None)
        except TargetRefused as refused:
            return Attempt(None, took(), f"refused: {refused}", None)
        except LookupError as unresolved:
            return Attempt(None, took(), domain.short_error(str(unresolved)), None)
        except httpx2.HTTPError as error:
            return Attempt(None, took(), domain.short_error(f"{type(error).__name__}: {error}".rstrip(": ")), None)

    async def _send(self, url: str, secret: str, envelope: dict[str, Any], took: Any) -> Attempt:
        scheme, host, port = domain.check_url(url)
        address = await resolve_target(host, port, allow_private=self.allow_private, timeout=self.timeout)
        target = httpx2.URL(url)
        request_url = target.copy_with(host=address)
        body = body_of(envelope)
        headers = {**signed_headers(secret, envelope["id"], body), "host": target.netloc.decode("ascii"),
                   "accept-encoding": "identity"}
        extensions = {"sni_hostname": host} if scheme == "https" else {}
        request = self.client.build_request("POST", request_url, content=body.encode(), headers=headers,
                                            extensions=extensions)
        response = await self.client.send(request, stream=True)
        try:
            start = b""
            async for chunk in response.aiter_raw():
                start += chunk
                if len(start) >= READ_AT_MOST:
                    break
        finally:
            await response.aclose()
        code = response.status_code
        error = None if domain.accepted(code) else f"HTTP {code}"
        return Attempt(code, took(), error, domain.excerpt(start))
