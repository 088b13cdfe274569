"""Uploaded files: what they are (by their bytes, not their names), and recordings made fit
to clone a voice from.

A recording is decoded with libsndfile (WAV, FLAC, Ogg, MP3), or with ffmpeg, where
installed, for what phones and browsers record (M4A/AAC, WebM/Opus). Only its first
minute is decoded; it is then checked (long enough, not silent, not clipped), its
quiet start and end are cut, and it is kept to the 30 s the model listens to. It is
decoded once: the voice is encoded from the samples of the WAV the voices folder keeps.
"""

from __future__ import annotations

import enum
import io
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np
import soundfile

from ..engine.model.audio import MAX_PROMPT_SECONDS

#: Largest upload accepted: a minute of CD-quality WAV fits, and any compressed file.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
#: Longest recording accepted; only its start is used anyway.
MAX_RECORDING_SECONDS = 600.0
#: How much of a recording is decoded: its quiet start is cut before the 30 s are taken.
DECODED_SECONDS = 60.0
#: Less speech than this gives the model too little to imitate.
MIN_SPEECH_SECONDS = 2.0
#: What to ask a speaker for, 5 to 30 s of one person speaking: a few seconds already
#: make a voice (the predefined ones come from such clips), and the model hears no more.
RECOMMENDED_SECONDS = (5.0, MAX_PROMPT_SECONDS)
#: A recording whose loudest sample is below this (-50 dBFS) holds no speech.
SILENCE_PEAK = 10 ** (-50 / 20)
#: Samples this close to full scale count as clipped...
CLIPPED_LEVEL = 0.999
#: ...and a recording with more of them than this share sounds distorted.
MAX_CLIPPED_SHARE = 0.001
#: 20 ms frames quieter than the loudest by more than this are "quiet" for trimming.
QUIET_BELOW_PEAK_DB = 40.0
#: Kept either side of the speech when trimming, so no syllable is cut.
TRIM_MARGIN_SECONDS = 0.1
FFMPEG_TIMEOUT_SECONDS = 60


class StudioError(Exception):
    """A request the studio cannot do: the message says why and what to do instead, the
    status is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class FileKind(enum.Enum):
    VOICE_STATE = "voice state"
    AUDIO = "audio"  # libsndfile reads it
    COMPRESSED_AUDIO = "compressed audio"  # M4A/MP4 or WebM/Matroska: needs ffmpeg


def sniff(data: bytes) -> FileKind:
    """What an upload is, from its first bytes; StudioError (415) for anything else."""
    if len(data) > 8 and data[8:9] == b"{" and _safetensors_header_fits(data):
        return FileKind.VOICE_STATE
    if data[:4] in (b"RIFF", b"RF64", b"fLaC", b"OggS", b"FORM") or data[:3] == b"ID3":
        return FileKind.AUDIO
    if len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:  # an MPEG audio frame
        return FileKind.AUDIO
    if data[4:8] == b"ftyp" or data[:4] == b"\x1a\x45\xdf\xa3":
        return FileKind.COMPRESSED_AUDIO
    raise StudioError(
        "This is neither a recording (WAV, FLAC, Ogg, MP3, M4A, WebM) nor a voice file "
        "(.safetensors).", 415,
    )


def _safetensors_header_fits(data: bytes) -> bool:
    header_length = int.from_bytes(data[:8], "little")
    return 0 < header_length <= len(data) - 8


@dataclass(frozen=True)
class Recording:
    samples: np.ndarray  # mono float32 in [-1, 1]
    sample_rate: int


@dataclass(frozen=True)
class Wav:
    """A recording as the voices folder keeps it: 16-bit WAV (the model reads any rate)."""

    data: bytes
    #: What reading `data` gives back, to the bit: the voice encoded from it is the one
    #: the file makes when its cache is gone.
    recording: Recording


def as_wav(recording: Recording) -> Wav:
    # Rounded to 16 bits here rather than by libsndfile, so that the samples it reads
    # back (each divided by 2**15) are known without reading them.
    pcm = np.clip(np.rint(recording.samples * 32767.0), -32768, 32767).astype(np.int16)
    out = io.BytesIO()
    soundfile.write(out, pcm, recording.sample_rate, format="WAV", subtype="PCM_16")
    return Wav(out.getvalue(), Recording(pcm.astype(np.float32) / 32768, recording.sample_rate))


def decode(data: bytes, kind: FileKind) -> Recording:
    """Decode the start of a recording to mono; StudioError if it cannot be."""
    if kind is FileKind.COMPRESSED_AUDIO:
        data = _ffmpeg_to_wav(data)
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as audio:
            rate = audio.samplerate
            if audio.frames > MAX_RECORDING_SECONDS * rate:
                raise StudioError(
                    f"The recording is {audio.frames / rate / 60:.0f} minutes long; upload at "
                    f"most {MAX_RECORDING_SECONDS / 60:.0f} minutes (only the first "
                    f"{MAX_PROMPT_SECONDS:.0f} s of speech are used).", 413,
                )
            samples = audio.read(int(DECODED_SECONDS * rate), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise StudioError(f"This file cannot be decoded as audio ({error}).", 415) from None
    if not np.isfinite(samples).all():
        raise StudioError("The recording contains invalid samples.")
    return Recording(samples.mean(axis=1), rate)


def _ffmpeg_to_wav(data: bytes) -> bytes:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise StudioError(
            "M4A and WebM recordings need ffmpeg, which this server does not have: "
            "convert the file to WAV, FLAC, Ogg or MP3 (the studio's page does this itself "
            "for recordings your browser can play).", 415,
        )
    with tempfile.NamedTemporaryFile(suffix=".upload") as source:
        source.write(data)
        source.flush()
        try:
            result = subprocess.run(
                [ffmpeg, "-nostdin", "-v", "error", "-i", source.name, "-t", str(DECODED_SECONDS),
                 "-vn", "-ac", "1", "-f", "wav", "-acodec", "pcm_s16le", "-"],
                capture_output=True, timeout=FFMPEG_TIMEOUT_SECONDS, check=False,
            )
        except subprocess.TimeoutExpired:
            raise StudioError("Decoding the recording took too long.", 415) from None
    if result.returncode != 0 or not result.stdout:
        reason = result.stderr.decode(errors="replace").strip().splitlines()
        raise StudioError(
            f"This file cannot be decoded as audio ({reason[-1] if reason else 'no audio'}).", 415
        )
    return _with_known_length(result.stdout)


def _with_known_length(wav: bytes) -> bytes:
    """ffmpeg writing to a pipe cannot go back to fill in the WAV's sizes: fill them in."""
    data_at = wav.find(b"data")
    if wav[:4] != b"RIFF" or data_at < 0:
        return wav
    fixed = bytearray(wav)
    fixed[4:8] = (len(wav) - 8).to_bytes(4, "little")
    fixed[data_at + 4 : data_at + 8] = (len(wav) - data_at - 8).to_bytes(4, "little")
    return bytes(fixed)


