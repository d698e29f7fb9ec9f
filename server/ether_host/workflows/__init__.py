"""Workflows: declarative runs of agent tasks -- spec, engine, store, reports."""

from ether_host.workflows.runs import Workflows
from ether_host.workflows.source import check_size as check_spec_size

__all__ = ["Workflows", "check_spec_size"]
