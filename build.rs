//! `sqlx::migrate!` embeds `migrations/` when the crate compiles: without this, a migration
//! added or changed without a change to the Rust code left the binary with the old set.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
