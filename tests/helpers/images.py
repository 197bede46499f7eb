"""Image bytes for the reader tests: a real PNG encoded by Pillow, and a hand-built one whose chunks say what a test
wants (a declared size far over the pixel limit, an IDAT that is not a zlib stream) with every CRC valid.

``from tests.helpers.images import png_bytes, raw_png`` (files on disk: conftest's ``make_image`` fixture).
"""

from __future__ import annotations

import io
import struct
import zlib


def png_bytes(width: int, height: int, color=(10, 20, 30)) -> bytes:
    """A ``width x height`` RGB PNG of one colour, as Pillow encodes it (the same bytes for the same arguments, so a
    test can hash them as a converter names its files)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def raw_png(width: int, height: int, idat: bytes) -> bytes:
    """A PNG file (8-bit grayscale) with the given IHDR size and raw IDAT payload; every chunk CRC is valid (PNG
    specification, section 5: length, type, data, CRC-32 of type + data)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
