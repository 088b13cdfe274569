"""The options that several commands share, defined once, and the environment
variables that set them.

Every command that reads model files takes the download options; those that run the
engine take `--model` and `--quantize`; the server and `synthesize` take
`--voices-dir`. Each is defined here, once, with one default, and becomes a typed
value (`model_options`, `download_options`) before it leaves the command line. Any
option `--foo-bar` of the server can also come from `WYOMING_POCKET_TTS_FOO_BAR`, so a
container needs no wrapper script; the command line wins.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

from wyoming_pocket_tts.catalog import load_catalog
from wyoming_pocket_tts.download import DownloadOptions
from wyoming_pocket_tts.resolve import ModelOptions

ENV_PREFIX = "WYOMING_POCKET_TTS_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def add_model_argument(parser: argparse.ArgumentParser, *, paths: bool = True) -> None:
    """`--model`: a catalog name (or, where `paths`, a pocket-tts YAML configuration);
    None stands for the catalog's default model."""
    either = " or the path of a pocket-tts YAML configuration" if paths else ""
    parser.add_argument(
        "--model",
        help=f"catalog name of the model (default: {load_catalog().default_model}; "
        f"`list-models` shows all){either}",
    )


def add_models_argument(parser: argparse.ArgumentParser) -> None:
    """The server's `--model`, once per language it speaks (`resolve.served_models`)."""
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[LANG=]NAME|PATH",
        help=f"a model to serve: a catalog name (default: {load_catalog().default_model}; "
        "`list-models` shows all) or the path of a pocket-tts YAML configuration, "
        "optionally after its language code (fr=french); repeat it for more languages, "
        "the first being the default one",
    )


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """What every command that runs the engine takes: the model, int8, downloads."""
    add_model_argument(parser)
    add_quantize_argument(parser)
    add_download_arguments(parser)


def add_voices_dir_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--voices-dir", type=Path, help=help)


def add_quantize_argument(parser: argparse.ArgumentParser) -> None:
    """`--quantize`, for the server and the engine's own subcommands alike."""
    parser.add_argument(
        "--quantize", action="store_true",
        help="int8 weights for FlowLM's transformer (float16 for its flow head on x86): "
        "faster; the audio differs slightly (the transformer's outputs by about 1%%)",
    )


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="use at most N cores, for a host whose other programs must come first "
        "(default: every core, and one a stage while other programs are busy on them)",
    )


def add_download_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        default=[],
        help="folder searched first for model and voice files, as DIR/<owner>/<repo>/<path> "
        "or as a Hugging Face cache (repeatable; never written to)",
    )
    parser.add_argument(
        "--download-dir",
        type=Path,
        default=None,
        help="Hugging Face cache folder that downloads go to (default: HF_HUB_CACHE, "
        "usually ~/.cache/huggingface/hub)",
    )
    parser.add_argument(
        "--local-files-only",
        action="store_true",
        help="never use the network; fail with a clear message when a file is missing "
        "(HF_HUB_OFFLINE=1 does the same)",
    )


def download_options(args: argparse.Namespace, *, progress: bool = False) -> DownloadOptions:
    return DownloadOptions(
        data_dirs=tuple(args.data_dir),
        download_dir=args.download_dir,
        local_files_only=args.local_files_only,
        progress=progress,
    )


def model_options(
    args: argparse.Namespace,
    *,
    languages: list[str] | None = None,
    voices_dir: Path | None = None,
) -> ModelOptions:
    """The options of `add_model_arguments` (or the server's own), typed; `languages` and
    `voices_dir` for the commands that offer them."""
    return ModelOptions(
        model=args.model,
        languages=tuple(languages or ()),
        quantize=args.quantize,
        download=download_options(args),
        voices_dir=voices_dir,
    )


def defaults_from_environment(
    parser: argparse.ArgumentParser, environ: Mapping[str, str]
) -> None:
    """Make each option's variable its default, so the command line still wins.

    Walks the parser's actions (argparse has no public way to list them) so that options
    defined elsewhere, such as the download ones, get their variables too.
    """
    defaults: dict[str, object] = {}
    for action in parser._actions:
        variable = ENV_PREFIX + action.dest.upper()
        if (
            not action.option_strings
            or action.dest in ("help", "version")
            or variable not in environ
        ):
            continue
        value = environ[variable].strip()
        if isinstance(action, argparse._StoreTrueAction):
            if value.lower() not in _TRUE + _FALSE:
                parser.error(
                    f"{variable}={value!r}: expected one of {', '.join(_TRUE + _FALSE[:-1])}"
                )
            defaults[action.dest] = value.lower() in _TRUE
        elif isinstance(action, argparse._AppendAction):
            convert: Callable[[str], object] = action.type if callable(action.type) else str
            defaults[action.dest] = [
                convert(item.strip()) for item in value.split(",") if item.strip()
            ]
        elif action.dest == "zeroconf":
            defaults[action.dest] = (
                None if value.lower() in _FALSE else ("" if value.lower() in _TRUE else value)
            )
        elif value:
            defaults[action.dest] = value  # a string default: argparse converts and checks it
    parser.set_defaults(**defaults)
