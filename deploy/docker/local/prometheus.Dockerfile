# Prometheus from Debian bookworm (2.42), used like the official prom/prometheus image: the binary as
# the entrypoint, the compose file's flags as the command, data in /prometheus
# (PROMETHEUS_IMAGE=fraud-local/prometheus:2-bookworm; the compose file's `monitoring` profile).
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus && chown prometheus:prometheus /prometheus
WORKDIR /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
