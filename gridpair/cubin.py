"""Registers per thread from a compiled cubin: a minimal ELF reader of the ``.nv.info``
REGCOUNT attribute, for compiles made with no GPU to load them on."""

import struct
from collections.abc import Sequence

_EIATTR_REGCOUNT = 0x2F
_EIFMT_SVAL = 0x04


def cubin_registers(cubin: bytes) -> int | None:
    """Registers per thread from a cubin's ``.nv.info`` REGCOUNT attribute (None if absent)."""
    if cubin[:4] != b"\x7fELF":
        return None
    for data in _elf_sections(cubin, prefix=".nv.info"):
        offset = 0
        while offset + 4 <= len(data):
            fmt, attribute, value = struct.unpack_from("<BBH", data, offset)
            if fmt == _EIFMT_SVAL:
                if attribute == _EIATTR_REGCOUNT:
                    return struct.unpack_from("<II", data, offset + 4)[1]
                offset += 4 + value
            else:
                offset += 4
    return None


def _elf_sections(elf: bytes, prefix: str) -> Sequence[bytes]:
    (section_table,) = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, section_table + i * entry_size)
               for i in range(count)]
    names_offset = headers[names_index][4]
    found = []
    for header in headers:
        start = names_offset + header[0]
        name = elf[start:elf.index(b"\0", start)].decode()
        if name.startswith(prefix):
            found.append(elf[header[4]:header[4] + header[5]])
    return found
