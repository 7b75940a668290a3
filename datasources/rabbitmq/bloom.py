"""Bloom filters over string IDs: vectorized lookups (numpy), stored as bytes.

A filter of ``m`` bits and ``k`` hash functions answers "maybe present" or "surely absent".
Positions come from one 64-bit SipHash per ID (pandas' ``hash_array``) by double hashing:
``h1 + i·h2 mod m``, ``m`` a power of two, so a filter folds to half its size exactly.
The stored form carries the hash of a fixed probe, so a filter written
by a different hash function is detected on load (and rebuilt by the caller) instead of
answering wrongly. ``m == 0`` is a filter that answers "maybe" for everything.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

_MAGIC = b"JSBLOOM1"
_HEADER = struct.Struct("<8sQIQqQ")  # magic, m, k, n (IDs), newest commit ms, probe hash
_PROBE = "jetspark-bloom-probe"
MAX_BITS_PER_ID = 10  # ~1 % false positives with k = 7
MAX_K = 32
"""More hashes than a filter of ours ever has (7); a file's ``k`` beyond it is not ours."""


def hash64(ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """One uint64 per ID (SipHash-2-4, stable across processes)."""
    arr = ids if isinstance(ids, np.ndarray) else np.asarray(list(ids), dtype=object)
    if arr.size == 0:
        return np.empty(0, np.uint64)
    return pd.util.hash_array(arr, categorize=False)


_PROBE_HASH = int(hash64([_PROBE])[0])


@dataclass
class BloomFilter:
    """``m`` bits, ``k`` hashes, over ``n`` IDs whose newest commit time is ``newest_ms``."""

    m: int
    k: int
    n: int
    newest_ms: int
    bits: np.ndarray  # uint8, m / 8 bytes

    @classmethod
    def build(cls, hashes: np.ndarray, bits_per_id: float, newest_ms: int) -> BloomFilter:
        """A filter of the IDs' ``hashes``; ``m`` is a power of two (see :meth:`fold`)."""
        n = len(hashes)
        m = 0 if bits_per_id < 1 else 1 << max(6, math.ceil(math.log2(max(n * bits_per_id, 1))))
        k = max(1, round(bits_per_id * math.log(2))) if m else 0
        f = cls(m, k, n, newest_ms, np.zeros(m // 8, np.uint8))
        if m:
            pos = f._positions(hashes).ravel()
            np.bitwise_or.at(f.bits, pos >> 3, (1 << (pos & 7)).astype(np.uint8))
        return f

    def _positions(self, hashes: np.ndarray) -> np.ndarray:
        h1 = hashes & np.uint64(0xFFFFFFFF)
        h2 = (hashes >> np.uint64(32)) | np.uint64(1)
        i = np.arange(self.k, dtype=np.uint64)[:, None]
        return (h1[None, :] + i * h2[None, :]) % np.uint64(self.m)

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        """A bool per hash: False means surely absent."""
        if not self.m:
            return np.ones(len(hashes), bool)
        pos = self._positions(hashes)
        hit = (self.bits[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1
        return hit.all(axis=0).astype(bool)

    def fold(self) -> None:
        """Halve the filter in place: bit ``p mod m/2`` is the OR of bits ``p`` and ``p + m/2``.
        Exact for power-of-two ``m`` (every answer "maybe" stays "maybe"); more false positives."""
        if self.m <= 64:
            return
        half = self.m // 16
        self.bits = self.bits[:half] | self.bits[half:]
        self.m //= 2

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes

    def to_bytes(self) -> bytes:
        return _HEADER.pack(_MAGIC, self.m, self.k, self.n, self.newest_ms, _PROBE_HASH) + self.bits.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter | None:
        """The stored filter; None when it is not one, was hashed differently, or its sizes are
        not ones we write (``k`` outside 1..MAX_K, or 0 with no bits; ``m`` not whole bytes):
        a file's ``k`` sets the work and memory of every lookup, so it is never trusted."""
        if len(data) < _HEADER.size:
            return None
        magic, m, k, n, newest, probe = _HEADER.unpack_from(data)
        if magic != _MAGIC or probe != _PROBE_HASH or len(data) != _HEADER.size + m // 8 or m % 8:
            return None
        if not (1 <= k <= MAX_K if m else k == 0):
            return None
        return cls(m, k, n, newest, np.frombuffer(data, np.uint8, offset=_HEADER.size).copy())
