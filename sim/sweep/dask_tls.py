"""Connecting a sweep to a Dask scheduler over mutual TLS.

A Dask scheduler executes whatever its clients submit, so ``--scheduler tcp://...`` trusts every
machine that can reach the scheduler's port. On a network that is not private to the user, start
the scheduler and workers with TLS certificates and give the sweep the client side with
``--tls-ca-file``, ``--tls-cert`` and ``--tls-key``: the connection is then encrypted and both ends
are authenticated by the CA. These are passed unchanged to :class:`distributed.security.Security`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError

__all__ = ["DaskTLS", "connect"]


@dataclass(frozen=True)
class DaskTLS:
    """The client's TLS files: the CA that signed the scheduler's certificate, and our own pair."""

    ca_file: str
    cert_file: str
    key_file: str

    @classmethod
    def from_args(
        cls, ca_file: str | None, cert_file: str | None, key_file: str | None
    ) -> DaskTLS | None:
        """The TLS settings from the three CLI flags: all three or none (:class:`InputError`)."""
        given = {"--tls-ca-file": ca_file, "--tls-cert": cert_file, "--tls-key": key_file}
        if not any(given.values()):
            return None
        missing = [flag for flag, value in given.items() if not value]
        if missing:
            raise InputError(
                f"TLS needs --tls-ca-file, --tls-cert and --tls-key; missing {', '.join(missing)}"
            )
        for flag, value in given.items():
            if not Path(str(value)).is_file():
                raise InputError(f"{flag} {value}: no such file")
        return cls(str(ca_file), str(cert_file), str(key_file))


def connect(address: str, tls: DaskTLS | None) -> Any:
    """A :class:`distributed.Client` for ``address``; TLS addresses require ``tls``.

    Returns the address unchanged when no TLS is asked for (the executor connects itself), and
    refuses a plain ``tcp://`` address with TLS files, or a ``tls://`` address without them.
    """
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if tls is None:
        if scheme == "tls":
            raise InputError(
                f"--scheduler {address} uses TLS: give --tls-ca-file, --tls-cert and --tls-key"
            )
        return address
    if scheme != "tls":
        raise InputError(f"--tls-* files given but --scheduler {address} is not a tls:// address")
    from distributed import Client
    from distributed.security import Security

    security = Security(
        tls_ca_file=tls.ca_file,
        tls_client_cert=tls.cert_file,
        tls_client_key=tls.key_file,
        require_encryption=True,
    )
    try:
        return Client(address, security=security, timeout=30)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach Dask scheduler {address!r} over TLS: {exc}") from None
