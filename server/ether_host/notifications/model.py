"""What a caller asks to be notified at, the host's settings for it, and one delivery."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import httpx

from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.gateway import check_topic
from ether_host.reasons import Reason

# The egress policy webhooks go out under ([gateway.egress.agents."@notify"]), the name audit
# records and topic messages carry: never an agent's (agent names start with a letter).
NOTIFY_IDENTITY = "@notify"
SIGNATURE_HEADER = "X-Ether-Signature"

# A delivery's states: pending until it is delivered, or ends failed (the receiver refused it,
# or every attempt failed) or denied (the egress policy refused it: trying again cannot help).
PENDING, DELIVERED, FAILED, DENIED = "pending", "delivered", "failed", "denied"


@dataclass(frozen=True, slots=True)
class Notify:
    """Where a task's or run's final output goes besides its caller; empty fields: nowhere."""

    webhook_url: str = ""
    reply_topic: str = ""

    def __bool__(self) -> bool:
        return bool(self.webhook_url or self.reply_topic)


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """``[notifications]``: the signing secret and the retry schedule."""

    secret: str = ""
    max_attempts: int = 10
    backoff: float = 1.0  # before the 2nd attempt; doubled for each next one
    max_backoff: float = 300.0

    def check(self, notify: Notify) -> None:
        """A Notify this host can deliver, or InvalidArgument saying what to change."""
        if notify.webhook_url:
            try:
                url = httpx.URL(notify.webhook_url)
            except (httpx.InvalidURL, TypeError) as error:
                raise _bad_url(notify.webhook_url, f"not a URL ({error})") from None
            if url.scheme not in ("http", "https") or not url.host:
                raise _bad_url(notify.webhook_url, "use an http:// or https:// URL with a host")
            if not self.secret:
                raise InvalidArgument(
                    "notify.webhook_url: this host has no [notifications] secret to sign "
                    "webhooks with; set notifications_secret in its config (or "
                    "ETHER_NOTIFICATIONS_SECRET), or use notify.reply_topic",
                    reason=Reason.INVALID_FIELD,
                    violations=[FieldViolation("notify.webhook_url", "no secret on this host")],
                )
        if notify.reply_topic:
            check_topic(notify.reply_topic)

    def signature(self, body: bytes) -> str:
        """``X-Ether-Signature``'s value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
        digest = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        return f"sha256={digest}"

    def pause(self, attempt: int) -> float:
        """Seconds before attempt ``attempt`` (2 and later), before jitter."""
        return float(min(self.max_backoff, self.backoff * 2 ** (attempt - 2)))


def _bad_url(url: str, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"notify.webhook_url {url[:200]!r}: {why}",
        reason=Reason.INVALID_FIELD,
        violations=[FieldViolation("notify.webhook_url", why)],
    )


@dataclass(slots=True)
class Delivery:
    """One output on its way to one place (a webhook or a topic), as the store keeps it."""

    id: str
    kind: str  # "task" | "run" | "turn" | "session_closed"
    subject: str  # the task's or run's id, or the session's
    target: str  # "webhook" | "topic"
    address: str  # the URL or the topic
    body: bytes  # the JSON sent (and published)
    state: str = PENDING
    attempts: int = 0
    last_error: str = ""
    last_status: int = 0
    created: float = 0.0
    updated: float = 0.0
