//! The `lockstep` command: parses the command line and hands each subcommand to the crate that does it.

mod cli;

fn main() {
    // Like other command-line tools, end quietly when a reader such as `head` closes the pipe (Rust ignores
    // SIGPIPE, which would turn that into a panic on the next print). The agent ignores it again: a scraper or
    // client that hangs up must not kill it.
    // SAFETY: restoring a default disposition installs no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    std::process::exit(cli::main());
}
