"""`wyoming-pocket-tts normalize`: print a text as the server would have it spoken.

With `--text` it prints the one text; without, it reads standard input line by
line and prints each line normalised as soon as it is read, so it works in a pipe.
"""

from __future__ import annotations

import argparse
import sys

from wyoming_pocket_tts.normalize import SUPPORTED_LANGUAGES, normalize

HELP = "print a text with its numbers, units, dates and symbols written out in words"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--language", required=True, choices=SUPPORTED_LANGUAGES,
                        help="language of the text")
    parser.add_argument("--text", default=None,
                        help="the text to normalise (default: each line of standard input)")


def main(args: argparse.Namespace) -> int:
    if args.text is not None:
        print(normalize(args.text, args.language))
        return 0
    for line in sys.stdin:
        print(normalize(line.rstrip("\r\n"), args.language), flush=True)
    return 0
