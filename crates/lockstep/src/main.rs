//! The `lockstep` command.

use lockstep::error::{UsageError, EXIT_USAGE};

fn main() {
    // Like other command-line tools, end quietly when a reader such as `head` closes the pipe (Rust ignores
    // SIGPIPE, which would turn that into a panic on the next print). The agent ignores it again: a scraper or
    // client that hangs up must not kill it.
    // SAFETY: restoring a default disposition installs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
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
