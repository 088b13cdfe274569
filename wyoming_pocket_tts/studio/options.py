"""The studio's command-line options (kept apart so that parsing them loads no web server)."""

from __future__ import annotations

import argparse
import ipaddress
from urllib.parse import urlparse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def http_uri(value: str) -> tuple[str, int]:
    """`tcp://HOST:PORT` as (host, port), for argparse."""
    parsed = urlparse(value)
    try:
        port = parsed.port
    except ValueError:
        port = None
    if parsed.scheme != "tcp" or not parsed.hostname or port is None:
        raise argparse.ArgumentTypeError(f"expected tcp://HOST:PORT, not {value!r}")
    return parsed.hostname, port


def network(value: str) -> Network:
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address or network: {value!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http-uri",
        type=http_uri,
        metavar="tcp://HOST:PORT",
        help="serve the voice studio here: a web page and HTTP API to hear, add and manage "
        "voices (default: off). It has no login: never expose it beyond a trusted network",
    )
    parser.add_argument(
        "--http-allow",
        type=network,
        action="append",
        default=[],
        metavar="ADDRESS",
        help="accept studio connections only from this address or network (repeatable; "
        "default: from anywhere)",
    )
