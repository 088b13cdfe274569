"""Downloads with the real huggingface_hub client against a fake hub on 127.0.0.1.

In-process tests point huggingface_hub at the fake hub by patching the constants it
reads `HF_ENDPOINT` and `HF_HUB_OFFLINE` into at import time; the command-line tests
run the package in a subprocess with the real environment variables instead.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants as hub_constants

from tests.support.disk import small_tmpfs
from tests.support.fake_hub import (
    FakeHub,
    PublishedModel,
    Request,
    publish_model,
    tiny_safetensors,
    truncated,
)
from wyoming_pocket_tts.catalog import ModelEntry, find_model
from wyoming_pocket_tts.download import (
    DiskFullError,
    DownloadError,
    DownloadOptions,
    MissingFileError,
    fetch,
    file_problem,
    find_local,
    resolve_model_files,
    resolve_voice_file,
)

TOKEN = "hf_granted"
FALLBACK_NOTICE = "cloning voices from audio is unavailable"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    with FakeHub() as fake:
        monkeypatch.setattr(hub_constants, "ENDPOINT", fake.endpoint)
        monkeypatch.setattr(
            hub_constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            fake.endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        )
        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(hub_constants, "HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield fake


@pytest.fixture
def entry() -> ModelEntry:
    return find_model("english")


@pytest.fixture
def options(tmp_path: Path) -> DownloadOptions:
    return DownloadOptions(download_dir=tmp_path / "cache")


def _offline(options: DownloadOptions) -> DownloadOptions:
    return DownloadOptions(options.data_dirs, options.download_dir, local_files_only=True)


def _file_requests(hub: FakeHub) -> list[Request]:
    """Requests for files, leaving out huggingface_hub's own `/api/...` calls."""
    return [request for request in hub.requests if request.revision is not None]


def _gets(hub: FakeHub) -> list[str]:
    return [request.path for request in _file_requests(hub) if request.method == "GET"]