def prepare(recording: Recording) -> Recording:
    """The recording checked, its quiet start and end cut, at most the model's 30 s."""
    samples, rate = recording.samples, recording.sample_rate
    peak = float(np.abs(samples).max(initial=0.0))
    if peak < SILENCE_PEAK:
        raise StudioError(
            "The recording is silent: check that the right microphone is selected and "
            "speak close to it."
        )
    if np.count_nonzero(np.abs(samples) >= CLIPPED_LEVEL) > MAX_CLIPPED_SHARE * len(samples):
        raise StudioError(
            "The recording is clipped (too loud, distorted): record again further from "
            "the microphone or with less gain."
        )
    start, end = _speech_bounds(samples, rate, peak)
    speech = samples[start:end][: int(MAX_PROMPT_SECONDS * rate)]
    if len(speech) < MIN_SPEECH_SECONDS * rate:
        raise StudioError(
            f"The recording has {len(speech) / rate:.1f} s of speech; the model needs at "
            f"least {MIN_SPEECH_SECONDS:.0f} s ({RECOMMENDED_SECONDS[0]:.0f} to "
            f"{RECOMMENDED_SECONDS[1]:.0f} s of clear speech work best)."
        )
    return Recording(np.ascontiguousarray(speech), rate)


def _speech_bounds(samples: np.ndarray, rate: int, peak: float) -> tuple[int, int]:
    """From the first to the last 20 ms frame that is not quiet, with a margin."""
    frame = max(1, rate // 50)
    frames = len(samples) // frame
    if frames == 0:
        return 0, len(samples)
    rms = np.sqrt(np.square(samples[: frames * frame].reshape(frames, frame)).mean(axis=1))
    loud = np.flatnonzero(rms > peak * 10 ** (-QUIET_BELOW_PEAK_DB / 20))
    if len(loud) == 0:
        return 0, len(samples)
    margin = int(TRIM_MARGIN_SECONDS * rate)
    return max(0, loud[0] * frame - margin), min(len(samples), (loud[-1] + 1) * frame + margin)


def can_decode_compressed_audio() -> bool:
    """Whether M4A/WebM uploads can be decoded here (ffmpeg is installed)."""
    return shutil.which("ffmpeg") is not None
