"""Per-frame image statistics that become perception channels.

Each frame gives ``brightness`` (mean luma, 0-1), ``contrast`` (RMS contrast: standard
deviation of luma, 0-1), ``sharpness`` (variance of the 4-neighbour Laplacian of luma in
0-255 units, the usual blur measure: lower is blurrier), ``saturation`` (share of blown-out
pixels: luma >= 250 of 255) and, per episode, ``hist_dist``
(Hellinger distance, 0-1, between the frame's 8-bin-per-channel colour histogram and that of
the episode's first frame).
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from sim2real._optional import require
from sim2real.errors import IngestError

__all__ = ["HIST_BINS", "STATS", "decode_compressed", "decode_image", "decode_raw",
           "episode_image_columns", "frame_stats", "hist_distance", "is_image_type"]

STATS = ("brightness", "contrast", "sharpness", "saturation")
HIST_BINS = 8
_LEVELS = np.arange(256, dtype=np.float64)
# Frames above this many pixels are subsampled 2x per axis before the statistics: they stay
# comparable within a topic and decoding keeps up with the recorded frame rate.
_MAX_PIXELS = 1_500_000
_RAW = {  # encoding -> (channels, dtype, channel order to RGB or None)
    "rgb8": (3, np.uint8, None), "bgr8": (3, np.uint8, [2, 1, 0]),
    "rgba8": (4, np.uint8, None), "bgra8": (4, np.uint8, [2, 1, 0, 3]),
    "mono8": (1, np.uint8, None), "8uc1": (1, np.uint8, None), "8uc3": (3, np.uint8, [2, 1, 0]),
    "mono16": (1, np.uint16, None), "16uc1": (1, np.uint16, None),
}


def is_image_type(msgtype: str) -> bool:
    """Whether a schema name is one of the image messages sim2real reads."""
    name = msgtype.replace("/msg/", "/").replace(".", "/").split("/")[-1]
    return name in ("Image", "CompressedImage", "RawImage")


def _get(msg: Any, name: str) -> Any:
    return msg[name] if isinstance(msg, dict) else getattr(msg, name)


def _bytes(data: Any) -> bytes | np.ndarray:
    if isinstance(data, str):  # JSON channels carry bytes as base64
        return base64.b64decode(data)
    if isinstance(data, np.ndarray):
        return data
    return bytes(data)


def decode_raw(msg: Any) -> np.ndarray:
    """Pixels of a ``sensor_msgs/Image`` or ``foxglove.RawImage`` as ``(H, W, C)``.

    Raises:
        IngestError: an encoding outside ``rgb8 bgr8 rgba8 bgra8 mono8 mono16 8UC1 8UC3 16UC1``.
    """
    encoding = str(_get(msg, "encoding")).lower()
    if encoding not in _RAW:
        msg_ = f"image encoding {encoding!r} is not supported; expected one of {sorted(_RAW)}"
        raise IngestError(msg_)
    channels, dtype, order = _RAW[encoding]
    height, width, step = int(_get(msg, "height")), int(_get(msg, "width")), int(_get(msg, "step"))
    buf = np.frombuffer(_bytes(_get(msg, "data")), dtype=np.uint8)
    item = np.dtype(dtype).itemsize
    if buf.size < height * step or step < width * channels * item:
        msg_ = f"image data holds {buf.size} bytes; {height}x{step} expected for {encoding}"
        raise IngestError(msg_)
    rows = buf[: height * step].reshape(height, step)[:, : width * channels * item]
    pixels = rows.copy().view(dtype).reshape(height, width, channels)
    if bool(_get(msg, "is_bigendian")) if _has(msg, "is_bigendian") else False:
        pixels = pixels.byteswap()
    return pixels[..., order] if order else pixels


def _has(msg: Any, name: str) -> bool:
    return name in msg if isinstance(msg, dict) else hasattr(msg, name)


def decode_compressed(msg: Any) -> np.ndarray:
    """Pixels of a ``CompressedImage`` (JPEG, PNG, anything pillow reads) as ``(H, W, C)``.

    Raises:
        IngestError: the bytes are not an image pillow can decode.
    """
    img = _open_compressed(msg)
    if img.mode not in ("L", "RGB", "I;16"):
        img = img.convert("RGB")
    pixels = np.asarray(img)
    return pixels[..., None] if pixels.ndim == 2 else pixels


def _open_compressed(msg: Any) -> Any:
    """The decoded PIL image of a compressed frame."""
    image_mod = require("PIL.Image", "ingest")
    try:
        data = _bytes(_get(msg, "data"))
        raw = data.tobytes() if isinstance(data, np.ndarray) else data
        img = image_mod.open(io.BytesIO(raw))
        img.load()
    except (OSError, ValueError, SyntaxError) as err:
        fmt = _get(msg, "format") if _has(msg, "format") else "?"
        raise IngestError(f"compressed image (format {fmt!r}) does not decode: {err}") from err
    return img


def decode_image(msg: Any, msgtype: str) -> Any:
    """Any supported image message as something :func:`frame_stats` takes.

    Compressed frames stay PIL images (no copy to numpy); raw ones are ``(H, W, C)`` arrays.
    """
    if "Compressed" in msgtype:
        return _open_compressed(msg)
    return decode_raw(msg)


def frame_stats(pixels: np.ndarray | Any) -> tuple[np.ndarray, np.ndarray]:
    """Statistics of one frame.

    Luma and histograms come from pillow's C code (``convert("L")``, ``histogram()``), so
    raw and compressed frames of the same pixels give the same numbers; 16-bit frames are
    reduced to their top 8 bits first.

    Args:
        pixels: ``(H, W)`` or ``(H, W, C)`` uint8 / uint16 (RGB(A) or grey), or a PIL image.

    Returns:
        ``(stats, hist)``: the four values of :data:`STATS`, and the concatenated per-channel
        histograms (``HIST_BINS`` per colour channel, each summing to 1).
    """
    image_mod = require("PIL.Image", "ingest")
    img = pixels if isinstance(pixels, image_mod.Image) else _to_image(image_mod, pixels)
    if img.mode not in ("L", "RGB"):
        img = img.convert("RGB")
    if img.width * img.height > _MAX_PIXELS:
        img = img.reduce(2)
    grey = img if img.mode == "L" else img.convert("L")
    counts = np.asarray(grey.histogram(), dtype=np.float64)
    n = max(counts.sum(), 1.0)
    mean = float(counts @ _LEVELS) / n
    var = max(float(counts @ _LEVELS**2) / n - mean * mean, 0.0)
    luma = np.asarray(grey, dtype=np.int16)
    lap = (luma[:-2, 1:-1] + luma[2:, 1:-1] + luma[1:-1, :-2] + luma[1:-1, 2:]
           - 4 * luma[1:-1, 1:-1]).ravel().astype(np.float32)
    sharp = float(lap @ lap) / lap.size - (float(lap.sum()) / lap.size) ** 2 if lap.size else 0.0
    stats = np.array([mean / 255.0, np.sqrt(var) / 255.0, sharp, counts[250:].sum() / n])
    hist = np.asarray(img.histogram(), dtype=np.float64).reshape(-1, HIST_BINS, 256 // HIST_BINS)
    return stats, hist.sum(axis=2).ravel() / n


def _to_image(image_mod: Any, pixels: np.ndarray) -> Any:
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[..., 0]
    elif pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[..., :3]
    return image_mod.fromarray(np.ascontiguousarray(pixels))


def hist_distance(hists: np.ndarray) -> np.ndarray:
    """Hellinger distance of each histogram to the first one.

    Args:
        hists: ``(n_frames, n_bins_total)``, each channel's block summing to 1.

    Returns:
        ``(n_frames,)`` in 0-1; 0 for the first frame.
    """
    if len(hists) == 0:
        return np.zeros(0)
    channels = max(hists.shape[1] // HIST_BINS, 1)
    bc = np.sqrt(hists * hists[0]).sum(axis=1) / channels
    return np.sqrt(np.clip(1.0 - bc, 0.0, 1.0))


def episode_image_columns(prefix: str, frames: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The five perception columns ``<prefix>_<stat>`` of one episode's frames, in order."""
    pairs = [frame_stats(f) for f in frames]
    stats = np.array([p[0] for p in pairs]).reshape(len(pairs), len(STATS))
    columns = {f"{prefix}_{name}": stats[:, i] for i, name in enumerate(STATS)}
    hists = np.array([p[1] for p in pairs])
    columns[f"{prefix}_hist_dist"] = hist_distance(hists) if len(pairs) else np.zeros(0)
    return columns
