"""A run's lifecycle: how each job ends (a full disk, a folder no longer writable or SIGTERM end it with one
line; once its outputs are written, its record) and what the workflow's main process does around its jobs
(the Snakefile's onstart and onerror): it holds the results folder, stops its jobs on SIGTERM and repeats the
one line a failed job ended on."""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.messages import ERROR_PREFIX

DISK_FULL = "disk full: "  # how a job's or the run's line on a full disk begins
CANNOT_WRITE = "cannot write in "  # how the line begins where the results folder turned read-only
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # a file system remounted read-only, permissions taken
FULL_BELOW = 1024**2  # bytes free under which the results' file system counts as full (a job could not log why)


class CellError(RuntimeError):
    """A job could not finish: its grid cell failed, its disk is full or it was stopped (the cause is in its log;
    the command line prints it as one line)."""


class Stopped(BaseException):
    """SIGTERM reached a job (Snakemake stopping its jobs, scancel, a Slurm time limit). Not an Exception, so a
    cell's `except Exception` lets it through, and every write in progress removes its temporary file."""


def _stop(signum: int, frame) -> None:
    raise Stopped


# Where a run's main process marks that SIGTERM stopped it (stop_jobs_on_sigterm), named to its jobs in the
# environment they inherit.
RUN_STOPPED = "SAFETYREPRO_RUN_STOPPED"


def _size(count: float) -> str:
    """A number of bytes in the largest binary unit that keeps it at least 1."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.0f} TiB"


def free_space(path: Path) -> str:
    """The space left on the file system holding `path` (it need not exist yet) and where it is mounted."""
    folder = Path(path).absolute()
    while not folder.exists():
        folder = folder.parent
    mount = folder
    while not os.path.ismount(mount):
        mount = mount.parent
    return f"{_size(shutil.disk_usage(folder).free)} free on {mount}"


def disk_full(code: int, paths: list[str]) -> str:
    """The line a job ends on when its disk is full (or its quota used up): what it was writing, and where."""
    return (
        f"{DISK_FULL}{os.strerror(code).lower()} writing {', '.join(paths)} ({free_space(Path(paths[0]))}); "
        "free some space there, then run the workflow again"
    )


def cannot_write(code: int, folder: Path) -> str:
    """The line a job ends on when the folder it writes in is no longer writable (a file system remounted
    read-only, permissions taken away mid-run)."""
    return (
        f"{CANNOT_WRITE}{folder}: {os.strerror(code).lower()}; make it writable again, then run the workflow again "
        "(finished jobs are kept)"
    )


def _write_error(folder: Path) -> int | None:
    """The error number of writing a file in `folder` now (None: it can be written)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as error:
        return error.errno


def _no_longer_writable(code: int, named: list[str], outputs: list[str]) -> str | None:
    """The line for a job whose write of `named` failed with `code` because its folder can no longer be written,
    or None: the folder as the job's `outputs` there name it (a temporary file's name is absolute). A permission
    error counts only in a folder of its outputs (else it may be a file it could not read)."""
    folder = Path(named[0]).parent if named else None
    as_named = (Path(out).parent for out in outputs if folder and Path(out).parent.resolve() == folder.resolve())
    shown = next(as_named, folder if code == errno.EROFS else None)
    return cannot_write(code, shown) if shown and _write_error(folder) in NOT_WRITABLE else None


