"""Infrastructure only: the embedded local stack (``python -m deploy``), topics, TLS and docker compose."""
