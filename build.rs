//! `sqlx::migrate!` embeds `migrations/` when the crate compiles: without this, a migration
//! added or changed without a change to the Rust code left the binary with the old set.
//!
//! Optimised builds (`release`, and `perf`, which inherits it) link the service binary with
//! identical code folding (`--icf=all`, rust-lld's, the linker rustc uses on x86_64 Linux):
//! generic code instantiated for types that compile to the same machine code is kept once
//! (issue 40's binary-size bar; BENCHMARKS.md, "Service binary size"). Rust promises no
//! distinct address per function, so nothing may rely on one. Other targets, and a build
//! that names its own linker (RUSTFLAGS' `-C linker…`, `CARGO_TARGET_<triple>_LINKER`: GNU
//! ld has no `--icf`), link as before.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    let optimised = std::env::var("PROFILE").as_deref() == Ok("release");
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let own_linker = flags.contains("linker")
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    if optimised && target == "x86_64-unknown-linux-gnu" && !own_linker {
        println!("cargo:rustc-link-arg-bin=parasol=-Wl,--icf=all");
    }
}
