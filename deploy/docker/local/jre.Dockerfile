# A Java 17 runtime from Debian bookworm at /opt/java/openjdk, where the official eclipse-temurin image
# has it: deploy/docker/app.Dockerfile copies that folder whole (JRE_IMAGE=fraud-local/jre:17-bookworm).
# Copied with its symlinks resolved (Debian links conf/ and the CA store to /etc), so the copy stands alone.
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless ca-certificates-java \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/java \
    && cp -rL /usr/lib/jvm/java-17-openjdk-amd64 /opt/java/openjdk \
    && /opt/java/openjdk/bin/java -version
ENV JAVA_HOME=/opt/java/openjdk \
    PATH=/opt/java/openjdk/bin:$PATH
CMD ["java", "-version"]
