#!/bin/bash
# What the Kafka distribution's bin/kafka-broker-api-versions.sh runs (the health check of the compose file).
exec java -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -cp '/opt/kafka/libs/*' \
    org.apache.kafka.tools.BrokerApiVersionsCommand "$@"
