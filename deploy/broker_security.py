"""SASL_SSL for the local broker: SCRAM-SHA-512 users, a generated CA and broker certificate.

A secure broker has one client listener, ``SASL_SSL`` (TLS with the certificate of ``deploy/tls.py``,
SCRAM-SHA-512 logins), which also carries the broker's own inter-broker requests (a single node
still sends itself transaction markers) under its own user. The KRaft controller listener stays
PLAINTEXT on 127.0.0.1 and is never advertised to clients.

The users are created when the storage is formatted (``StorageTool format --add-scram``); their
passwords and the keystore password are generated at first start and kept, readable by the owner
only, in ``<run_dir>/kafka/security/secrets.json`` beside the certificates, so a restart of the same
broker reuses them. Nothing secret is ever written to the repository.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from common.settings import Settings
from deploy.private_files import write_private
from deploy.tls import make_broker_tls

MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"   # the broker itself, for inter-broker requests on the SASL_SSL listener
CLIENT_USER = "fraud"    # every component of the application
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class BrokerSecrets:
    folder: str
    keystore_password: str
    broker_password: str
    client_password: str

    @property
    def keystore(self) -> Path:
        return Path(self.folder) / "broker.p12"

    @property
    def ca_file(self) -> Path:
        return Path(self.folder) / "ca.pem"


def secrets_file(folder: Path) -> Path:
    return folder / "secrets.json"


def load_or_create(folder: Path, host: str) -> BrokerSecrets:
    """The broker's certificates and passwords in ``folder``: read if present, else generated."""
    path = secrets_file(folder)
    if path.exists():
        return BrokerSecrets(**json.loads(path.read_text()))
    tls = make_broker_tls(folder, hosts=tuple(dict.fromkeys((host, "127.0.0.1", "localhost"))))
    made = BrokerSecrets(folder=str(folder), keystore_password=tls.keystore_password,
                         broker_password=secrets.token_urlsafe(24), client_password=secrets.token_urlsafe(24))
    write_private(path, json.dumps(asdict(made)))
    return made


def server_properties(made: BrokerSecrets, listener_name: str) -> str:
    """The broker settings of a SASL_SSL listener called ``listener_name``."""
    prefix = f"listener.name.{listener_name.lower()}.{MECHANISM.lower()}"
    return "\n".join([
        f"sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        f'{prefix}.sasl.jaas.config={SCRAM_MODULE} required username="{BROKER_USER}" '
        f'password="{made.broker_password}";',
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={made.keystore}",
        f"ssl.keystore.password={made.keystore_password}",
        f"ssl.key.password={made.keystore_password}",
        # The broker's own (inter-broker) connections trust the generated CA and check the host name.
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={made.ca_file}",
    ])


def scram_format_args(made: BrokerSecrets) -> list[str]:
    """``StorageTool format`` arguments creating both users."""
    args: list[str] = []
    for user, password in ((BROKER_USER, made.broker_password), (CLIENT_USER, made.client_password)):
        args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
    return args


def client_settings(settings: Settings, made: BrokerSecrets) -> Settings:
    """``settings`` with the SASL_SSL connection of the application user filled in."""
    return settings.replace(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism=MECHANISM,
                            kafka_sasl_username=CLIENT_USER, kafka_sasl_password=made.client_password,
                            kafka_ssl_cafile=str(made.ca_file))


CLIENT_ENV_KEYS = ("FRAUD_KAFKA_BOOTSTRAP", "FRAUD_KAFKA_SECURITY_PROTOCOL", "FRAUD_KAFKA_SASL_MECHANISM",
                   "FRAUD_KAFKA_SASL_USERNAME", "FRAUD_KAFKA_SASL_PASSWORD", "FRAUD_KAFKA_SSL_CAFILE")


def write_client_env(client: Settings, path: Path) -> Path:
    """The client's connection as ``FRAUD_*`` variables (owner-only file) for ``set -a; . FILE``."""
    env = client.to_env()
    return write_private(path, "".join(f"{key}={env[key]}\n" for key in CLIENT_ENV_KEYS))
