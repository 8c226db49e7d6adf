# Prometheus from Debian bookworm (2.42), used like the official prom/prometheus image: the binary as
# the entrypoint, the compose file's flags as the command, data in /prometheus
# (PROMETHEUS_IMAGE=fraud-local/prometheus:2-bookworm; the compose file's `monitoring` profile).
# The package is installed in a first stage and only what runs is kept: the static binary and its web
# UI (templates, and the JavaScript libraries its static folder links to), not the package's
# dependencies, man pages and locales.
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE} AS package
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/*

FROM ${BASE_IMAGE}
COPY --from=package /usr/bin/prometheus /usr/bin/prometheus
COPY --from=package /usr/share/prometheus /usr/share/prometheus
COPY --from=package /usr/share/javascript /usr/share/javascript
# The package's own user and group ids (nobody's otherwise): /prometheus is the only folder it writes.
RUN groupadd --system prometheus && useradd --system --gid prometheus --no-create-home prometheus \
    && mkdir -p /prometheus /etc/prometheus && chown prometheus:prometheus /prometheus
WORKDIR /prometheus
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
