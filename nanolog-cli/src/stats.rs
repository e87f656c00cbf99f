pub fn run(_a: &crate::cli::StatsArgs) -> anyhow::Result<()> {
    anyhow::bail!("stats: not implemented yet")
}
