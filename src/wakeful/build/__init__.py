"""The build layer (build.md): C bundle → verified BPF ELF, confined by scans, Landlock and rlimits, cached.

Exports are imported lazily so the build-helper process (``python -m wakeful.build.helper``) stays small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wakeful.build.driver import (
        Builder,
        BuildOptions,
        BuildResult,
        CompilerInfo,
        compile_sync,
        disabled_info,
    )
    from wakeful.build.lines import LineTable

__all__ = ["BuildOptions", "BuildResult", "Builder", "CompilerInfo", "LineTable", "compile_sync", "disabled_info"]


def __getattr__(name: str) -> Any:
    if name == "LineTable":
        from wakeful.build.lines import LineTable

        return LineTable
    if name in __all__:
        from wakeful.build import driver

        return getattr(driver, name)
    raise AttributeError(name)
