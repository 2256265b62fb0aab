//! A small tmpfs of its own for a test's SQLite ledger, which the test fills to the last byte
//! and frees again: the disk-full failures of a real disk, without touching the machine's.
//! Mounting needs root (the test says so and fails when it is not); the mount goes when the
//! value is dropped, even when the test panics.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallDisk {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB on a fresh folder.
    pub fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to fill it and must run as root: mount said {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        SmallDisk { dir, mounted: true }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A SQLite URL for a ledger file on this disk.
    pub fn sqlite_url(&self) -> String {
        format!("sqlite://{}", self.path().join("ledger.db").display())
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Writes a file until the disk has no byte left; returns how many bytes it took.
    pub fn fill(&self) -> u64 {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("open filler");
        let block = vec![0u8; 4096];
        let mut written = 0u64;
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc_enospc()) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // The last partial page too.
        while let Ok(1) = f.write(&[0u8]) {
            written += 1;
        }
        written
    }

    /// Gives the space back.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove filler");
    }
}

fn libc_enospc() -> i32 {
    28
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        if self.mounted {
            // Lazy: a connection the test leaked must not keep the mount alive.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
            self.mounted = false;
        }
    }
}
