"""SASL_SSL for the local broker: SCRAM-SHA-512 users, ACLs, a generated CA and broker certificate.

A secure broker has one client listener, ``SASL_SSL`` (TLS with the certificate of ``deploy/tls.py``,
SCRAM-SHA-512 logins), which also carries the broker's own inter-broker requests (a single node
still sends itself transaction markers) under its own user. The KRaft controller listener, on
127.0.0.1 and never advertised, is SASL_SSL too but with PLAIN: SCRAM users live in the metadata log
the controller serves, so a controller cannot check them; its one PLAIN user is the broker.

``StandardAuthorizer`` checks every request against ACLs (``acls.py``): the broker and the admin
(who creates topics and ACLs) are super users; every component has its own user allowed exactly its
topics, consumer groups and transactional ids, and nothing is allowed to anyone else.

The users are created when the storage is formatted (``StorageTool format --add-scram``, whose
arguments are read from an owner-only argument file, never the command line); their passwords and
the keystore password are generated at first start and kept, readable by the owner only, in
``<run_dir>/kafka/security/secrets.json`` beside the certificates, so a restart of the same broker
reuses them. Nothing secret is ever written to the repository or to a process's command line.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.settings import Settings
from deploy.acls import COMPONENTS
from deploy.private_files import write_private
from deploy.tls import make_broker_tls

MECHANISM = "SCRAM-SHA-512"
CONTROLLER_MECHANISM = "PLAIN"
BROKER_USER = "broker"   # the broker itself: inter-broker and controller connections
ADMIN_USER = "admin"     # the operator's tools: topics, ACLs, status
SUPER_USERS = (BROKER_USER, ADMIN_USER)
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class OutdatedSecrets(ValueError):
    """The security folder was made by an older version, with other users."""


@dataclass(frozen=True)
class BrokerSecrets:
    folder: str
    keystore_password: str
    broker_password: str
    admin_password: str
    component_passwords: dict[str, str] = field(default_factory=dict)   # component -> password

    @property
    def keystore(self) -> Path:
        return Path(self.folder) / "broker.p12"

    @property
    def ca_file(self) -> Path:
        return Path(self.folder) / "ca.pem"

    def users(self) -> dict[str, str]:
        """Every SCRAM user and its password."""
        return {BROKER_USER: self.broker_password, ADMIN_USER: self.admin_password, **self.component_passwords}


def secrets_file(folder: Path) -> Path:
    return folder / "secrets.json"


def load(folder: Path) -> BrokerSecrets:
    """The secrets kept in ``folder`` (OutdatedSecrets if they lack a user of today's)."""
    try:
        made = BrokerSecrets(**json.loads(secrets_file(folder).read_text()))
    except TypeError:
        made = None
    if made is None or set(made.component_passwords) != set(COMPONENTS):
        raise OutdatedSecrets(f"{secrets_file(folder)} lacks the users of today's secure broker "
                              f"({', '.join(COMPONENTS)})")
    return made


def load_or_create(folder: Path, host: str) -> BrokerSecrets:
    """The broker's certificates and passwords in ``folder``: read if present, else generated."""
    if secrets_file(folder).exists():
        return load(folder)
    tls = make_broker_tls(folder, hosts=tuple(dict.fromkeys((host, "127.0.0.1", "localhost"))))
    made = BrokerSecrets(folder=str(folder), keystore_password=tls.keystore_password,
                         broker_password=secrets.token_urlsafe(24), admin_password=secrets.token_urlsafe(24),
                         component_passwords={c: secrets.token_urlsafe(24) for c in COMPONENTS})
    write_private(secrets_file(folder), json.dumps(asdict(made)))
    return made


def server_properties(made: BrokerSecrets, listener_name: str) -> str:
    """The broker settings of a SASL_SSL listener called ``listener_name`` and the controller's."""
    prefix = f"listener.name.{listener_name.lower()}"
    return "\n".join([
        f"authorizer.class.name={AUTHORIZER}",
        "super.users=" + ";".join(f"User:{user}" for user in SUPER_USERS),
        "allow.everyone.if.no.acl.found=false",
        f"{prefix}.sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        f'{prefix}.{MECHANISM.lower()}.sasl.jaas.config={SCRAM_MODULE} required username="{BROKER_USER}" '
        f'password="{made.broker_password}";',
        # The controller listener: PLAIN, its one user the broker (client side: username/password).
        f"listener.name.controller.sasl.enabled.mechanisms={CONTROLLER_MECHANISM}",
        f"sasl.mechanism.controller.protocol={CONTROLLER_MECHANISM}",
        f'listener.name.controller.{CONTROLLER_MECHANISM.lower()}.sasl.jaas.config={PLAIN_MODULE} required '
        f'username="{BROKER_USER}" password="{made.broker_password}" '
        f'user_{BROKER_USER}="{made.broker_password}";',
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={made.keystore}",
        f"ssl.keystore.password={made.keystore_password}",
        f"ssl.key.password={made.keystore_password}",
        # The broker's own (inter-broker, controller) connections trust the generated CA and check the host.
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={made.ca_file}",
    ])


def scram_format_args(made: BrokerSecrets) -> list[str]:
    """``StorageTool format`` arguments creating every user (for an argument file: they hold passwords)."""
    args: list[str] = []
    for user, password in made.users().items():
        args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
    return args


def user_settings(settings: Settings, made: BrokerSecrets, user: str) -> Settings:
    """``settings`` with the SASL_SSL connection of ``user`` (the admin or a component) filled in."""
    password = made.users()[user]
    return settings.replace(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism=MECHANISM,
                            kafka_sasl_username=user, kafka_sasl_password=password,
                            kafka_ssl_cafile=str(made.ca_file))


def client_settings(settings: Settings, made: BrokerSecrets) -> Settings:
    """The admin's connection: what the stack's own tools (topics, ACLs, status) use."""
    return user_settings(settings, made, ADMIN_USER)


CLIENT_ENV_KEYS = ("FRAUD_KAFKA_BOOTSTRAP", "FRAUD_KAFKA_SECURITY_PROTOCOL", "FRAUD_KAFKA_SASL_MECHANISM",
                   "FRAUD_KAFKA_SASL_USERNAME", "FRAUD_KAFKA_SASL_PASSWORD", "FRAUD_KAFKA_SSL_CAFILE")


def write_client_env(client: Settings, path: Path) -> Path:
    """The client's connection as ``FRAUD_*`` variables (owner-only file) for ``set -a; . FILE``."""
    env = client.to_env()
    return write_private(path, "".join(f"{key}={env[key]}\n" for key in CLIENT_ENV_KEYS))


def write_user_envs(settings: Settings, made: BrokerSecrets) -> dict[str, Path]:
    """``<user>.env`` in the security folder for the admin and every component."""
    folder = Path(made.folder)
    return {user: write_client_env(user_settings(settings, made, user), folder / f"{user}.env")
            for user in (ADMIN_USER, *COMPONENTS)}
