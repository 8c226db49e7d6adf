# Apache Kafka from Maven Central (as `make fetch` gets it) on the Debian JRE, used like the official
# apache/kafka image: configured by KAFKA_* variables and CLUSTER_ID, data in /var/lib/kafka/data,
# /opt/kafka/bin/kafka-broker-api-versions.sh for the health check, user 1000
# (KAFKA_IMAGE=fraud-local/kafka:4.1.1; built from the repository root by deploy/docker/local-images.sh).
ARG MAVEN_IMAGE=fraud-local/maven:3-jdk17-bookworm
ARG JRE_IMAGE=fraud-local/jre:17-bookworm
FROM ${MAVEN_IMAGE} AS jars
WORKDIR /build
COPY deploy/maven/settings.xml deploy/maven/settings.xml
COPY deploy/docker/local/kafka/pom.xml pom.xml
RUN mvn -B -q -s deploy/maven/settings.xml -f pom.xml \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DoutputDirectory=/out/libs -DincludeScope=runtime \
    && ls /out/libs/kafka_2.13-4.1.1.jar /out/libs/kafka-tools-4.1.1.jar

FROM ${JRE_IMAGE}
COPY --from=jars /out/libs /opt/kafka/libs
COPY deploy/config/kafka-log4j2.properties /opt/kafka/config/log4j2.properties
COPY deploy/docker/local/kafka/run.sh /opt/kafka/run.sh
COPY deploy/docker/local/kafka/kafka-broker-api-versions.sh /opt/kafka/bin/kafka-broker-api-versions.sh
RUN groupadd --gid 1000 appuser \
    && useradd --uid 1000 --gid appuser --no-create-home --shell /usr/sbin/nologin appuser \
    && mkdir -p /var/lib/kafka/data \
    && chown -R appuser:appuser /var/lib/kafka /opt/kafka/config
USER 1000:1000
EXPOSE 9092
CMD ["/opt/kafka/run.sh"]
