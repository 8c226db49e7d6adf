# Redis from Debian bookworm (redis-server 7.0), used like the official redis image: `redis-server …`
# as the command, data in /data, redis-cli for the health check (REDIS_IMAGE=fraud-local/redis:7-bookworm).
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
# The official image builds Redis with protected mode off: in a container, clients come from the
# compose network, not loopback, and the port is published on 127.0.0.1 only.
RUN printf '#!/bin/sh\nexec /usr/bin/redis-server "$@" --protected-mode no\n' > /usr/local/bin/redis-server \
    && chmod 755 /usr/local/bin/redis-server
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
