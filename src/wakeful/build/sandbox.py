"""Landlock through raw syscalls with ctypes (build.md §5.3): rulesets for the build helper and each compile.

Stdlib (and the layer-0 ``wakeful.errors``) only; used inside the build-helper process and its forked children, never by the runtime itself.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import struct
from collections.abc import Iterable

from wakeful.errors import WakefulError

# linux/landlock.h; the syscall numbers are shared by every architecture that has them
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | TRUNCATE
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(WakefulError, OSError):
    """Landlock is missing or refused a call; ``str()`` is the one-line reason reported as ``sandbox_reason``."""

    def __init__(self, err: int, message: str) -> None:
        OSError.__init__(self, err, message)  # errno and strerror, as an OSError: str() is "[Errno …] …"
        self.message = message
        self.details = {}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


_LIBC = _libc()
_LIBC.syscall.restype = ctypes.c_long


def _syscall(number: int, *args: object) -> int:
    result = int(_LIBC.syscall(ctypes.c_long(number), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock syscall {number} failed: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; raises ``LandlockError`` when Landlock is unavailable."""
    if platform.system() != "Linux":
        raise LandlockError(0, "Landlock needs Linux")
    return _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))


def handled_fs(abi: int) -> int:
    """Every file-system right this ABI knows, so anything not granted is denied."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict(rules: Iterable[tuple[str, int]], abi: int) -> None:
    """Add a Landlock domain allowing only ``rules`` (path, rights) and enforce it on this process.

    Also denies TCP (ABI ≥ 4) and signals/abstract sockets outside the domain (ABI ≥ 6).
    """
    handled = handled_fs(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0
    attr = _ruleset_attr(handled, net, scoped, abi)
    fd = _syscall(SYS_CREATE_RULESET, attr, ctypes.c_size_t(len(attr.raw)), ctypes.c_uint32(0))
    try:
        for path, rights in rules:
            _add_path_rule(fd, path, rights & handled)
        _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def _ruleset_attr(handled: int, net: int, scoped: int, abi: int) -> ctypes.Array[ctypes.c_char]:
    if abi >= 6:
        raw = struct.pack("=QQQ", handled, net, scoped)
    elif abi >= 4:
        raw = struct.pack("=QQ", handled, net)
    else:
        raw = struct.pack("=Q", handled)
    return ctypes.create_string_buffer(raw, len(raw))


def _add_path_rule(ruleset_fd: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= FILE_ONLY
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
    finally:
        os.close(fd)


def die_with_parent() -> None:
    """SIGKILL this process when the build helper dies (build.md §6 row 19: no process of the group remains)."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def helper_rules(zig_dir: str, build_root: str) -> list[tuple[str, int]]:
    """The build helper's own domain (build.md §5.2): zig read+exec, build root read+write, /dev/urandom."""
    return [(zig_dir, READ_EXEC), (build_root, WRITE), ("/dev/urandom", READ_FILE)]


def step_rules(zig_dir: str, staging: str) -> list[tuple[str, int]]:
    """One compile step's domain (build.md §5.3): read zig and the staging tree; write only out/ and tmp/."""
    return [
        (zig_dir, READ_EXEC),
        (staging, READ),
        (os.path.join(staging, "out"), WRITE),
        (os.path.join(staging, "tmp"), WRITE),
        ("/dev/urandom", READ_FILE),
    ]
