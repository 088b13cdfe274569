"""Announcing the server on the local network with zeroconf (mDNS / DNS-SD).

Home Assistant's Wyoming integration browses `_wyoming._tcp.local.` and offers
every service it finds. The announcement must carry an address other machines can
connect to: a server bound to `0.0.0.0` is reachable on this machine's LAN
addresses, so those are announced (IPv4 first, as Home Assistant connects to the
first address it is given), never the wildcard itself.

Zeroconf is a convenience, not a requirement: on a network (or in a container)
without multicast, registration fails with a one-line warning and the server keeps
serving; it can still be added by hand with its host and port.

Usage from the server::

    handle = await register_zeroconf(name, host, port)   # None when not announced
    ...
    await unregister_zeroconf(handle)                     # accepts None
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass

import ifaddr
from zeroconf import Error as ZeroconfError
from zeroconf import InterfaceChoice, IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

_LOGGER = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# DNS-SD instance names are one DNS label: at most 63 bytes.
_MAX_NAME_BYTES = 63
# The kernel picks the source address for a datagram to the mDNS group; a UDP
# "connect" sends nothing, so this finds the LAN address without any traffic.
_MDNS_GROUP_V4 = "224.0.0.251"


@dataclass(frozen=True)
class ZeroconfHandle:
    """What `unregister_zeroconf` needs to take the announcement back."""

    zeroconf: AsyncZeroconf
    info: AsyncServiceInfo

    @property
    def name(self) -> str:
        """The instance name actually registered (zeroconf renames on conflicts)."""
        return self.info.name.removesuffix("." + SERVICE_TYPE)


def default_service_name() -> str:
    """`pocket-tts-<hostname>`: unique per machine and readable in Home Assistant."""
    return f"pocket-tts-{socket.gethostname().split('.')[0]}"


def _routable(address: IPAddress) -> bool:
    """Whether another machine on the LAN could connect to `address`."""
    return not (
        address.is_loopback
        or address.is_link_local  # needs a scope id: useless in an mDNS answer to others
        or address.is_unspecified
        or address.is_multicast
    )


def _ipv4_first(addresses: Sequence[IPAddress]) -> list[IPAddress]:
    unique = list(dict.fromkeys(addresses))
    return sorted(unique, key=lambda address: address.version)


def _default_route_ipv4() -> ipaddress.IPv4Address | None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((_MDNS_GROUP_V4, 5353))
        return ipaddress.IPv4Address(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()


def lan_addresses(include_ipv6: bool) -> list[IPAddress]:
    """This machine's addresses reachable from the LAN, IPv4 first.

    The address of the interface that carries multicast (the default route) comes
    first, so a machine with several interfaces (Docker bridges, VPNs) announces
    the one its neighbours most likely share.
    """
    found: list[IPAddress] = []
    preferred = _default_route_ipv4()
    if preferred is not None and _routable(preferred):
        found.append(preferred)
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if ip.is_IPv4:
                found.append(ipaddress.IPv4Address(ip.ip))
            elif include_ipv6:
                # ifaddr gives IPv6 as (address, flowinfo, scope_id)
                found.append(ipaddress.IPv6Address(ip.ip[0]))
    return _ipv4_first([address for address in found if _routable(address)])


def announce_addresses(host: str) -> list[IPAddress]:
    """The addresses to announce for a server bound to `host`, IPv4 first.

    A wildcard stands for every LAN address of the matching family (`0.0.0.0`
    listens on IPv4 only; `::` usually on both); a literal address is announced as
    it is; a host name is resolved. Loopback addresses are never announced: nobody
    else could use them.
    """
    if host in ("", "0.0.0.0"):
        return lan_addresses(include_ipv6=False)
    if host == "::":
        return lan_addresses(include_ipv6=True)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        try:
            resolved = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError:
            return []
        candidates: list[IPAddress] = [
            ipaddress.ip_address(str(entry[4][0]).split("%")[0]) for entry in resolved
        ]
    else:
        candidates = [literal]
    return _ipv4_first([address for address in candidates if _routable(address)])


def _instance_name(name: str | None) -> str:
    """A valid DNS-SD instance name: dots would split the label, so they go."""
    label = (name or default_service_name()).replace(".", "-").strip() or default_service_name()
    return label.encode("utf-8")[:_MAX_NAME_BYTES].decode("utf-8", errors="ignore")


async def register_zeroconf(
    name: str | None,
    host: str,
    port: int,
    interfaces: InterfaceChoice | list[str] = InterfaceChoice.All,
) -> ZeroconfHandle | None:
    """Announce `_wyoming._tcp.local.` for a server listening on `host:port`.

    `name` is the instance name shown by browsers (default `pocket-tts-<hostname>`;
    zeroconf appends a number if another server already uses it). `interfaces`
    chooses where mDNS traffic goes (all interfaces by default). Returns None, after
    logging one warning, when there is nothing to announce or multicast is
    unavailable; the caller carries on serving either way.
    """
    addresses = announce_addresses(host)
    if not addresses:
        _LOGGER.warning(
            "Zeroconf: no network address to announce for %s (bound to loopback, or no "
            "LAN address); Home Assistant must be given this server's address by hand",
            host or "0.0.0.0",
        )
        return None

    instance = _instance_name(name)
    info = AsyncServiceInfo(
        SERVICE_TYPE,
        f"{instance}.{SERVICE_TYPE}",
        port=port,
        parsed_addresses=[str(address) for address in addresses],
    )
    ip_version = IPVersion.All if any(a.version == 6 for a in addresses) else IPVersion.V4Only
    zeroconf: AsyncZeroconf | None = None
    try:
        zeroconf = AsyncZeroconf(interfaces=interfaces, ip_version=ip_version)
        # The first await probes for a name conflict, the second sends the announcements.
        broadcast = await zeroconf.async_register_service(info, allow_name_change=True)
        await broadcast
    except (OSError, ZeroconfError) as err:
        _LOGGER.warning(
            "Zeroconf: could not announce the server (%s); it keeps serving, but Home "
            "Assistant will not discover it by itself",
            str(err) or type(err).__name__,
        )
        if zeroconf is not None:
            await zeroconf.async_close()
        return None

    _LOGGER.info(
        "Zeroconf: announced %s at %s port %d",
        info.name,
        ", ".join(str(address) for address in addresses),
        port,
    )
    return ZeroconfHandle(zeroconf=zeroconf, info=info)


async def unregister_zeroconf(handle: ZeroconfHandle | None) -> None:
    """Withdraw the announcement (so browsers drop it at once) and close zeroconf."""
    if handle is None:
        return
    try:
        goodbye = await handle.zeroconf.async_unregister_service(handle.info)
        await goodbye
    except (OSError, ZeroconfError) as err:
        _LOGGER.warning("Zeroconf: could not withdraw the announcement (%s)", err)
    finally:
        await handle.zeroconf.async_close()
