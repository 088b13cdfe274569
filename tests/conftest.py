"""Session-wide test models, tokenizers and voices, built once under a temporary directory.

Building is cached per directory, so every fixture here costs its build time
once per session: training each test tokenizer takes 5-40 s (500 pieces for
tiny models, 4000 for real sizes, depending on how busy the cores are), then a
tiny model about 1 s and the real-size English model about 15 s. Tests marked
`slow` run by default; `--skip-slow` skips them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wyoming_pocket_tts.engine.cpu.process import prepare_process

# The test process runs the engine as a server's process does: set up before anything
# below imports torch (bounded oneDNN caches, MKL's buffers freed, 2 MB pages).
prepare_process(quantized=False)

from tests.support.reference_model import BuiltModel, build_model  # noqa: E402
from tests.support.tokenizer_json import build_test_tokenizers  # noqa: E402
from tests.support.voices_audio import write_voice_wav  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skip-slow", action="store_true", help="skip tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--skip-slow"):
        return
    skip = pytest.mark.skip(reason="--skip-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tokenizer_dir(models_dir: Path) -> Path:
    """Where the test SentencePiece models are trained (once per vocabulary size)."""
    return models_dir / "tokenizers"


@pytest.fixture(scope="session")
def tokenizer_files(tokenizer_dir: Path) -> tuple[Path, Path]:
    """The 4000-piece test SentencePiece model and its tokenizer.json twin."""
    return build_test_tokenizers(tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_model(models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    """The standard English family shrunk to a few hundred thousand parameters."""
    return build_model(models_dir / "tiny", tiny=True, tokenizer_dir=tokenizer_dir)


@pytest.fixture(scope="session")
def english_model(models_dir: Path, tokenizer_dir: Path) -> BuiltModel:
    """The standard English model at full size (6 layers, d_model 1024), random weights."""
    return build_model(models_dir / "english", tokenizer_dir=tokenizer_dir)


@pytest.fixture(scope="session")
def voice_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default test voice; `eos_at_frame` models are solved for this one."""
    return write_voice_wav(tmp_path_factory.mktemp("voices") / "voice.wav")


@pytest.fixture(scope="session")
def other_voice_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_voice_wav(tmp_path_factory.mktemp("voices") / "other_voice.wav", seed=1)


@pytest.fixture(scope="session")
def model(tiny_model: BuiltModel):
    """Our engine loaded with the tiny model (shared: tests must not modify it)."""
    from wyoming_pocket_tts.engine.model.pocket_tts import PocketTTS

    return PocketTTS.load(tiny_model.config_path)


@pytest.fixture(scope="session")
def voice(model, voice_wav: Path):
    """The default test voice, encoded by our engine with the tiny model."""
    return model.voice_from_audio(voice_wav)
