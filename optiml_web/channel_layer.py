"""The Redis channel layer that live viewers hear runs through, with connections that
survive a silent run and a pool that waits rather than fails when it is full.

channels-redis builds a plain redis-py ConnectionPool for each host, which raises
"Too many connections" the moment one more command needs a socket than the pool allows
(100 by default): 100 viewers leaving at once each send a ZREM while the process's
receive holds a connection in BZPOPMIN. A BlockingConnectionPool makes the 101st wait
for a socket to come back instead.
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class WaitingRedisChannelLayer(RedisChannelLayer):
    """channels_redis.core.RedisChannelLayer whose hosts ({"address": url, **kwargs})
    get a BlockingConnectionPool; kwargs are redis-py's, plus the pool's own
    max_connections and timeout (seconds to wait for a free connection)."""

    def create_pool(self, index: int) -> BlockingConnectionPool:
        host: dict[str, Any] = dict(self.hosts[index])
        return BlockingConnectionPool.from_url(host.pop("address"), **host)
