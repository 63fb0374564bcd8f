//! The `lockstep` command.

use lockstep::error::{UsageError, EXIT_USAGE};

fn main() {
    let status = match lockstep::cli::main() {
        Ok(status) => status,
        Err(e) if e.is::<UsageError>() => {
            eprintln!("lockstep: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("lockstep: error: {e:#}");
            1
        }
    };
    std::process::exit(status);
}
