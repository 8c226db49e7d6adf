# Python 3.11 from Debian bookworm with `python` and `pip` on PATH, as the official python image has
# them: the base of deploy/docker/app.Dockerfile on a machine without an image registry
# (PYTHON_IMAGE=fraud-local/python:3.11-bookworm; deploy/docker/local-images.sh builds it).
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /usr/local/python
# pip trusts the system's CA store (with the machine's own CAs, base-image.sh), not only its bundled one.
ENV PATH=/usr/local/python/bin:$PATH \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
