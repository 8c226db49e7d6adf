"""Code shared by every service: settings, event contracts, Kafka/Spark client helpers."""
