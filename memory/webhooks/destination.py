"""Where a webhook may send: public addresses only, unless an operator allows more.

A webhook URL is written by a workspace admin, but the request leaves from the
server, inside its network. Without this check a URL such as
``http://127.1:6379/`` or ``http://169.254.169.254/`` turns Cairn into a probe of
whatever the server can reach. The rule (``destination_check``):

1. The host is folded (lowercase, no trailing dot, no brackets). Names that are
   always local (``localhost`` and ``*.localhost``) or cloud metadata
   (``metadata.google.internal``, ``metadata``) are refused without resolving.
2. The host is resolved (IP literals in any spelling the C library accepts —
   ``127.1``, ``0x7f.1``, ``2130706433``, ``017700000001`` — resolve without DNS);
   **every** address must be global unicast: loopback, link-local, private,
   unique-local, carrier-grade NAT, multicast, unspecified and reserved
   addresses are refused, as are IPv4 addresses inside IPv6 (mapped, NAT64, 6to4)
   that would be refused themselves.
3. ``CAIRN_WEBHOOK_ALLOW_HOSTS`` lets an operator name internal receivers: a
   listed host name, or addresses inside a listed address or network, pass step
   2. Metadata addresses never pass.

At delivery the same check runs again and the request goes to the address that
was checked (``destination_resolve``), so a name that re-resolves to an internal
address between the check and the connection (DNS rebinding) reaches nothing.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from cairn.errors import ApplicationError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
METADATA_NAMES = {"metadata.google.internal", "metadata", "instance-data"}
METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
}
NAT64 = ipaddress.ip_network("64:ff9b::/96")
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")

REFUSED = (
    "Webhooks go to public addresses only: {host} is {why}. Ask the operator to list "
    "it in CAIRN_WEBHOOK_ALLOW_HOSTS if it is an internal receiver you trust."
)


@dataclass(frozen=True)
class Destination:
    host: str
    addresses: tuple[Address, ...]


#: A host name as a resolver looks it up: dot-separated labels of letters, digits,
#: hyphens (and underscores, which some zones use), after IDNA encoding.
_DNS_NAME = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)(\.(?!-)[a-z0-9_-]{1,63}(?<!-))*\.?$")


def undeliverable_why(url: str) -> str:
    """Why the delivery code could never send to ``url`` as written, or "".

    Decided by parsing ``url`` as delivery does (``urlsplit`` for the host it checks,
    httpx for the request it sends) and refusing whatever the two would not carry
    as written: a part never sent (a fragment), a host the address check and the
    client read differently, a host that is neither an address without a zone index
    nor a name a resolver can look up. ``memory.webhooks.delivery`` asks the same
    before every attempt, so a form and a delivery cannot disagree.
    """
    import httpx  # the client delivery uses; imported here, where it is needed

    parts = urlsplit(url)
    try:
        wire = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return "the HTTP client cannot read it"
    if parts.fragment or wire.fragment or url.rstrip().endswith("#"):
        return "the part after # is never sent to the receiver; remove it"
    host = parts.hostname or ""
    if host_fold(wire.host or "") != host_fold(host):
        return "the address checked and the address connected to would differ"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            ascii_name = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            return f"{host!r} is not a host name a resolver can look up"
        if not _DNS_NAME.match(ascii_name):
            return f"{host!r} is not a host name a resolver can look up"
        return ""
    if getattr(address, "scope_id", None) or "%" in host:
        return "a zone index (%...) names a network interface of this machine"
    return ""


def host_fold(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _embedded_v4(address: Address) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in SIX_TO_FOUR:
        return address.sixtofour
    return None


def address_refusal(address: Address) -> str:
    """Why ``address`` is no place to send to, or "" when it is global unicast."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    inner = _embedded_v4(address)
    if inner is not None:
        return address_refusal(inner)
    for test, why in (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address.is_private, "a private address"),
        (address in ipaddress.ip_network("100.64.0.0/10"), "a carrier-grade NAT address"),
        (address.is_reserved, "a reserved address"),
        (not address.is_global, "not a public address"),
    ):
        if test:
            return why
    return ""


def _allowed() -> tuple[set[str], list]:
    names, networks = set(), []
    for entry in settings.CAIRN_WEBHOOK_ALLOW_HOSTS:
        try:
            networks.append(ipaddress.ip_network(host_fold(entry), strict=False))
        except ValueError:
            names.add(host_fold(entry))
    return names, networks


def _resolve(host: str, port: int) -> tuple[Address, ...]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return ()
    seen: dict[Address, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen[ipaddress.ip_address(sockaddr[0].split("%", 1)[0])] = None
    return tuple(seen)


def destination_check(host: str, port: int, *, unresolved_ok: bool) -> Destination:
    """The checked addresses of ``host``; ``ApplicationError`` (field ``url``) when
    any is refused. A name that does not resolve passes only when ``unresolved_ok``
    (saving a webhook whose DNS is not there yet); delivery resolves it again."""
    folded = host_fold(host)
    names, networks = _allowed()
    if folded in METADATA_NAMES:
        raise _refuse(host, "a cloud metadata name")
    if folded in names:
        addresses = _resolve(folded, port)
        if any(address in METADATA_ADDRESSES for address in addresses):
            raise _refuse(host, "a cloud metadata address")
        return Destination(folded, addresses)
    if folded in LOCAL_NAMES or folded.endswith(".localhost"):
        raise _refuse(host, "a name for this machine")
    addresses = _resolve(folded, port)
    if not addresses and not unresolved_ok:
        raise ApplicationError(
            f"{host} does not resolve to an address.",
            code="invalid",
            fields={"url": ["does not resolve"]},
        )
    for address in addresses:
        if address in METADATA_ADDRESSES:
            raise _refuse(host, "a cloud metadata address")
        why = address_refusal(address)
        if why and not any(address in network for network in networks):
            raise _refuse(host, why)
    return Destination(folded, addresses)


def _refuse(host: str, why: str) -> ApplicationError:
    return ApplicationError(
        REFUSED.format(host=host, why=why),
        code="destination_refused",
        fields={"url": ["not a public address"]},
    )
