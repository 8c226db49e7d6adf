# Maven and a JDK 17 from Debian bookworm: the build stage that resolves jars from Maven Central
# (MAVEN_IMAGE=fraud-local/maven:3-jdk17-bookworm for deploy/docker/app.Dockerfile and kafka.Dockerfile).
ARG BASE_IMAGE=fraud-local/debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless ca-certificates-java \
    && rm -rf /var/lib/apt/lists/* \
    && mvn -v
CMD ["mvn", "-v"]