def test_first_run_downloads_the_pinned_revision_and_later_runs_stay_offline(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = publish_model(hub, entry, ("alba",), granted_tokens=(TOKEN,))
    monkeypatch.setenv("HF_TOKEN", TOKEN)

    files = resolve_model_files(entry, options)
    voice = resolve_voice_file(entry, "alba", options)

    assert files.has_voice_cloning
    assert files.config_path == entry.config_path
    assert files.weights_path.read_bytes() == published.weights
    assert files.tokenizer_path.read_bytes() == published.tokenizer
    assert voice.read_bytes() == published.voices["alba"]
    wanted = [entry.weights, entry.tokenizer, entry.voice("alba").state]
    assert sorted(_gets(hub)) == sorted(
        f"/{f.repo_id}/resolve/{f.revision}/{f.path}" for f in wanted
    )
    assert {r.revision for r in _file_requests(hub)} == {f.revision for f in wanted}

    hub.clear_requests()
    assert resolve_model_files(entry, options) == files
    assert resolve_model_files(entry, _offline(options)) == files
    assert resolve_voice_file(entry, "alba", _offline(options)) == voice
    assert hub.requests == []


def test_an_interrupted_download_resumes(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    # huggingface_hub writes (and so resumes from) whole chunks of 10 MB; small chunks let
    # a 64 kB file show the same behaviour.
    monkeypatch.setattr(hub_constants, "DOWNLOAD_CHUNK_SIZE", 4096)
    published = publish_model(hub, entry, weight_floats=16_384)
    hub.cut_once(entry.weights_without_cloning, after_bytes=3 * 4096)

    files = resolve_model_files(entry, options, want_voice_cloning=False)

    assert files.weights_path.read_bytes() == published.weights_without_cloning
    weights_gets = [
        r for r in hub.requests if r.method == "GET" and r.path.endswith("model.safetensors")
    ]
    assert [r.headers.get("Range") for r in weights_gets] == [None, "bytes=12288-"]


def test_a_token_without_access_falls_back_to_the_ungated_weights(
    hub: FakeHub,
    entry: ModelEntry,
    options: DownloadOptions,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    published = publish_model(hub, entry, granted_tokens=(TOKEN,))
    monkeypatch.setenv("HF_TOKEN", "hf_not_granted")

    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        files = resolve_model_files(entry, options)

    assert not files.has_voice_cloning
    assert files.weights_path.read_bytes() == published.weights_without_cloning
    asked_gated = [r for r in hub.requests if r.path.startswith(f"/{entry.weights.repo_id}/")]
    assert asked_gated and all(r.method == "HEAD" for r in asked_gated)
    notices = [r.getMessage() for r in caplog.records if FALLBACK_NOTICE in r.getMessage()]
    assert len(notices) == 1
    assert "accept its terms" in notices[0]


def test_without_a_token_the_gated_repository_is_not_asked(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, caplog: pytest.LogCaptureFixture
) -> None:
    published = publish_model(hub, entry)

    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        files = resolve_model_files(entry, options)

    assert not files.has_voice_cloning
    assert files.weights_path.read_bytes() == published.weights_without_cloning
    assert not [r for r in hub.requests if r.path.startswith(f"/{entry.weights.repo_id}/")]
    notices = [r.getMessage() for r in caplog.records if FALLBACK_NOTICE in r.getMessage()]
    assert len(notices) == 1 and "HF_TOKEN" in notices[0]


def test_not_wanting_cloning_skips_the_gated_weights_silently(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, caplog: pytest.LogCaptureFixture
) -> None:
    publish_model(hub, entry)
    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        files = resolve_model_files(entry, options, want_voice_cloning=False)
    assert not files.has_voice_cloning
    assert not [r for r in caplog.records if FALLBACK_NOTICE in r.getMessage()]


@pytest.mark.parametrize("how", ["local_files_only", "HF_HUB_OFFLINE"])
def test_offline_and_missing_is_one_clear_error(
    hub: FakeHub,
    entry: ModelEntry,
    options: DownloadOptions,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    publish_model(hub, entry, ("alba",))
    if how == "HF_HUB_OFFLINE":
        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    else:
        options = _offline(options)

    with pytest.raises(MissingFileError) as caught:
        resolve_model_files(entry, options)
    message = str(caught.value)
    assert entry.weights_without_cloning.url in message
    assert str(options.download_dir) in message
    assert message.endswith("wyoming-pocket-tts download --model english")
    assert "\n" not in message

    with pytest.raises(MissingFileError, match=r"download --model english --voice alba$"):
        resolve_voice_file(entry, "alba", options)
    assert hub.requests == []


def test_a_damaged_cached_file_is_deleted_and_downloaded_again(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, caplog: pytest.LogCaptureFixture
) -> None:
    published = publish_model(hub, entry)
    first = resolve_model_files(entry, options, want_voice_cloning=False)
    blob = first.weights_path.resolve()
    blob.write_bytes(truncated(published.weights_without_cloning))
    hub.clear_requests()

    with caplog.at_level(logging.WARNING, logger="wyoming_pocket_tts"):
        again = resolve_model_files(entry, options, want_voice_cloning=False)

    assert again.weights_path.read_bytes() == published.weights_without_cloning
    assert _gets(hub) == [
        (
            f"/{entry.weights_without_cloning.repo_id}/resolve/"
            f"{entry.weights_without_cloning.revision}/{entry.weights_without_cloning.path}"
        )
    ]
    assert any("damaged" in r.getMessage() for r in caplog.records)


def test_a_damaged_file_offline_is_deleted_and_reported_missing(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions
) -> None:
    published = publish_model(hub, entry)
    first = resolve_model_files(entry, options, want_voice_cloning=False)
    first.tokenizer_path.resolve().write_bytes(truncated(published.tokenizer))

    with pytest.raises(MissingFileError, match=re.escape("tokenizer.json")):
        resolve_model_files(entry, _offline(options), want_voice_cloning=False)
    assert not first.tokenizer_path.exists()


def test_data_dirs_are_searched_first_in_both_layouts(
    hub: FakeHub, entry: ModelEntry, tmp_path: Path
) -> None:
    published = publish_model(hub, entry, ("alba",))
    plain = tmp_path / "plain"
    for hub_file, content in [
        (entry.weights, published.weights),
        (entry.tokenizer, published.tokenizer),
    ]:
        target = plain / hub_file.repo_id / hub_file.path
        target.parent.mkdir(parents=True)
        target.write_bytes(content)
    other_cache = tmp_path / "other-cache"
    resolve_voice_file(entry, "alba", DownloadOptions(download_dir=other_cache))
    hub.clear_requests()

    options = DownloadOptions(
        data_dirs=(plain, other_cache), download_dir=tmp_path / "cache", local_files_only=True
    )
    files = resolve_model_files(entry, options)
    voice = resolve_voice_file(entry, "alba", options)

    assert files.has_voice_cloning
    assert files.weights_path == plain / entry.weights.repo_id / entry.weights.path
    assert voice.is_relative_to(other_cache)
    assert hub.requests == []


def test_a_damaged_file_in_a_data_dir_is_skipped_not_deleted(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions, tmp_path: Path
) -> None:
    published = publish_model(hub, entry)
    damaged = tmp_path / "data" / entry.tokenizer.repo_id / entry.tokenizer.path
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b'{"truncated": ')
    options = DownloadOptions(data_dirs=(tmp_path / "data",), download_dir=options.download_dir)

    files = resolve_model_files(entry, options, want_voice_cloning=False)

    assert files.tokenizer_path != damaged
    assert files.tokenizer_path.read_bytes() == published.tokenizer
    assert damaged.read_bytes() == b'{"truncated": '


def test_a_file_the_hub_lacks_is_a_clear_error(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions
) -> None:
    publish_model(hub, entry)
    with pytest.raises(DownloadError, match=r"the hub has no .*embeddings/alba\.safetensors"):
        resolve_voice_file(entry, "alba", options)


def test_unknown_voice_is_refused_before_any_request(
    hub: FakeHub, entry: ModelEntry, options: DownloadOptions
) -> None:
    with pytest.raises(ValueError, match="alba"):
        resolve_voice_file(entry, "albaa", options)
    assert hub.requests == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small-disk", "128k") as mount_point:
        yield mount_point


@pytest.mark.filterwarnings("ignore:Not enough free disk space")
def test_a_full_disk_is_a_clear_error_and_leaves_nothing_half_written(
    hub: FakeHub, entry: ModelEntry, small_disk: Path
) -> None:
    publish_model(hub, entry, weight_floats=100_000)  # 400 kB into 128 kB

    with pytest.raises(DiskFullError, match=r"not enough disk space in .*small-disk"):
        fetch(entry.weights_without_cloning, DownloadOptions(download_dir=small_disk))

    blobs = list(small_disk.rglob("blobs/*"))
    assert blobs == []
    assert (
        find_local(entry.weights_without_cloning, DownloadOptions(download_dir=small_disk)) is None
    )


def test_file_problem_spots_damaged_files(tmp_path: Path) -> None:
    whole = tiny_safetensors(0)
    cases = {
        "whole.safetensors": (whole, None),
        "cut.safetensors": (truncated(whole), "describes"),
        "grown.safetensors": (whole + b"\0", "describes"),
        "garbage.safetensors": (b"\xff" * 64, "header length"),
        "empty.safetensors": (b"", "empty"),
        "broken.json": (b'{"a": ', "cannot be read"),
        "ok.json": (b'{"a": 1}', None),
        "bad.model": (b"\x0a\x05garbage", "SentencePiece"),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        problem = file_problem(path)
        if expected is None:
            assert problem is None, name
        else:
            assert problem is not None and expected in problem, (name, problem)


# The command line, in a subprocess with the real environment variables.


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", *args],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["HF_HOME"] = str(tmp_path / "hf-home")
    return env


def test_download_command_then_offline_use(
    cli_env: dict[str, str], entry: ModelEntry, tmp_path: Path
) -> None:
    cache = str(tmp_path / "cache")
    with FakeHub() as fake:
        published: PublishedModel = publish_model(fake, entry, ("alba", "marius"))
        env = {**cli_env, "HF_ENDPOINT": fake.endpoint}

        done = _run(
            ["download", "--voice", "alba", "--voice", "marius", "--download-dir", cache], env
        )
        assert done.returncode == 0, done.stderr
        assert FALLBACK_NOTICE in done.stderr
        assert "model english (without voice cloning)" in done.stdout
        assert {r.revision for r in _file_requests(fake)} <= {
            entry.weights_without_cloning.revision,
            entry.tokenizer.revision,
            entry.voice("alba").state.revision,
        }
        weights_line = next(line for line in done.stdout.splitlines() if "weights" in line)
        assert Path(weights_line.split()[-1]).read_bytes() == published.weights_without_cloning

        fake.clear_requests()
        offline = {**env, "HF_HUB_OFFLINE": "1"}
        again = _run(["download", "--voice", "alba", "--download-dir", cache], offline)
        assert again.returncode == 0, again.stderr
        voices = _run(["list-voices", "--download-dir", cache], offline)
        models = _run(["list-models", "--download-dir", cache], offline)
        assert fake.requests == []

    assert voices.returncode == 0
    states = {
        line.split()[0]: "not downloaded" not in line for line in voices.stdout.splitlines()[1:]
    }
    assert states["alba"] and states["marius"] and not states["jean"]
    english = next(line for line in models.stdout.splitlines() if line.startswith("english "))
    assert "installed" in english and "voice cloning" not in english
    french = next(line for line in models.stdout.splitlines() if line.startswith("french "))
    assert "not downloaded" in french


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["download", "--model", "englsh"], "unknown model 'englsh' (did you mean english"),
        (["download", "--voice", "albba"], "no predefined voice 'albba' (did you mean alba"),
        (["list-voices", "--model", "frnch"], "unknown model 'frnch' (did you mean french"),
        (["download", "--model", "german", "--local-files-only"], "download --model german"),
    ],
)
def test_command_errors_are_one_line(
    cli_env: dict[str, str], tmp_path: Path, args: list[str], expected: str
) -> None:
    done = _run([*args, "--download-dir", str(tmp_path / "cache")], cli_env)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], done.stderr
    assert "Traceback" not in done.stderr


RETRYING_SCRIPT = """
import logging, sys, time
from pathlib import Path
time.sleep = lambda seconds: None  # huggingface_hub's pauses between retries
logging.basicConfig(level=logging.INFO)
from wyoming_pocket_tts.catalog import find_model
from wyoming_pocket_tts.download import DownloadError, DownloadOptions, fetch
try:
    fetch(find_model("english").tokenizer, DownloadOptions(download_dir=Path(sys.argv[1])))
except DownloadError as error:
    print("error:", error, file=sys.stderr)
"""


def test_each_retry_of_an_unreachable_hub_is_logged_once(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(tmp_path / "hf-home"))
    result = subprocess.run(
        [sys.executable, "-c", RETRYING_SCRIPT, str(tmp_path / "cache")],
        env=env, capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert "error: cannot reach the hub" in result.stderr, result.stderr
    first_retry = [line for line in result.stderr.splitlines() if "[Retry 1/" in line]
    assert len(first_retry) == 1, result.stderr
