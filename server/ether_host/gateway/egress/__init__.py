"""Egress: agents' HTTP requests through the host, under per-agent policies, with an audit log."""
