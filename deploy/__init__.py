"""The embedded local stack (``python -m deploy``) and the docker compose deployment."""
