"""Completion notifications (docs/notifications.md): a task's, a workflow run's or a session's output
delivered to a webhook (signed, retried, under the gateway's egress policy and audit) or
published on a gateway topic, each delivery recorded with its attempts."""

from ether_host.notifications.model import Notify, NotifySettings
from ether_host.notifications.notifier import Notifier

__all__ = ["Notifier", "Notify", "NotifySettings"]
