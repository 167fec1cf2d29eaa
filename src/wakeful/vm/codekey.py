"""The verification-cache key of vm.md §1.1 (pipeline step 3): everything linking and verifying read.

Covers options, verifier version, section headers (not offsets), code bytes, relocations and symbols; never data bytes.
"""

from __future__ import annotations

import hashlib
import struct

from wakeful.vm.elf import CODE, ElfObject
from wakeful.vm.verify import VERIFIER_VERSION

__all__ = ["code_key"]

_HDR = struct.Struct("<IIQQQIIQ")


# vm.md §1.1: options, verifier version, code sections (name, flags, bytes), every relocation, the symbol
# table's layout, each data section's name, type, flags, size and alignment -- never data bytes
def code_key(obj: ElfObject, *, max_instructions: int, max_image_bytes: int) -> str:
    h = hashlib.sha256(b"wakeful-code-key/%d/%d/%d" % (VERIFIER_VERSION, max_instructions, max_image_bytes))
    for sec in obj.sections:
        h.update(sec.name.encode() + b"\0")
        h.update(_HDR.pack(sec.num, sec.type, sec.flags, sec.size, sec.align, sec.link, sec.info, sec.entsize))
        if sec.kind == CODE:
            h.update(obj.content(sec))
    for table in (*obj.rel_sections, obj.symtab, obj.strtab):
        assert table is not None
        h.update(b"\1%d\1" % table.num + obj.content(table))
    return h.hexdigest()
