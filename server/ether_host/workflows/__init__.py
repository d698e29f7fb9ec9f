"""Workflows: declarative runs of agent tasks -- spec, engine, store, reports."""

from ether_host.workflows.service import Workflows

__all__ = ["Workflows"]
