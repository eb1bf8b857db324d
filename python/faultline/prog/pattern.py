"""The page pattern of docs/programs.md ("The pattern"): what version N of
page P of object O holds, and which version a page read back holds.  The
guest executor computes the same words; test_prog.py pins vectors.
"""

import struct

from faultline.prog.lang import PAGE

WORDS = PAGE // 8
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
M1, M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
# Inverses mod 2^64 of the multipliers: to undo mix64 when naming a page.
GOLDEN_INV = pow(GOLDEN, -1, 1 << 64)
M1_INV, M2_INV = pow(M1, -1, 1 << 64), pow(M2, -1, 1 << 64)
PACK = struct.Struct(f"<{WORDS}Q")


def mix64(z):
    """splitmix64's output function (its finaliser)."""
    z = (z ^ (z >> 30)) * M1 & MASK
    z = (z ^ (z >> 27)) * M2 & MASK
    return z ^ (z >> 31)


def _unshift(z, s):
    """x from z = x ^ (x >> s)."""
    x = z
    for _ in range(64 // s + 1):
        x = z ^ (x >> s)
    return x


def unmix64(z):
    z = _unshift(z, 31)
    z = _unshift(z * M2_INV & MASK, 27)
    return _unshift(z * M1_INV & MASK, 30)


def key(obj, page, version):
    return obj << 48 | page << 16 | version


def word(obj, page, version, i):
    """Word I of the page: mix64(key * GOLDEN + i), all modulo 2^64."""
    return mix64((key(obj, page, version) * GOLDEN + i) & MASK)


def page_bytes(obj, page, version):
    """The 4096 bytes of version VERSION (0: zeros) of page PAGE of object OBJ
    (objects numbered from 1 in the order the program makes them)."""
    if version == 0:
        return bytes(PAGE)
    base = key(obj, page, version) * GOLDEN
    return PACK.pack(*(mix64((base + i) & MASK) for i in range(WORDS)))


def identify(data):
    """(obj, page, version) of a page that holds any pattern, (None, None, 0)
    for zeros, None for anything else."""
    if data == bytes(PAGE):
        return None, None, 0
    k = unmix64(struct.unpack_from("<Q", data)[0]) * GOLDEN_INV & MASK
    obj, page, version = k >> 48, k >> 16 & 0xFFFFFFFF, k & 0xFFFF
    if version and obj and page_bytes(obj, page, version) == data:
        return obj, page, version
    return None


def version_of(data, obj, page):
    """The version of page PAGE of object OBJ that DATA holds (0: zeros),
    or None when it holds none of that page's versions."""
    found = identify(data)
    if found is None or found[2] and found[:2] != (obj, page):
        return None
    return found[2]
