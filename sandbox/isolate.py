"""Kernel-level isolation of one probe process, with Python's own means (no bwrap).

Runs in a child forked from the zygote, which is single-threaded right after the fork,
so it may create a user namespace. What it sets up, in order:

1. a new session (its own process group);
2. new mount, network and PID namespaces (plus a user namespace when not root);
3. every mount read-only, empty tmpfs over /tmp, /run and /dev/shm (where no interpreter
   file lives there), and a private size-capped tmpfs as the working directory;
4. then it forks the probe process, PID 1 of the new PID namespace: when it dies, the
   kernel kills everything the probe forked, setsid or not;
5. in that process: a fresh /proc (only the namespace's processes, so no other
   process's environment can be read), loopback up, rlimits, a dedicated unprivileged
   uid when started as root (so RLIMIT_NPROC applies and file permissions hold),
   no_new_privs.

Where namespaces are refused (unprivileged user namespaces disabled, seccomp'd
containers) the fallback keeps the session, rlimits, the uid drop and a private temp
directory, and says what is missing; `Capabilities.describe()` is what `stats` reports.

Nothing here imports torch: the zygote calls `detect()` before importing it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import socket
import stat
import struct
import sys

from review_copies.sandbox.protocol import Capabilities, Limits

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

_FLAG_BITS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
# Emptied in the probe's view: sockets of other programs (docker, ssh-agent, dbus) live here.
MASKED_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm")
# Where checkouts, home directories and their secrets live (a runner's
# /home/runner/work/<repo>, a container job's /__w, a developer's ~/src): hidden in the
# probe's view, all but the interpreter's own files, together with the reviewer's working
# directory. A probe has the code it runs; it has no business reading the checkout
# (`.git/config` may hold a token) or anything beside it.
PRIVATE_ROOTS = ("/home", "/root", "/work", "/workspace", "/workspaces", "/__w", "/github", "/mnt", "/media", "/srv", "/opt/actions-runner")
# What a program's runtime reads at the top of the tree. Every other entry of / (a CI
# system's /build or /ci, an image's /app or /src, /data) is covered like a private root:
# a checkout there is no more the probe's business than one under /home. /tmp, /run and
# /var/tmp are emptied separately (MASKED_DIRS).
SYSTEM_ROOTS = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys", "run", "tmp", "var", "opt", "nix", "gnu", "snap"})
# The uid a root-started probe runs as: far above any real account, one per zygote.
PROBE_UID_BASE = 1_900_000_000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.unshare.argtypes = (ctypes.c_int,)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)


class IsolationError(OSError):
    pass


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), "prctl")


def set_dumpable(on: bool) -> None:
    prctl(PR_SET_DUMPABLE, 1 if on else 0)


def package_paths() -> list[str]:
    """The folders of this project's packages (the repository's `reviewer/` and `sandbox/` in
    an editable install): a probe imports its side of the sandbox from them."""
    import importlib.util

    paths = []
    for name in ("review_copies", "review_copies.sandbox"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            paths.extend(os.path.abspath(p) for p in spec.submodule_search_locations)
    return paths


def _important_paths() -> list[str]:
    """Files the probe must still read after /tmp etc. are hidden: the interpreter and its libraries."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, *package_paths()}
    paths.update(p for p in sys.path if p)
    return sorted(os.path.realpath(p) for p in paths)


def _maskable(directory: str, keep: list[str]) -> bool:
    if os.path.islink(directory) or not os.path.isdir(directory):
        return False
    real = os.path.realpath(directory)
    return not any(p == real or p.startswith(real + os.sep) for p in keep)


def hidden_from_probes(caps: Capabilities, path: str) -> bool:
    """Whether a probe can never reach `path` (the kept-warm worker's socket): it runs as
    another uid (the socket's folder is 0700), or the folder lies under a directory its
    mount namespace covers with an empty tmpfs."""
    if caps.uid_drop:
        return True
    if not caps.namespaces:
        return False
    real = os.path.realpath(path)
    keep = _important_paths()
    return any(_maskable(d, keep) and real.startswith(os.path.realpath(d) + os.sep) for d in MASKED_DIRS)


