"""The files of a run folder that rig reads back, as versioned formats: manifest.json and results.sqlite.

Below the run layers (rig.runfolder and up) so that benchmarks' plot commands read stored results without importing
the runner. Files written before formats carried a version read as version 1; a file from a newer rig is refused
with its path named.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rig.records import EpisodeResult

# RunManifest.format_version written by this rig, and the newest it reads. 2: energy (and, per run, the bandwidth
# probe and weights profile MBU is computed from); format 1 manifests read those as "not measured".
MANIFEST_FORMAT = 2
RESULTS_SCHEMA_VERSION = 1  # results.sqlite `PRAGMA user_version` written by this rig, and the newest it reads

RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    benchmark TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    status TEXT NOT NULL,
    error_category TEXT,
    scores TEXT NOT NULL,
    record TEXT NOT NULL,
    finished_at REAL,
    PRIMARY KEY (benchmark, episode_id, repeat)
);
CREATE TABLE IF NOT EXISTS generations (
    benchmark TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    ttft_s REAL,
    e2e_s REAL,
    decode_tps REAL,
    parse_status TEXT,
    error TEXT,
    PRIMARY KEY (benchmark, episode_id, repeat, idx)
);
CREATE TABLE IF NOT EXISTS gpu_samples (t REAL NOT NULL, used_bytes INTEGER NOT NULL);
"""


class NewerFormatError(ValueError):
    """A run file written by a newer rig than this one; str() names the file and both versions."""


class RunFileError(ValueError):
    """A run file that is missing or damaged; str() names the file and what is wrong with it."""


class StorageError(RunFileError):
    """The disk under a run folder is full (or failing): str() names the folder; what was stored before is kept, and
    the run resumes once there is space."""


_SQLITE_FULL, _SQLITE_IOERR = 13, 10


def storage_error(e: BaseException, path: Path) -> StorageError | None:
    """``e`` as a StorageError naming ``path`` when it is a full disk or a disk I/O error (OSError ENOSPC or EDQUOT,
    SQLite's SQLITE_FULL or SQLITE_IOERR); None for any other error. SQLite reports a full disk under WAL as a plain
    "disk I/O error" when its shared-memory file cannot grow, so that one is worded by the space actually left."""
    if isinstance(e, StorageError):
        return e
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        full, what = True, e.strerror
    elif isinstance(e, sqlite3.OperationalError):
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == _SQLITE_FULL or "database or disk is full" in str(e):
            full, what = True, str(e)
        elif code == _SQLITE_IOERR or "disk I/O error" in str(e):
            full, what = _free_bytes(path) < LOW_SPACE, str(e)
        else:
            return None
    else:
        return None
    if full:
        return StorageError(f"no space left on {path} ({what}); what was stored is kept: free space, then resume")
    return StorageError(f"{path}: {what}; what was stored is kept")


LOW_SPACE = 1 << 20  # a disk I/O error with less free than this is taken for a full disk


def _free_bytes(path: Path) -> int:
    for p in (path, *path.parents):
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return LOW_SPACE


def check_version(path: Path, found: int, newest: int) -> None:
    if found > newest:
        raise NewerFormatError(
            f"{path} was written by a newer rig (format {found}; this rig reads up to {newest}): upgrade rig"
        )


def connect_results(path: Path) -> sqlite3.Connection:
    """Open (or create) a results database; refuses one from a newer rig before touching it."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # user_version 0 is SQLite's default: a new file, or one written before the schema was versioned (= 1).
        check_version(path, conn.execute("PRAGMA user_version").fetchone()[0] or 1, RESULTS_SCHEMA_VERSION)
        fresh = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'results'").fetchone() is None
        # WAL + NORMAL survives a killed process (not a power cut) without an fsync per episode.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(RESULTS_SCHEMA)
        if fresh:
            conn.execute(f"PRAGMA user_version = {RESULTS_SCHEMA_VERSION}")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_results_readonly(path: Path) -> sqlite3.Connection:
    """Open an existing results database for reading only: never creates one, never writes (a read-only run folder
    works, and reading leaves the folder as it was), and a missing, empty or damaged file is a RunFileError naming it.
    """
    path = Path(path)
    if not path.is_file():
        raise RunFileError(f"{path}: not found (the run stored no results, or the file was moved)")
    with path.open("rb") as f:
        head = f.read(100)
    if not head:
        raise RunFileError(f"{path}: empty file (not a results database)")
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        raise RunFileError(f"{path}: not an SQLite database (damaged or overwritten)")
    # The version is read from the file header, so a newer file is refused before SQLite touches it.
    check_version(path, int.from_bytes(head[60:64], "big") or 1, RESULTS_SCHEMA_VERSION)
    wal = path.with_name(path.name + "-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    # Without a WAL holding commits, the file alone is the whole database: read it as immutable, which creates no
    # -wal/-shm files. With one (a run in progress, or killed), SQLite must read it: plain read-only mode.
    uri = path.resolve().as_uri() + ("?mode=ro" if pending else "?immutable=1")
    conn = None
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"results", "generations"} <= tables:
            raise RunFileError(f"{path}: not a rig results database (no results table)")
        conn.execute("SELECT COUNT(*) FROM results").fetchone()
    except sqlite3.OperationalError as e:
        if conn is not None:
            conn.close()
        if pending:
            raise RunFileError(
                f"{path}: cannot read the commits pending in {wal.name} ({e}); open the run once "
                "where its folder is writable"
            ) from None
        raise RunFileError(f"{path}: damaged results database ({e})") from None
    except sqlite3.DatabaseError as e:
        if conn is not None:
            conn.close()
        raise RunFileError(f"{path}: damaged results database ({e})") from None
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return conn


def select_results(conn: sqlite3.Connection, benchmark: str | None = None) -> list[EpisodeResult]:
    q = "SELECT record FROM results"
    args: tuple = ()
    if benchmark:
        q += " WHERE benchmark = ?"
        args = (benchmark,)
    q += " ORDER BY benchmark, episode_id, repeat"
    try:
        return [EpisodeResult.model_validate_json(r[0]) for r in conn.execute(q, args)]
    except (sqlite3.DatabaseError, ValueError) as e:
        name = conn.execute("PRAGMA database_list").fetchone()[2]
        raise RunFileError(f"{name}: damaged results database ({str(e).splitlines()[0]})") from None


T = TypeVar("T")


def _read(path: Path, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read`` over the results database opened read-only; a query SQLite cannot answer is a RunFileError naming
    the file."""
    conn = connect_results_readonly(path)
    try:
        return read(conn)
    except sqlite3.DatabaseError as e:
        raise RunFileError(f"{path}: damaged results database ({str(e).splitlines()[0]})") from None
    finally:
        conn.close()


def read_results(path: Path, benchmark: str | None = None) -> list[EpisodeResult]:
    """Every stored result (of one benchmark), in key order; the file is opened read-only."""
    return _read(path, lambda conn: select_results(conn, benchmark))


def count_results(path: Path) -> int:
    """How many (episode, repeat) results are stored; read-only, so a run in progress is counted undisturbed."""
    return _read(path, lambda conn: int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]))


def read_gpu_samples(path: Path) -> list[tuple[float, int]]:
    """The GPU sampler's (time, used bytes) readings stored with the run, in time order; read-only."""
    return _read(
        path, lambda conn: [(t, b) for t, b in conn.execute("SELECT t, used_bytes FROM gpu_samples ORDER BY t")]
    )
