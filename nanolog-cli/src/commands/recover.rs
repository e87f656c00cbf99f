//! `nanolog recover`: the records a killed writer's rings still held
//! (`app.nlog.rings`, beside its log), appended to its log, for a process
//! that does not come back to do it at its next start.

use crate::cli::RecoverArgs;

pub fn run(a: &RecoverArgs) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use anyhow::Context;
        use std::io::Write;
        let area = nanolog_runtime::area_path(&a.file);
        let existed = area.exists();
        let done = nanolog_runtime::recover(&a.file)
            .with_context(|| format!("cannot recover {}", a.file.display()))?;
        let mut out = std::io::stdout().lock();
        match done {
            Some(r) => writeln!(
                out,
                "recovered {} records of process {} into {}{}{}",
                r.records,
                r.pid,
                r.log.display(),
                match r.dropped {
                    0 => String::new(),
                    n => format!(" ({n} dropped before the kill, reported as gaps)"),
                },
                match r.unreadable {
                    0 => String::new(),
                    n => format!(" ({n} unreadable, reported as gaps)"),
                },
            )?,
            None => writeln!(
                out,
                "nothing to recover: {} {}",
                area.display(),
                if existed {
                    "holds no record the log lacks"
                } else {
                    "does not exist (its writer stopped cleanly, or was recovered)"
                }
            )?,
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        anyhow::bail!(
            "{}: loggers keep their rings in a mapped file on Unix only; there is nothing to recover here",
            a.file.display()
        )
    }
}