def _mount_points() -> list[tuple[str, int]]:
    """(mount point, flags to keep) from /proc/self/mountinfo, parents before children."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            point = parts[4].encode().decode("unicode_escape")
            flags = 0
            for opt in parts[5].split(","):
                flags |= _FLAG_BITS.get(opt, 0)
            out.append((point, flags))
    return sorted(out, key=lambda item: item[0].count("/"))


def _readonly_everything() -> list[str]:
    """Remount every mount read-only; return the mount points that refused."""
    refused = []
    for point, flags in _mount_points():
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except IsolationError:
            refused.append(point)
    return refused


def _write_id_maps(uid: int, gid: int) -> None:
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"0 {gid} 1")


def _loopback_up() -> None:
    """The namespace's own loopback, so code that binds 127.0.0.1 for itself still works."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def _private_roots(extra: tuple[str, ...] = ()) -> list[str]:
    """PRIVATE_ROOTS that exist, every other top-level directory outside SYSTEM_ROOTS, this
    process's working directory and `extra` (the reviewer's working directory and the
    reviewed repository, wherever they live): outermost only."""
    with os.scandir("/") as entries:
        unknown = [e.path for e in entries if e.name not in SYSTEM_ROOTS]
    found: list[str] = []
    for candidate in (*PRIVATE_ROOTS, *unknown, os.getcwd(), *extra):
        if not os.path.isdir(candidate) or os.path.islink(candidate):
            continue
        real = os.path.realpath(candidate)
        if real == "/" or any(real == f or real.startswith(f + os.sep) for f in found):
            continue
        found = [f for f in found if not f.startswith(real + os.sep)] + [real]
    return sorted(found)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + os.sep)


def hide_private(keep: list[str], extra: tuple[str, ...] = ()) -> None:
    """Cover each private root in this mount namespace (see `cover`); `keep`: real paths;
    `extra`: more directories to cover (see `_private_roots`)."""
    for root in _private_roots(extra):
        cover(root, keep)


def cover(root: str, keep: list[str]) -> None:
    """Hide what `root` holds: wholly under an empty read-only tmpfs when none of `keep`
    (real paths the probe needs) lies inside, else everything beside the way to them
    (directories under an empty tmpfs, files under /dev/null). Names stay listable; no
    content does."""
    inside = [k for k in keep if _inside(k, root)]
    if root in inside:
        return  # the interpreter itself lives there: nothing to cover
    if not inside:
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
    else:
        mask_around(root, inside)


def mask_around(directory: str, keep: list[str]) -> None:
    """Cover every entry of `directory` except those on the way to a `keep` path."""
    wanted = {k[len(directory) + 1 :].split(os.sep)[0] for k in keep if k != directory}
    with os.scandir(directory) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        path = entry.path
        if entry.name in wanted:
            below = [k for k in keep if k.startswith(path + os.sep)]
            if path not in keep and below and entry.is_dir(follow_symlinks=False):
                mask_around(path, below)
            continue
        if entry.is_symlink():
            continue  # it points somewhere covered (or public) on its own account
        if entry.is_dir(follow_symlinks=False):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
        else:
            # Files, sockets, fifos: /dev/null over them reads empty and accepts no connection.
            mount("/dev/null", path, None, MS_BIND)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def blocked_ancestor(path: str) -> tuple[str, str] | None:
    """The first directory on the way to path that others may not traverse, and its child."""
    current = "/"
    for part in [p for p in path.split("/") if p]:
        child = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current, child
        current = child
    return None


def expose(paths: list[str], stage: str) -> None:
    """Make the interpreter's files reachable for an unprivileged uid, in this mount
    namespace only: a home directory that others may not enter (/root, mode 0700) is
    covered by an empty tmpfs with just the needed subtrees bound back into it. That
    also hides the rest of the home directory (keys, tokens, caches) from the probe."""
    groups: dict[str, set[str]] = {}
    for path in paths:
        blocked = blocked_ancestor(os.path.realpath(path))
        if blocked is not None and blocked[0] != "/":
            groups.setdefault(blocked[0], set()).add(blocked[1])
    for i, (ancestor, children) in enumerate(sorted(groups.items())):
        staged = []
        for j, child in enumerate(sorted(children)):
            if not os.path.isdir(child):
                continue
            holder = os.path.join(stage, f"{i}-{j}")
            os.makedirs(holder, exist_ok=True)
            mount(child, holder, None, MS_BIND | MS_REC)
            staged.append((child, holder))
        mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        for child, holder in staged:
            os.mkdir(child, 0o755)
            mount(holder, child, None, MS_BIND | MS_REC)


