//! Runs `parasol sim …` before the main binary wires it: `cargo run --release --example sim -- parallel`.

use clap::Parser;
use parasol::sim::cli::{run, SimCommand};

#[derive(Parser)]
#[command(name = "sim", about = "The APSR and ASC papers' simulations")]
struct Cli {
    #[command(subcommand)]
    command: SimCommand,
}

fn main() -> anyhow::Result<()> {
    run(Cli::parse().command)
}
