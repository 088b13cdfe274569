# Wyoming Pocket TTS: the Home Assistant add-on image, and a standalone server.
#
#   docker build -t wyoming-pocket-tts .
#   docker run -p 10200:10200 -v ./data:/data wyoming-pocket-tts --voice alba
#
# The Supervisor passes BUILD_FROM from build.yaml (a per-architecture base);
# the default below is the same base published for every architecture, so a
# plain `docker build` (or `docker buildx build --platform linux/arm64`) works.
ARG BUILD_FROM=ghcr.io/home-assistant/base-debian:trixie
FROM ${BUILD_FROM}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# CPU-only wheels: the default torch wheels on PyPI carry CUDA libraries, several
# gigabytes that a Raspberry Pi or a NUC cannot use.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

# Every dependency comes as a binary wheel, so no compiler is installed (and none
# is left behind); apt lists and pip caches are removed in the same layer.
RUN \
    apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 \
        python3-venv \
        tini \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir \
        --index-url "${TORCH_INDEX_URL}" \
        "torch==${TORCH_VERSION}" \
    && rm -rf /var/lib/apt/lists/*

ENV PATH="/opt/venv/bin:${PATH}"

# Torch above is the slow layer; changes to our code only rebuild from here.
WORKDIR /usr/src/wyoming-pocket-tts
COPY pyproject.toml README.md ./
COPY wyoming_pocket_tts ./wyoming_pocket_tts
RUN \
    pip install --no-cache-dir --prefer-binary . \
    && cd / \
    && rm -rf /usr/src/wyoming-pocket-tts

WORKDIR /
COPY addon/rootfs /

# /data is the add-on's persistent folder (and the volume to mount elsewhere):
# the Hugging Face cache with the downloaded model and voices, and custom voices.
ENV \
    WYOMING_POCKET_TTS_DOWNLOAD_DIR=/data \
    WYOMING_POCKET_TTS_VOICES_DIR=/data/voices \
    HF_HOME=/data/huggingface \
    PYTHONUNBUFFERED=1
VOLUME /data

EXPOSE 10200

# A Describe/Info round trip, not just an open port. The long start period
# covers the first start, which downloads the model.
HEALTHCHECK --start-period=30m --interval=30s --timeout=20s --retries=3 \
    CMD ["python3", "-m", "wyoming_pocket_tts", "health-check", "--timeout", "15"]

ENTRYPOINT ["/usr/local/bin/pocket-tts-entrypoint"]
CMD []

LABEL \
    io.hass.type="addon" \
    io.hass.arch="aarch64|amd64" \
    org.opencontainers.image.title="Wyoming Pocket TTS" \
    org.opencontainers.image.description="Wyoming text-to-speech server running Kyutai's Pocket TTS on small CPUs" \
    org.opencontainers.image.licenses="MIT"