# ------------------------------------------------------------------------ stages


def enter_namespaces(caps: Capabilities, workdir: str, tmpfs_bytes: int, need: list[str], hide: tuple[str, ...] = ()) -> str:
    """Stage 1 (the monitor process): namespaces and mounts. Returns the probe's working dir.
    `hide`: the reviewer's directories (its working directory, the reviewed checkout)."""
    os.setsid()
    if not caps.namespaces:
        return workdir
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
    if caps.user_namespace:
        unshare(flags | CLONE_NEWUSER)
        _write_id_maps(uid, gid)
    else:
        unshare(flags)
    # Private first: otherwise the mounts below would propagate back to the host.
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = _important_paths()
    if caps.uid_drop:
        expose(need, workdir + ".stage")
    _readonly_everything()
    # What a probe needs: the interpreter, its libraries and packages, its own directories.
    needed = sorted({os.path.realpath(p) for p in (*need, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(workdir), workdir + ".stage", workdir)})
    hide_private(needed, hide)
    owner = caps.probe_uid if caps.uid_drop and caps.probe_uid is not None else (0 if caps.user_namespace else uid)
    tmp_masked = False
    for directory in MASKED_DIRS:
        if not _maskable(directory, keep):
            if os.path.isdir(directory) and not os.path.islink(directory):
                # The interpreter (or this project) lives inside: cover everything else there.
                cover(os.path.realpath(directory), needed)
            continue
        if directory == "/tmp":
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_bytes},mode=0700,uid={owner},gid={owner if caps.uid_drop else 0}")
            tmp_masked = True
        else:
            mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
    if tmp_masked:
        return "/tmp"
    mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_bytes},mode=0700,uid={owner},gid={owner if caps.uid_drop else 0}")
    return workdir


def enter_probe(caps: Capabilities, workdir: str, limits: Limits, cuda: bool) -> None:
    """Stage 2 (the probe process, PID 1 of its namespace): what only that process can do."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if caps.namespaces:
        if caps.fresh_proc:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        with contextlib.suppress(OSError):
            _loopback_up()
    os.chdir(workdir)
    new_session_keyring()
    # PID 1 of a namespace ignores signals left at their default action, the CPU
    # limit's SIGXCPU and SIGKILL included: a handler makes the soft limit stop it.
    signal.signal(signal.SIGXCPU, lambda *_: os._exit(128 + signal.SIGXCPU))
    set_limits(limits, cuda)
    if caps.uid_drop and caps.probe_uid is not None:
        os.setgroups([])
        os.setresgid(caps.probe_uid, caps.probe_uid, caps.probe_uid)
        os.setresuid(caps.probe_uid, caps.probe_uid, caps.probe_uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


# keyctl(2) by syscall number (glibc has no wrapper; libkeyutils may be absent).
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
_KEYCTL_JOIN_SESSION_KEYRING = 1


def new_session_keyring() -> None:
    """Leave the reviewer's session keyring for a new, empty one: a process possesses the
    keys of the keyring it holds, and may read them whatever uid it runs as."""
    if _SYS_KEYCTL is None:
        return
    _libc.syscall.restype = ctypes.c_long
    # ENOSYS/EPERM (no keyrings in this kernel or container): there is then nothing to leave.
    _libc.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None)


def _statm_bytes(field: int) -> int:
    """A field of this process's `/proc/self/statm`, in bytes (0 when /proc cannot say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _mapped_bytes() -> int:
    """This process's address space (0 when /proc cannot say)."""
    return _statm_bytes(0)


def resident_bytes() -> int:
    """This process's resident size (0 when /proc cannot say)."""
    return _statm_bytes(1)


