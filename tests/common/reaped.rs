//! Children that never outlive their test: each spawned in a process group
//! of its own, and the whole group killed and the child reaped when its
//! guard drops, whether the test passed, failed or panicked. A `sh -c`
//! line's own children (a `nanolog decode -f` behind the shell) go with it.
//! Shared by the facade's and the CLI's tests.
// Each test binary that includes this file uses some of it.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// A running child and its process group; see the module's doc.
pub struct Reaped(Child);

impl Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Reaped {
    /// As `Child::wait_with_output`: both pipes read to their end (the
    /// standard error on a thread of its own), then the child reaped.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        use std::io::Read;
        let err = self.0.stderr.take();
        let err = std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut e) = err {
                let _ = e.read_to_end(&mut v);
            }
            v
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.0.stdout.take() {
            o.read_to_end(&mut stdout)?;
        }
        let stderr = err.join().unwrap_or_default();
        let status = self.0.wait()?;
        Ok(std::process::Output {
            status,
            stdout,
            stderr,
        })
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        // The group's id is the child's pid (`process_group(0)`), held by
        // the kernel while any member lives, so this reaches only the
        // child and what it started; a group already empty answers ESRCH.
        let Ok(pgid) = i32::try_from(self.0.id()) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals that process group;
        // it takes no pointers and touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// `Command::spawn` into a process group of its own, as a [`Reaped`],
/// with the default disposition of the signals a shell has a background
/// job ignore (SIGINT and SIGQUIT; SIGHUP under `nohup`): a child inherits
/// an ignored signal across `exec`, so under `nohup cargo test &` or a CI
/// runner a child that raises SIGINT to test its exit path went on instead
/// (`exit path sigint ... exit Code(0), expected Signal(2)`).
pub trait SpawnReaped {
    fn spawn_reaped(&mut self) -> Reaped;
}

impl SpawnReaped for Command {
    fn spawn_reaped(&mut self) -> Reaped {
        // SAFETY: the closure runs in the child between fork and exec, and
        // calls only signal(2), which is async-signal-safe, allocates
        // nothing and takes no lock.
        unsafe {
            self.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        Reaped(
            self.process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", self.get_program())),
        )
    }
}
