"""Pocket TTS in plain PyTorch: FlowLM, the Mimi codec, and the streaming synthesizer.

Nothing in this package knows about Wyoming; the server talks to it through
`synthesizer` and `voice`.
"""

import os

from .cpu.allocator import use_huge_pages, use_transient_blas_buffers

# Before anything imports torch: see allocator.py.
use_transient_blas_buffers()

# oneDNN, PyTorch's x86 kernel library, keeps a compiled kernel (about 0.6 MB) for
# every input shape it meets, up to 1024 in each of its two caches. A server meets a
# new shape with almost every new text length, so its memory would creep up by
# hundreds of MB over days. 128 leaves room for the shapes of several concurrent
# streams (four measured no slower with 128 or even 64 than with 1024). Read at
# oneDNN's first use, which is after this package is imported; a value set in the
# environment is kept.
PRIMITIVE_CACHE_CAPACITY = "128"
for _variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
    os.environ.setdefault(_variable, PRIMITIVE_CACHE_CAPACITY)

# Before the first tensor: see allocator.py.
use_huge_pages()
