#!/bin/bash
# The locally built Kafka image's entry point, configured as the official apache/kafka image is: every
# KAFKA_* variable but the JVM's is a broker property (KAFKA_A_B -> a.b, '__' -> '_', '___' -> '-'),
# CLUSTER_ID formats the KRaft log directory at the first start (kept on restart, as on a volume).
set -euo pipefail
CONFIG=/opt/kafka/config/server.properties
: > "$CONFIG"
for name in $(compgen -e | grep '^KAFKA_' | sort); do
    case $name in
        KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_GC_LOG_OPTS|KAFKA_JMX_OPTS|KAFKA_VERSION) continue ;;
    esac
    prop=${name#KAFKA_}; prop=${prop,,}; prop=${prop//___/-}; prop=${prop//__/%}; prop=${prop//_/.}; prop=${prop//%/_}
    printf '%s=%s\n' "$prop" "${!name}" >> "$CONFIG"
done
java_cmd=(java -XX:+UseG1GC -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -cp '/opt/kafka/libs/*')
log_dirs=$(sed -n 's/^log\.dirs=//p' "$CONFIG")
if [[ ! -f ${log_dirs%%,*}/meta.properties ]]; then
    : "${CLUSTER_ID:?CLUSTER_ID is needed to format the log directory at the first start}"
    "${java_cmd[@]}" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$CONFIG" --ignore-formatted
fi
# shellcheck disable=SC2086  # the heap options are several words
exec "${java_cmd[@]:0:1}" ${KAFKA_HEAP_OPTS:--Xmx1g -Xms1g} "${java_cmd[@]:1}" kafka.Kafka "$CONFIG"
