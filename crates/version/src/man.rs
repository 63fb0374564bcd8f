//! Manual pages of `lockstep` (one per subcommand) and `lockstepd`: clap_mangen's NAME, SYNOPSIS, OPTIONS and
//! SUBCOMMANDS; a DESCRIPTION and the sections clap knows nothing of (EXIT STATUS, ENVIRONMENT, FILES, SIGNALS)
//! from the binary's [`Section`]s; then EXAMPLES (from each command's `Examples:` help text) and SEE ALSO (the
//! pages of its parent and subcommands, then the tools a user of perf, hwloc, Slurm and MPI knows).

use std::io::Write;
use std::path::Path;

/// A section of a page that clap does not write, as the binary words it.
#[derive(Clone, Debug)]
pub struct Section {
    /// Its title, e.g. `EXIT STATUS`; a `DESCRIPTION` replaces clap's (which would repeat NAME).
    pub title: &'static str,
    /// Its text: paragraphs separated by blank lines; a line `TERM\tTEXT` is a tagged paragraph (an exit status,
    /// a variable, a file, a signal).
    pub text: String,
}

impl Section {
    /// A section titled `title` with `text`.
    pub fn new(title: &'static str, text: impl Into<String>) -> Self {
        Self { title, text: text.into() }
    }
}

/// What a binary adds to its pages: the sections of the page named `name` (`lockstep-policy-set`, `lockstepd`).
pub type Sections<'a> = &'a dyn Fn(&str) -> Vec<Section>;

/// Writes the page of `cmd` and of each of its visible subcommands, recursively, into `dir` (created if
/// missing), in manual section `section` (`1`, `8`); `related` ends every SEE ALSO (e.g. `perf-stat(1)`);
/// `sections` gives each page's DESCRIPTION and other sections. A `dir` that is not a directory is an error of kind
/// [`std::io::ErrorKind::NotADirectory`].
pub fn write_pages(
    cmd: clap::Command,
    section: &str,
    dir: &Path,
    related: &[&str],
    sections: Sections<'_>,
) -> std::io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "it is not a directory"));
    }
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_page(&cmd, None, &Page { section, dir, related, sections })
}

/// Where and how every page of one binary is written.
struct Page<'a> {
    section: &'a str,
    dir: &'a Path,
    related: &'a [&'a str],
    sections: Sections<'a>,
}

/// Writes the page of `cmd`, whose parent's page and examples are `parent`'s, and its subcommands' pages.
fn write_page(cmd: &clap::Command, parent: Option<(&str, &[(String, String)])>, how: &Page<'_>) -> std::io::Result<()> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
    let section = how.section;
    let children: Vec<&clap::Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    // A subcommand without examples of its own shows those of its parent that use it (`policy set` those of
    // `policy`).
    let mut examples = examples(cmd);
    if examples.is_empty() {
        let word = format!(" {} ", cmd.get_name());
        examples = parent.map_or_else(Vec::new, |(_, e)| {
            e.iter().filter(|(c, _)| format!("{c} ").contains(&word)).cloned().collect()
        });
    }
    for child in &children {
        write_page(child, Some((&name, &examples)), how)?;
    }
    let extra = (how.sections)(&name);
    let man = clap_mangen::Man::new(cmd.clone()).section(section);
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    match extra.iter().find(|s| s.title == "DESCRIPTION") {
        Some(description) => render(&mut page, description)?,
        None => man.render_description_section(&mut page)?,
    }
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut page)?;
    }
    if !children.is_empty() {
        man.render_subcommands_section(&mut page)?;
    }
    for s in extra.iter().filter(|s| s.title != "DESCRIPTION") {
        render(&mut page, s)?;
    }
    if !examples.is_empty() {
        writeln!(page, ".SH EXAMPLES")?;
        for (command, what) in examples {
            writeln!(page, ".TP\n\\fB{}\\fR\n{}", escape(&command), escape(&what))?;
        }
    }
    let mut see: Vec<String> = parent.into_iter().map(|(p, _)| format!("{p}({section})")).collect();
    see.extend(children.iter().map(|c| format!("{}({section})", c.get_display_name().unwrap_or_else(|| c.get_name()))));
    see.extend(how.related.iter().map(|r| (*r).to_string()));
    writeln!(page, ".SH \"SEE ALSO\"\n{}", see.iter().map(|s| escape(s)).collect::<Vec<_>>().join(", "))?;
    man.render_version_section(&mut page)?;
    std::fs::write(how.dir.join(format!("{name}.{section}")), page)
}

/// Writes `s` as roff: its title, then each paragraph (`.PP`) or tagged paragraph (`.TP`, from `TERM\tTEXT`).
fn render(page: &mut Vec<u8>, s: &Section) -> std::io::Result<()> {
    writeln!(page, ".SH \"{}\"", s.title)?;
    for paragraph in s.text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        let mut plain = Vec::new();
        for line in paragraph.lines() {
            match line.split_once('\t') {
                Some((term, text)) => writeln!(page, ".TP\n\\fB{}\\fR\n{}", escape(term.trim()), escape(text.trim()))?,
                None => plain.push(line.trim()),
            }
        }
        if !plain.is_empty() {
            writeln!(page, ".PP\n{}", escape(&plain.join(" ")))?;
        }
    }
    Ok(())
}

/// The examples of a command's `Examples:` help text: each a line indented by two spaces (the command line),
/// then lines indented by six (what it does).
fn examples(cmd: &clap::Command) -> Vec<(String, String)> {
    let Some(text) = cmd.get_after_long_help().or_else(|| cmd.get_after_help()).map(ToString::to_string) else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = Vec::new();
    for line in text.lines().skip_while(|l| l.trim() != "Examples:").skip(1) {
        if let Some(what) = line.strip_prefix("      ") {
            if let Some(last) = found.last_mut() {
                last.1 =
                    if last.1.is_empty() { what.trim().to_string() } else { format!("{} {}", last.1, what.trim()) };
            }
        } else if let Some(command) = line.strip_prefix("  ") {
            found.push((command.trim().to_string(), String::new()));
        }
    }
    found
}

/// `text` as roff reads it literally: backslashes and hyphens escaped, a leading `.` or `'` kept as text.
fn escape(text: &str) -> String {
    let body = text.replace('\\', "\\e").replace('-', "\\-");
    if body.starts_with(['.', '\'']) {
        format!("\\&{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::{escape, examples, render, Section};

    #[test]
    fn examples_come_from_the_help_text() {
        let cmd = clap::Command::new("x").after_help(
            "Examples:\n  x --fast -n 2\n      runs it fast,\n      twice\n  x --list\n      lists\n\nMore text.",
        );
        assert_eq!(
            examples(&cmd),
            [("x --fast -n 2".into(), "runs it fast, twice".into()), ("x --list".into(), "lists".into())]
        );
        assert_eq!(escape(".x -a \\n"), "\\&.x \\-a \\en");
    }

    #[test]
    fn sections_are_paragraphs_and_tagged_paragraphs() {
        let mut page = Vec::new();
        render(&mut page, &Section::new("EXIT STATUS", "How it ends.\nAlways.\n\n0\tsuccess\n2\t-bad input")).unwrap();
        assert_eq!(
            String::from_utf8(page).unwrap(),
            ".SH \"EXIT STATUS\"\n.PP\nHow it ends. Always.\n.TP\n\\fB0\\fR\nsuccess\n.TP\n\\fB2\\fR\n\\-bad input\n"
        );
    }
}
