//! A real file system that fails reads, for the tests of read errors: the FUSE
//! pass-through of `python/tests/eio_fs.py` (mfusepy and libfuse3), mounted over a folder,
//! answering EIO to reads of one file's byte range until healed.
//!
//! Where it cannot be mounted (no `/dev/fuse`, no mfusepy or libfuse3 for the Python that
//! `PINRING_FUSE_PYTHON` names, `python3` by default; neither root nor `fusermount3`),
//! [`FailingFs::mount`] says why and returns `None`, and the test passes without running;
//! with `PINRING_REQUIRE_FUSE=1` (as `.ci/run` sets where FUSE works) it panics instead.
#![allow(dead_code)]

use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The mounted file system; unmounted when dropped.
pub struct FailingFs {
    child: Child,
    mount: PathBuf,
    control: PathBuf,
    _dirs: tempfile::TempDir,
}

/// The Python that runs the file system.
fn python() -> String {
    std::env::var("PINRING_FUSE_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// The script.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests/eio_fs.py")
}

/// Whether `path` is a mount point of this process's namespace.
fn is_mount(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let path = path.to_string_lossy();
    info.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|m| m == path))
}

impl FailingFs {
    /// Mounts the pass-through of `source`: reads of its file `name` that overlap the bytes
    /// `bad` fail with EIO until [`heal`](Self::heal). `None` (with the reason printed)
    /// where FUSE cannot be used here.
    pub fn mount(source: &Path, name: &str, bad: Range<u64>) -> Option<FailingFs> {
        let skip = |why: String| -> Option<FailingFs> {
            assert!(
                std::env::var("PINRING_REQUIRE_FUSE").as_deref() != Ok("1"),
                "PINRING_REQUIRE_FUSE=1, but the failing file system cannot be mounted: {why}"
            );
            eprintln!("SKIPPED: the failing file system cannot be mounted here: {why}");
            None
        };
        let check = Command::new(python())
            .arg("-c")
            .arg("import sys; sys.path.insert(0, sys.argv[1]); import eio_fs; print(eio_fs.missing() or '')")
            .arg(script().parent().unwrap())
            .output();
        match check {
            Err(e) => return skip(format!("{} cannot run: {e}", python())),
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if !out.status.success() {
                    return skip(String::from_utf8_lossy(&out.stderr).trim().to_owned());
                }
                if !why.is_empty() {
                    return skip(why);
                }
            }
        }
        let dirs = tempfile::tempdir().unwrap();
        let mount = dirs.path().join("mnt");
        let control = dirs.path().join("failing");
        std::fs::create_dir(&mount).unwrap();
        std::fs::write(&control, b"").unwrap();
        let mut child = Command::new(python())
            .arg(script())
            .arg(source)
            .arg(&mount)
            .args(["--file", name])
            .args([
                "--start",
                &bad.start.to_string(),
                "--end",
                &bad.end.to_string(),
            ])
            .arg("--control")
            .arg(&control)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the file system");
        // A bound on the mount, not a timing: the process mounts or exits long before.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !is_mount(&mount) {
            if let Ok(Some(_)) | Err(_) = child.try_wait() {
                let mut err = String::new();
                let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                return skip(format!("it did not mount: {}", err.trim()));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return skip("it did not mount within 30 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(FailingFs {
            child,
            mount,
            control,
            _dirs: dirs,
        })
    }

    /// `name` in the mounted file system.
    pub fn path(&self, name: &str) -> PathBuf {
        self.mount.join(name)
    }

    /// From now on every read succeeds.
    pub fn heal(&self) {
        std::fs::remove_file(&self.control).unwrap();
    }

    /// From now on reads of the range fail again.
    pub fn fail(&self) {
        std::fs::write(&self.control, b"").unwrap();
    }
}

impl Drop for FailingFs {
    fn drop(&mut self) {
        for cmd in [&["fusermount3", "-u", "-z"][..], &["umount", "-l"][..]] {
            if is_mount(&self.mount) {
                let _ = Command::new(cmd[0])
                    .args(&cmd[1..])
                    .arg(&self.mount)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        // Unmounted, the file system's process ends; should it not, it is ended here.
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Ok(None) = self.child.try_wait() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
