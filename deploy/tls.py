"""A throw-away certificate authority and broker certificate for the local SASL_SSL broker.

Made with Java's ``keytool`` (Java is needed for the broker anyway): a self-signed CA, a broker key
pair whose certificate the CA signs for ``127.0.0.1`` and ``localhost``, the broker's PKCS12 keystore
(key + certificate chain) and the CA certificate as PEM for the clients (kafka-python and aiokafka take
a PEM CA file, Spark's connector a PEM truststore). Everything goes to a folder of the git-ignored run
directory, readable by the owner only; the keystore password is generated here and never stored in
the repository.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# keytool is a short-lived JVM: these flags halve its start-up time (no C2 compiler, serial GC).
_FAST_JVM = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]
VALIDITY_DAYS = "30"


class CertificateError(RuntimeError):
    """keytool failed; the message carries its output."""


@dataclass(frozen=True)
class BrokerTls:
    keystore: Path          # PKCS12: the broker's key and its certificate chain
    keystore_password: str
    ca_file: Path           # PEM: the CA certificate clients trust


def make_broker_tls(out_dir: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> BrokerTls:
    """Generate a CA and a broker certificate for ``hosts`` in ``out_dir`` (replacing what is there)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise CertificateError("keytool (part of the Java runtime) is not on PATH: install Java 17+ and retry.")
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o700)
    password = secrets.token_urlsafe(24)
    ca_store, keystore = out_dir / "ca.p12", out_dir / "broker.p12"
    ca_file, chain = out_dir / "ca.pem", out_dir / "broker-chain.pem"
    for path in (ca_store, keystore, ca_file, chain):
        path.unlink(missing_ok=True)

    def run(*args: str, stdin: str | None = None) -> str:
        cmd = [keytool, *_FAST_JVM, *args, "-storepass:env", "FRAUD_KEYTOOL_PASS"]
        result = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                                env=dict(os.environ, FRAUD_KEYTOOL_PASS=password))
        if result.returncode != 0:
            raise CertificateError(f"keytool {args[0]} failed: {result.stdout[-300:]} {result.stderr[-300:]}")
        return result.stdout

    ec = ["-keyalg", "EC", "-groupname", "secp256r1", "-validity", VALIDITY_DAYS, "-storetype", "PKCS12"]
    run("-genkeypair", "-keystore", str(ca_store), "-alias", "ca", "-dname", "CN=fraud-local-ca",
        "-ext", "bc:c", *ec)
    run("-genkeypair", "-keystore", str(keystore), "-alias", "broker", "-dname", f"CN={hosts[0]}", *ec)
    request = run("-certreq", "-keystore", str(keystore), "-alias", "broker")
    san = ",".join(f"ip:{h}" if h.replace(".", "").isdigit() else f"dns:{h}" for h in hosts)
    signed = run("-gencert", "-keystore", str(ca_store), "-alias", "ca", "-rfc", "-validity", VALIDITY_DAYS,
                 "-ext", f"san={san}", "-ext", "ku:c=digitalSignature,keyEncipherment",
                 "-ext", "eku=serverAuth,clientAuth", stdin=request)
    ca_file.write_text(run("-exportcert", "-keystore", str(ca_store), "-alias", "ca", "-rfc"))
    chain.write_text(signed + ca_file.read_text())
    run("-importcert", "-keystore", str(keystore), "-alias", "broker", "-file", str(chain), "-noprompt")
    # The CA signed its one certificate: drop its key so nothing else can ever be signed with it.
    ca_store.unlink()
    chain.unlink()
    for path in out_dir.iterdir():
        os.chmod(path, 0o600)
    return BrokerTls(keystore=keystore, keystore_password=password, ca_file=ca_file)