def job(*outputs: str, sigterm: bool = True, recorded: bool = True) -> Callable:
    """A job's command (decorator): a full disk, a folder that is no longer writable or SIGTERM ends it with one
    line (CellError) once the writes in progress have removed their temporary files; once it has written its
    outputs, its record (`--job-record`:
    the workflow's fingerprint of what they depend on and their SHA-256, safetyrepro.results.records). `outputs`
    are the options naming the files it writes; `sigterm=False` leaves SIGTERM as it is (the model server, which
    SIGTERM simply ends); `recorded=False`: a command no rule records (the server, the model build)."""

    def decorate(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(command)
        def run(args: argparse.Namespace) -> int:
            paths = [str(path) for path in (getattr(args, name) for name in outputs) if path]
            previous = signal.signal(signal.SIGTERM, _stop) if sigterm else None
            try:
                if sigterm and os.path.exists(os.environ.get(RUN_STOPPED, "")):
                    raise Stopped  # started after its run was stopped (forked as SIGTERM came): no signal reached it
                status = command(args)
                if status == 0 and getattr(args, "job_record", None):
                    from safetyrepro.results.records import write_record

                    record = Path(args.job_record)
                    written = [Path(out) for out in args.outputs if Path(out) != record]
                    write_record(record, args.fingerprint, written, args.inputs, Path(args.results_dir))
                return status
            except Stopped:
                raise CellError(
                    f"{args.command} stopped by SIGTERM before it finished {', '.join(paths)}; "
                    "run the workflow again to redo it"
                ) from None
            except OSError as error:
                named = [str(error.filename)] if error.filename else paths
                if error.errno in NOT_WRITABLE and (line := _no_longer_writable(error.errno, named, paths)):
                    raise CellError(line) from None
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                raise CellError(disk_full(error.errno, named)) from None
            finally:
                if sigterm:
                    signal.signal(signal.SIGTERM, previous)  # as it was (a job called in-process, by a test)

        run.recorded = recorded  # its parser takes --job-record (add_record_options)
        return run

    return decorate


# --- the workflow's main process around its jobs (the Snakefile's onstart and onerror) ---------------------------
def run_config_file(document: dict, scratch: Path) -> Path:
    """The effective config as the jobs read it (named to them in the environment: a path in params would rerun
    every job whenever any key changed), in a file under `scratch` named by its content, so that concurrent runs
    of different configs never share one; written anew where it is not what its name says (damaged or cut short
    since: its jobs would read another config)."""
    import yaml

    from safetyrepro.results.storage import write_text

    text = yaml.safe_dump(document, sort_keys=True)
    path = scratch / f"run-config-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    if not path.is_file() or path.read_bytes() != text.encode():
        write_text(text, path)
    return path


RESULTS_LOCK = ".safetyrepro.lock"  # in the results folder: held by the run writing there


def hold_results(folder: Path) -> IO[str]:
    """Lock the results folder for as long as this process keeps the returned file open, so that a second run
    writing there, from this working folder or another, stops at once. The lock ends with the process, even a
    killed one: nothing to unlock by hand."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = _locked(folder)
    with contextlib.suppress(OSError):  # a full disk is the jobs' to report: this note only names the holder
        handle.truncate(0)
        handle.write(f"Snakemake pid {os.getpid()} on {socket.gethostname()}, working folder {Path.cwd()}")
        handle.flush()
    return handle


def check_results_free(folder: Path) -> None:
    """The ConfigError `hold_results` would raise if a live run holds `folder`, without holding it: `make run`
    checks first, so that ours comes before Snakemake's own lock message, which advises --unlock."""
    if (folder / RESULTS_LOCK).is_file():
        _locked(folder).close()


def _locked(folder: Path) -> IO[str]:
    """The results folder's lock file, locked by this process; ConfigError naming the run that holds it."""
    handle = open(folder / RESULTS_LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held until the run ends)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "its process did not say which"
        handle.close()
        raise ConfigError(
            f"results folder {folder}: another run is writing there ({holder}); wait for it to end or stop it, "
            "then run again (snakemake --unlock would not stop it)"
        ) from None
    return handle


def stop_jobs_on_sigterm(marks: Path) -> threading.Event:
    """Make SIGTERM (a `kill`, or Slurm preempting or timing out the allocation Snakemake runs in) stop the
    running jobs as well: Snakemake's own handler, run in a thread, only stops scheduling new ones and waits
    for them. A job whose shell forked it just as the signal came is no child yet when the running ones are
    signalled, and outlives its shell: the stop is first marked in a file under `marks` that every job looks
    for as it starts (RUN_STOPPED). The event returned is set once that happened."""
    import psutil  # a dependency of Snakemake

    scheduler = signal.getsignal(signal.SIGTERM)
    stopped = threading.Event()
    marker = Path(marks).resolve() / f"stopped-{os.getpid()}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    os.environ[RUN_STOPPED] = str(marker)

    def stop_children() -> None:
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()

    def stop_scheduling(signum: int, frame) -> None:
        if callable(scheduler):
            scheduler(signum, frame)
        stop_children()  # a job started before the scheduler stopped

    def stop(signum: int, frame) -> None:
        stopped.set()
        marker.touch()
        stop_children()
        # Snakemake's handler takes its scheduler's lock (a threading.Lock): run here, in the signal handler,
        # it would wait forever whenever the signal came while the main thread held that lock
        threading.Thread(target=stop_scheduling, args=(signum, frame), daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    return stopped


def failure_report(results: Path, since: float, stopped: bool) -> list[str]:
    """What a failed run ended on, one line each: that SIGTERM stopped it; or else the line the log of each job
    that failed since `since` (seconds since the epoch) ended on, and that the results folder's disk is full, or
    that it cannot be written, when it is so and no job could say so (a job's log is there too)."""
    if stopped:
        return [
            f"{ERROR_PREFIX}stopped by SIGTERM: the running jobs were stopped and their outputs removed; run the "
            "same command again to finish (finished jobs are kept)"
        ]
    lines = []
    for path in sorted((results / "logs").rglob("*.log")):
        if path.stat().st_mtime >= since:
            last = (path.read_text(encoding="utf-8", errors="replace").strip().splitlines() or [""])[-1]
            lines += [last] if last.startswith(ERROR_PREFIX) else []
    said = any(line.startswith(ERROR_PREFIX + DISK_FULL) for line in lines)
    if shutil.disk_usage(results).free < FULL_BELOW and not said:
        lines.append(
            f"{ERROR_PREFIX}{DISK_FULL}the file system of the results folder {results} is full "
            f"({free_space(results)}); free some space there, then run the workflow again"
        )
    code = _write_error(results)
    if code in NOT_WRITABLE and not any(line.startswith(ERROR_PREFIX + CANNOT_WRITE) for line in lines):
        lines.append(ERROR_PREFIX + cannot_write(code, results))
    return list(dict.fromkeys(lines))


def survive_unwritable_cleanup(dag) -> None:
    """After a failed job, Snakemake removes the empty folders of the outputs it lacks (`DAG.cleanup_workdir`,
    Snakemake 9.27) before the Snakefile's `onerror`; in a results folder that turned read-only that raised, and
    the run ended on a traceback instead of its line (failure_report). Those empty folders are left there."""
    cleanup = dag.cleanup_workdir

    def leaving_what_cannot_be_removed() -> None:
        try:
            cleanup()
        except OSError as error:
            if error.errno not in NOT_WRITABLE:
                raise

    dag.cleanup_workdir = leaving_what_cannot_be_removed


def drop_damaged_snakemake_records(metadata: Path) -> list[str]:
    """Remove the damaged records among Snakemake's records of the outputs it made (`metadata`:
    `.snakemake/metadata/`, a JSON file each, named by the output's path in base64) that would stop it: Snakemake
    9.27 ignores a record that is not JSON (one being written may be cut short), but one that is not UTF-8 text
    (damaged bytes) or holds JSON that is no record stopped it with a traceback before any job. Such an output
    is then judged as after .snakemake/ was deleted: by its times and by the record its job wrote in the results
    folder (docs/reruns.md). Returns a line per record removed."""
    from pydantic import ValidationError
    from snakemake.persistence import MetadataRecord

    lines = []
    for path in sorted(p for p in metadata.rglob("*") if p.is_file()):
        try:
            if record := json.loads(path.read_bytes().decode("utf-8")):  # as Snakemake reads it: an empty one is none
                MetadataRecord.model_validate(record)
        except json.JSONDecodeError:
            continue
        except (UnicodeDecodeError, ValidationError):
            parts = [part.removeprefix("@") for part in path.relative_to(metadata).parts]
            try:
                output = base64.urlsafe_b64decode("".join(parts)).decode("utf-8")
            except ValueError:
                output = "an output"
            path.unlink()
            lines.append(
                f"removed Snakemake's damaged record of {output} ({path}); the record its job wrote in the results "
                "judges it"
            )
    return lines


AHEAD = 10**9  # ns a file's time may lie ahead of the clock without counting (a file server's clock runs ahead)


def settle_future_times(folders: Sequence[Path]) -> str | None:
    """Set the times of the files in `folders` that lie ahead of this machine's clock (it was moved back since
    they were written) to now: Snakemake takes a job whose output is older than one of its inputs for a clock
    skew and fails it, so every job reading such a file would fail until the clock caught up. What they hold
    is judged by their records (results/jobs/), not their times. Returns the line that says so, or None."""
    now = time.time_ns()
    ahead = [
        (path, status.st_mtime_ns)
        for folder in folders
        if folder.is_dir()
        for path in (folder, *folder.rglob("*"))
        if (status := path.lstat()).st_mtime_ns > now + AHEAD
    ]
    for path, _ in ahead:
        os.utime(path, ns=(now, now), follow_symlinks=False)
    if not ahead:
        return None
    most = (max(mtime for _, mtime in ahead) - now) / 1e9
    return (
        f"{len(ahead)} files of {', '.join(map(str, folders))} had times up to "
        f"{f'{most / 60:.0f} min' if most >= 60 else f'{most:.0f} s'} ahead of this machine's clock (it was moved "
        "back since they were written): set to now; what they hold is checked by their records"
    )
