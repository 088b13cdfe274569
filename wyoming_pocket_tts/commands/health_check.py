"""`wyoming-pocket-tts health-check`: exit 0 when the server answers, 1 otherwise.

Used by the Docker HEALTHCHECK, the Kubernetes probes and the add-on's discovery
service; prints one line saying what answered or why nothing did.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from wyoming_pocket_tts.server.health import default_uri, probe_server

HELP = "check that a running server answers Describe (exit 0) or not (exit 1)"


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--uri",
        default=None,
        help="server to ask, tcp://HOST:PORT or unix://PATH (default: the server's "
        "WYOMING_POCKET_TTS_URI on this machine, else tcp://127.0.0.1:10200)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=5.0,
        help="seconds allowed for connecting and answering (default: 5)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing, only set the exit code"
    )


def main(args: argparse.Namespace) -> int:
    uri = args.uri or default_uri()
    result = asyncio.run(probe_server(uri, args.timeout))
    if not args.quiet:
        stream = sys.stdout if result.healthy else sys.stderr
        print(("healthy: " if result.healthy else "unhealthy: ") + result.detail, file=stream)
    return 0 if result.healthy else 1
