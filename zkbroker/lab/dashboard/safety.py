"""What keeps another web page from driving the lab through a student's browser (DESIGN §11).

- DNS rebinding: a page from evil.example whose name is made to resolve to 127.0.0.1 sends `Host:
  evil.example:8080`; only the address the dashboard is bound to (or `localhost` when bound to loopback)
  is answered, anything else gets 403.
- Cross-site requests: state changes are POST only and need the per-lab token, which is embedded only in
  the page this server serves; a custom header cannot be sent cross-origin without a CORS preflight,
  which this server never grants.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets

TOKEN_HEADER = "X-Lab-Token"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def token_ok(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _split_host(header: str) -> tuple[str, int | None] | None:
    """`Host` into (host, port); IPv6 literals in brackets. None when malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        host, sep, rest = header[1:].partition("]")
        if not sep:
            return None
        port = rest[1:] if rest.startswith(":") else (None if not rest else "x")
    else:
        host, _, port = header.partition(":") if header.count(":") <= 1 else (header, "", "")
        port = port or None
    if port is not None and not port.isdigit():
        return None
    return host, int(port) if port is not None else None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def host_allowed(header: str | None, bound_host: str, port: int) -> bool:
    """Whether a request's Host header names this server: the bound address and port, `localhost` when bound
    to a loopback address, or any IP literal when bound to every address (an IP literal cannot be rebound)."""
    if not header:
        return False
    split = _split_host(header)
    if split is None:
        return False
    host, given_port = split
    if (given_port if given_port is not None else 80) != port:
        return False
    bound = _ip(bound_host)
    asked = _ip(host)
    if bound is None:  # bound by name
        return host == bound_host.lower()
    if asked is None:
        return host == "localhost" and bound.is_loopback
    if bound.is_unspecified:
        return True
    return asked == bound
