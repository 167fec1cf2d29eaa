"""The wakeful VM: eBPF ELF objects loaded, verified and run as isolated guests in this process (vm.md).

Public surface: ``load``, ``verify_elf``, ``Program``, ``Instance``, ``BASE`` and ``shape_stats``.
"""

from wakeful.vm.isa import BASE
from wakeful.vm.program import Instance, Program, clear_caches, load, shape_stats, verify_elf

__all__ = ["BASE", "Instance", "Program", "clear_caches", "load", "shape_stats", "verify_elf"]
