"""Several hosts on one Redis (docs/cluster.md): the cluster directory, in which every host
publishes its name, its advertised gRPC address and its agents with their state and load, with
heartbeats and a time to live; ListAgents and GetAgent read it to show the whole cluster; and
the tasks for an agent only other hosts run, over Redis Streams (``remote.py``): ``Cluster`` is
the dispatcher's ``OtherHosts`` (agents/other_hosts.py); and the gateway across hosts
(``gateway.py``: messages, topics and sessions reach any host).

Started by the composition root only when ``[cluster] redis_url`` is set; without it nothing
here runs and redis-py is never imported.
"""

from ether_host.cluster.backlog import StreamBacklog
from ether_host.cluster.gateway import ClusterGateway
from ether_host.cluster.gateway_sessions import RedisSessionRecords
from ether_host.cluster.membership import Cluster, ClusterError, ClusterSettings, ClusterStatus
from ether_host.cluster.records import ActionSummary, PublishedAgent
from ether_host.cluster.view import AgentOnHost, ClusterView, RemoteAgent

__all__ = [
    "ActionSummary",
    "AgentOnHost",
    "Cluster",
    "ClusterError",
    "ClusterGateway",
    "ClusterSettings",
    "ClusterStatus",
    "ClusterView",
    "PublishedAgent",
    "RedisSessionRecords",
    "RemoteAgent",
    "StreamBacklog",
]
