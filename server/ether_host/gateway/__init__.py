"""The gateway: user sessions through I/O gateway agents, their shared context, turn
pipelines, messages between agents, and agents' controlled network egress with an audit log."""

from ether_host.gateway import events
from ether_host.gateway.context import MERGE_PATCH, REMOVE, REPLACE, SET, Change
from ether_host.gateway.egress.audit import ALLOWED, DENIED, AuditFilter, AuditRecord
from ether_host.gateway.egress.fetch import FetchRefused, FetchRequest
from ether_host.gateway.elsewhere import GatewayAgentElsewhere, OtherGateways
from ether_host.gateway.events import SessionEvent
from ether_host.gateway.messaging import Message, SubscriptionLagged, check_topic
from ether_host.gateway.notices import SESSION_CLOSED, TURN, SessionNotices, SessionNotify
from ether_host.gateway.pipeline import Pipeline, Step, Trigger
from ether_host.gateway.pipeline import describe as describe_pipeline
from ether_host.gateway.records import SessionRecords
from ether_host.gateway.session import CLOSED, OPEN, Session
from ether_host.gateway.store import GatewayStore, SavedSession
from ether_host.gateway.usecases import Gateway

__all__ = [
    "ALLOWED",
    "CLOSED",
    "DENIED",
    "MERGE_PATCH",
    "OPEN",
    "REMOVE",
    "REPLACE",
    "SESSION_CLOSED",
    "SET",
    "TURN",
    "AuditFilter",
    "AuditRecord",
    "Change",
    "FetchRefused",
    "FetchRequest",
    "Gateway",
    "GatewayAgentElsewhere",
    "GatewayStore",
    "Message",
    "OtherGateways",
    "Pipeline",
    "SavedSession",
    "Session",
    "SessionEvent",
    "SessionNotices",
    "SessionNotify",
    "SessionRecords",
    "Step",
    "SubscriptionLagged",
    "Trigger",
    "check_topic",
    "describe_pipeline",
    "events",
]
