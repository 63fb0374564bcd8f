//! What a run of an experiment ended with: its session (the runs it stored) and its failed jobs. A job that exits
//! non-zero or whose kernel does not verify fails its case: the case is stored, marked failed, kept out of every
//! mean, and the command ends non-zero naming the first such job and the last line it wrote on stderr.

use std::path::Path;

/// What a run made: the session of the runs it stored, and what failed in it.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The session (start time) of every run it stored.
    pub session: f64,
    /// Its failed jobs.
    pub failures: Failures,
}

/// The failed jobs of a run: the first one said in full, the others counted.
#[derive(Debug, Default)]
pub struct Failures {
    first: Option<String>,
    count: usize,
}

impl Failures {
    /// Notes job `job` of case `case` (`cfs ep+cg rep 1`) if it failed: exited with other than 0 (`status`,
    /// `None` for a signal) or, when it ran a kernel (`verified` is `Some`), did not verify. `stderr`: the file
    /// its standard error went to, whose last line says why. Returns whether it failed.
    pub fn note(
        &mut self,
        case: &str,
        job: &str,
        status: Option<i32>,
        verified: Option<bool>,
        stderr: Option<&Path>,
    ) -> bool {
        let why = match (status, verified) {
            (Some(0), Some(false)) => "exit 0".to_string(),
            (Some(0), _) => return false,
            (Some(code), _) => format!("exit {code}"),
            (None, _) => "killed by a signal".to_string(),
        };
        let said = stderr.and_then(last_line).unwrap_or_else(|| {
            if verified == Some(false) {
                "its result did not verify".to_string()
            } else {
                "nothing on stderr".to_string()
            }
        });
        self.add(format!("case {case}: job {job} failed ({why}): {said}"));
        true
    }

    /// Notes a failure said in full (`case …: what failed`).
    pub fn add(&mut self, what: String) {
        self.count += 1;
        self.first.get_or_insert(what);
    }

    /// The first failure, as noted.
    pub fn first(&self) -> Option<&str> {
        self.first.as_deref()
    }

    /// How many jobs failed.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The error the run of experiment `name` ends with: the first failure and how many more; `None` when
    /// nothing failed.
    pub fn error(&self, name: &str) -> Option<String> {
        let first = self.first.as_ref()?;
        let more = match self.count {
            1 => String::new(),
            n => format!(" ({} more failed; the report marks them)", n - 1),
        };
        Some(format!("experiment {name}: {first}{more}"))
    }
}

/// The last line with text of the file at `path`, its control characters dropped and cut to 300 characters. The
/// launcher's banners (the blocks between lines of dashes that Open MPI adds when a rank fails) are passed over:
/// the program's own last word is above them.
pub(crate) fn last_line(path: &Path) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&text);
    let is_rule = |l: &str| l.len() >= 10 && l.chars().all(|c| c == '-');
    let mut in_banner = false;
    let mut own = Vec::new();
    for line in text.lines().map(str::trim) {
        if is_rule(line) {
            in_banner = !in_banner;
        } else if !in_banner && !line.is_empty() {
            own.push(line);
        }
    }
    let line = own.last()?;
    Some(line.chars().filter(|c| !c.is_control()).take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failed_job_is_named_with_its_last_line_on_stderr() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let err = dir.path().join("ep.err");
        let banner = "-----------\nPrimary job  terminated normally, but 1 process returned\n-----------\n";
        std::fs::write(&err, format!("starting\nep: unknown class 'Z' (expected one of SWABC)\n\n{banner}{banner}"))
            .unwrap();
        let mut f = Failures::default();
        assert!(!f.note("cfs lu+ep rep 1", "x-lu-0", Some(0), Some(true), None));
        assert!(f.error("x").is_none());
        assert!(f.note("cfs lu+ep rep 1", "x-ep-1", Some(2), Some(false), Some(&err)));
        assert!(f.note("gang lu+ep rep 1", "x-ep-1", Some(0), Some(false), None));
        assert!(f.note("gang lu+ep rep 2", "x-ep-1", None, None, None));
        assert_eq!(f.count(), 3);
        assert_eq!(
            f.error("x").unwrap(),
            "experiment x: case cfs lu+ep rep 1: job x-ep-1 failed (exit 2): ep: unknown class 'Z' (expected one of \
             SWABC) (2 more failed; the report marks them)"
        );
        let mut g = Failures::default();
        g.note("c", "j", Some(0), Some(false), None);
        assert_eq!(g.error("x").unwrap(), "experiment x: case c: job j failed (exit 0): its result did not verify");
    }
}
