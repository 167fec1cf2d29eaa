"""The wakeful VM: eBPF ELF objects loaded, verified and run as isolated guests in this process (vm.md).

Public surface: ``load``, ``verify_elf``, ``Program``, ``Instance``, ``BASE`` and ``shape_stats``; for the
tools that look inside (``wakeful vm``, the benchmarks): ``disasm_function``, ``OP_LDDW``, ``PREEMPT`` and the
loader's caches ``LOAD_CACHE`` / ``LOAD_TWINS``.
"""

from wakeful.vm.disasm import disasm_function
from wakeful.vm.guest import PREEMPT
from wakeful.vm.isa import BASE, OP_LDDW
from wakeful.vm.loader import CACHE as LOAD_CACHE
from wakeful.vm.loader import TWINS as LOAD_TWINS
from wakeful.vm.program import Instance, Program, clear_caches, load, shape_stats, verify_elf

__all__ = [
    "BASE",
    "LOAD_CACHE",
    "LOAD_TWINS",
    "OP_LDDW",
    "PREEMPT",
    "Instance",
    "Program",
    "clear_caches",
    "disasm_function",
    "load",
    "shape_stats",
    "verify_elf",
]
