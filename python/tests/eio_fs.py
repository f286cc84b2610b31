"""A file system that fails reads: a read-only FUSE pass-through of a folder whose reads of
one file's byte range answer EIO while a control file exists, as NFS, Lustre, gcsfuse or
s3fs answer a read they cannot serve. The tests of reads that fail (python/tests and the
Rust suite's tests/sources/failing_reads.rs) mount it over a folder of shards.

    python eio_fs.py SOURCE MOUNT --file NAME --start S --end E --control PATH

mounts SOURCE at MOUNT (in the foreground, until unmounted): reads of MOUNT/NAME that
overlap bytes S..E fail with EIO while PATH exists; every other read, and every read once
PATH is gone, returns the file's bytes. Needs mfusepy (PyPI) and libfuse3, /dev/fuse, and
root or fusermount3.

`mounted(...)` (a context manager) does all that from a test, or raises `Unavailable`
saying what is missing.
"""

import argparse
import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time


class Unavailable(Exception):
    """FUSE cannot be used here; the message says why."""


def missing():
    """Why a FUSE file system cannot be mounted here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError, EnvironmentError) as e:  # OSError: libfuse3 missing
        return f"mfusepy (with libfuse3) cannot be imported: {e}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "neither root nor fusermount3"
    return None


@contextlib.contextmanager
def mounted(source, mount, name, start, end, control, bound=30.0):
    """Mounts the failing pass-through of `source` at `mount` (reads of `name` overlapping
    bytes `start..end` fail while the file `control` exists), yields, and unmounts."""
    why = missing()
    if why:
        raise Unavailable(why)
    os.makedirs(mount, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, source, mount, "--file", name, "--start", str(start),
         "--end", str(end), "--control", control],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + bound
        while not os.path.ismount(mount):
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.poll() is not None else ""
                raise Unavailable(f"the FUSE file system did not mount: {err.strip()[-500:]}")
            time.sleep(0.01)
        yield
    finally:
        unmount(mount)
        try:
            proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def unmount(mount):
    """Unmounts `mount` (quietly when it is not mounted)."""
    for cmd in (["fusermount3", "-u", "-z", mount], ["umount", "-l", mount]):
        if shutil.which(cmd[0]) and os.path.ismount(mount):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def serve(source, mount, name, start, end, control):
    import mfusepy as fuse

    class FailingReads(fuse.Operations):
        use_ns = True

        def _path(self, path):
            return os.path.join(source, path.lstrip("/"))

        def getattr(self, path, fh=None):
            st = os.lstat(self._path(path))
            keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid")
            out = {k: getattr(st, k) for k in keys}
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return out

        def readdir(self, path, fh):
            return [".", ".."] + os.listdir(self._path(path))

        def open(self, path, flags):
            return os.open(self._path(path), os.O_RDONLY)

        def read(self, path, size, offset, fh):
            if path.lstrip("/") == name and offset < end and offset + size > start:
                if os.path.exists(control):
                    raise fuse.FuseOSError(errno.EIO)
            return os.pread(fh, size, offset)

        def release(self, path, fh):
            os.close(fh)
            return 0

    fuse.FUSE(FailingReads(), mount, foreground=True, ro=True)


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("source")
    args.add_argument("mount")
    args.add_argument("--file", required=True)
    args.add_argument("--start", type=int, required=True)
    args.add_argument("--end", type=int, required=True)
    args.add_argument("--control", required=True)
    a = args.parse_args()
    serve(os.path.abspath(a.source), a.mount, a.file, a.start, a.end, os.path.abspath(a.control))
