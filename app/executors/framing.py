"""Length-prefixed frames between the worker and a process-pool child.

The child reads requests and writes replies with blocking I/O; the worker uses asyncio
streams, so a large reply arriving in pieces never blocks its event loop.
"""

from __future__ import annotations

import asyncio
import os
import struct
from typing import BinaryIO

_HEADER = struct.Struct("!Q")


def encode_frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload)) + payload


def write_frame(fd: int, payload: bytes) -> None:
    """Blocking write of one whole frame (children only, never on the event loop)."""
    view = memoryview(encode_frame(payload))
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_frame_blocking(stream: BinaryIO) -> bytes | None:
    """The next frame, or None at end of stream (children only)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame, or None once the other side has gone."""
    try:
        (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