def set_limits(limits: Limits, cuda: bool) -> None:
    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(kind, (soft, hard))

    # Soft below hard: SIGXCPU first (the default action kills), SIGKILL a second later.
    cap(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    if not cuda:
        # On top of what the probe already maps: a CUDA build of torch maps gigabytes of
        # libraries at import, and a cap of the whole address space then fails a CPU probe's
        # first few allocations (measured on an H200 machine, torch 2.11+cu130). Resident
        # memory, which is what the cap is for, is bounded by the tree monitor.
        cap(resource.RLIMIT_AS, _mapped_bytes() + limits.memory_bytes)
    cap(resource.RLIMIT_FSIZE, limits.file_bytes)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_NPROC, limits.processes)


def kill_uid(uid: int) -> None:
    """Kill every process of `uid`: kill(-1) from a process running as that uid reaches
    exactly those. Used where there is no PID namespace to take a setsid escapee down."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


# ------------------------------------------------------------------------ detect


def _probe_uid() -> int:
    return PROBE_UID_BASE + os.getpid() % 10_000_000


def _try_in_child(fn) -> tuple[bool, str]:
    """Run fn() in a forked child; (succeeded, error text)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
            os.write(w, b"ok")
        except BaseException as exc:  # report, never raise across the fork
            os.write(w, f"{type(exc).__name__}: {exc}".encode()[:400])
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 4096):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace")
    return text == "ok", text


def _uid_can_read(uid: int, paths: list[str]) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    for path in paths:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb"):
                pass


def _namespaces(root: bool) -> None:
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
    if root:
        unshare(flags)
    else:
        uid, gid = os.getuid(), os.getgid()
        unshare(flags | CLONE_NEWUSER)
        _write_id_maps(uid, gid)
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def detect(need_paths: list[str], stage: str) -> Capabilities:
    """Find out what isolation works here, each step tried in a throwaway child.
    Must run before torch starts its threads (a user namespace needs a single thread)."""
    caps = Capabilities()
    root = os.geteuid() == 0
    need = [os.path.realpath(p) for p in need_paths]
    ok, why = _try_in_child(lambda: _namespaces(root))
    if ok:
        caps.namespaces, caps.user_namespace = True, not root
    else:
        caps.problems.append(f"unshare of mount/network/pid namespaces refused ({why})")
    if root:
        uid = _probe_uid()

        def readable() -> None:
            if caps.namespaces:
                _namespaces(True)
                expose(need, os.path.join(stage, f"detect-{os.getpid()}"))
            _uid_can_read(uid, need)

        ok, why = _try_in_child(readable)
        if ok:
            caps.uid_drop, caps.probe_uid = True, uid
        else:
            caps.problems.append(f"an unprivileged uid cannot read the interpreter's files ({why})")
    if not caps.namespaces:
        return caps

    def readonly_and_proc() -> None:
        _namespaces(root)
        refused = [p for p in _readonly_everything() if p == "/" or _is_under_any(p, need)]
        if refused:
            raise IsolationError(errno.EPERM, f"could not remount {', '.join(refused)} read-only")
        probe_in_new_pid_ns()

    ok, why = _try_in_child(readonly_and_proc)
    if ok:
        caps.readonly_fs = caps.fresh_proc = True
        return caps
    caps.problems.append(f"read-only remount or a private /proc failed ({why})")

    def readonly_only() -> None:
        _namespaces(root)
        if "/" in _readonly_everything():
            raise IsolationError(errno.EPERM, "could not remount / read-only")

    caps.readonly_fs, _ = _try_in_child(readonly_only)
    return caps


def _is_under_any(point: str, paths: list[str]) -> bool:
    return any(os.path.realpath(p).startswith(point.rstrip("/") + "/") for p in paths)


def probe_in_new_pid_ns() -> None:
    """Mount /proc as PID 1 of a fresh PID namespace (the last step of detection)."""
    pid = os.fork()
    if pid == 0:
        try:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            os._exit(0)
        except OSError:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise IsolationError(errno.EPERM, "mounting /proc in a new pid namespace failed")
