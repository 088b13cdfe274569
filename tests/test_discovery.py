"""Zeroconf announcements, seen by a real zeroconf browser on this machine.

mDNS traffic is kept on the loopback interface (`interfaces=["127.0.0.1"]`), so
nothing leaves the machine; the announced address is still the machine's own LAN
address, as it would be for Home Assistant on the network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging

import pytest
from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from wyoming_pocket_tts.server.discovery import (
    SERVICE_TYPE,
    announce_addresses,
    lan_addresses,
    register_zeroconf,
    unregister_zeroconf,
)

LOOPBACK_ONLY = ["127.0.0.1"]


def _needs_lan_address() -> None:
    if not lan_addresses(include_ipv6=False):
        pytest.skip("this machine has no non-loopback IPv4 address to announce")


class Browser:
    """A zeroconf browser on the loopback interface that records what it sees."""

    def __init__(self) -> None:
        self.zeroconf = AsyncZeroconf(interfaces=LOOPBACK_ONLY, ip_version=IPVersion.V4Only)
        self.events: asyncio.Queue[tuple[str, ServiceStateChange]] = asyncio.Queue()
        self._browser = AsyncServiceBrowser(
            self.zeroconf.zeroconf, SERVICE_TYPE, handlers=[self._on_change]
        )

    def _on_change(self, zeroconf, service_type, name, state_change) -> None:
        self.events.put_nowait((name, state_change))

    async def wait_for(self, prefix: str, state: ServiceStateChange) -> str:
        async def first_match() -> str:
            while True:
                name, change = await self.events.get()
                if name.startswith(prefix) and change is state:
                    return name

        return await asyncio.wait_for(first_match(), timeout=15)

    async def close(self) -> None:
        await self._browser.async_cancel()
        await self.zeroconf.async_close()


def test_wildcard_is_never_announced() -> None:
    for host in ("0.0.0.0", "", "::"):
        for address in announce_addresses(host):
            assert not address.is_unspecified
            assert not address.is_loopback
            assert not address.is_link_local


def test_ipv4_comes_first() -> None:
    addresses = announce_addresses("::")
    versions = [address.version for address in addresses]
    assert versions == sorted(versions)
    assert all(address.version == 4 for address in announce_addresses("0.0.0.0"))


def test_literal_and_loopback_hosts() -> None:
    assert announce_addresses("192.0.2.50") == [ipaddress.ip_address("192.0.2.50")]
    assert announce_addresses("127.0.0.1") == []
    assert announce_addresses("::1") == []


def test_registration_is_seen_by_a_browser_then_withdrawn() -> None:
    _needs_lan_address()
    expected = [str(address) for address in lan_addresses(include_ipv6=False)]

    async def scenario():
        browser = Browser()
        try:
            handle = await register_zeroconf("pocket-test", "0.0.0.0", 10234, LOOPBACK_ONLY)
            assert handle is not None
            name = await browser.wait_for("pocket-test.", ServiceStateChange.Added)
            info = AsyncServiceInfo(SERVICE_TYPE, name)
            assert await info.async_request(browser.zeroconf.zeroconf, 3000)
            await unregister_zeroconf(handle)
            removed = await browser.wait_for(name, ServiceStateChange.Removed)
            return handle.name, info.port, info.parsed_addresses(), removed == name
        finally:
            await browser.close()

    name, port, addresses, removed = asyncio.run(scenario())
    assert name == "pocket-test"
    assert port == 10234
    assert addresses == expected
    assert "0.0.0.0" not in addresses
    assert removed


async def _zeroconf_renames_twins_here() -> bool:
    """Whether zeroconf itself, with two responders on this machine's loopback, gives
    the second one of a name another name.

    It needs the first responder's answer to the second's probe, and the kernel hands
    a unicast answer to just one of the sockets sharing port 5353 on the same address:
    on some machines never the one that asked.
    """
    responders, names = [], []
    try:
        for port in (10237, 10238):
            zeroconf = AsyncZeroconf(interfaces=LOOPBACK_ONLY, ip_version=IPVersion.V4Only)
            responders.append(zeroconf)
            info = AsyncServiceInfo(
                SERVICE_TYPE, f"zeroconf-twin.{SERVICE_TYPE}", port=port,
                parsed_addresses=["192.0.2.7"],
            )
            await (await zeroconf.async_register_service(info, allow_name_change=True))
            names.append(info.name)
    finally:
        for zeroconf in responders:
            await zeroconf.async_close()
    return names[0] != names[1]


def test_name_conflict_gets_a_new_name() -> None:
    _needs_lan_address()
    if not asyncio.run(_zeroconf_renames_twins_here()):
        pytest.skip(
            "two mDNS responders on this machine's loopback do not hear each other's probes"
        )

    async def scenario():
        first = await register_zeroconf("pocket-twin", "0.0.0.0", 10235, LOOPBACK_ONLY)
        second = await register_zeroconf("pocket-twin", "0.0.0.0", 10236, LOOPBACK_ONLY)
        names = (first.name, second.name) if first and second else None
        await unregister_zeroconf(second)
        await unregister_zeroconf(first)
        return names

    names = asyncio.run(scenario())
    assert names is not None
    assert names[0] == "pocket-twin"
    assert names[1] != names[0] and names[1].startswith("pocket-twin")


def test_no_multicast_is_a_warning_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    # An interface address this machine does not have: joining the mDNS group fails,
    # as it does on a network or in a container without multicast.
    _needs_lan_address()
    caplog.set_level(logging.WARNING, logger="wyoming_pocket_tts.server.discovery")
    handle = asyncio.run(register_zeroconf(None, "0.0.0.0", 10237, ["203.0.113.7"]))
    assert handle is None
    assert "could not announce" in caplog.text
    asyncio.run(unregister_zeroconf(handle))  # a None handle is fine to pass back


def test_nothing_to_announce_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="wyoming_pocket_tts.server.discovery")
    assert asyncio.run(register_zeroconf(None, "127.0.0.1", 10238, LOOPBACK_ONLY)) is None
    assert "no network address" in caplog.text
