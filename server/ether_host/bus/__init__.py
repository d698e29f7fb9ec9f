"""In-process event fan-out. A Redis Streams bus for several hosts plugs in here later."""

from ether_host.bus.history import History

__all__ = ["History"]
