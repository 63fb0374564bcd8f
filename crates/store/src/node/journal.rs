//! What the agent keeps in the store: the restore journal (every cgroup file it changed, with the value to put
//! back, written before the change) and the decision log.

use lockstep_core::cosched::auto::Choice;
use lockstep_core::ident::{JobKey, NodeName};
use lockstep_core::job::JobOrigin;
use lockstep_core::names::Names;
use rusqlite::params;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::Serialize;

use crate::db::{now, Store};

/// What a decision record says the agent did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A slot began: the policy was applied at its boundary (the record has no job).
    Slot,
    /// The policy was applied again within a slot: jobs or the policy changed (no job).
    Replan,
    /// The job was frozen.
    Freeze,
    /// The job was thawed.
    Thaw,
    /// The job's CPU weight was raised.
    Boost,
    /// The job's CPU weight was put back.
    Unboost,
    /// The job ended and was forgotten.
    Gone,
    /// `dcs` raised the job a message arrived for (duration: arrival to raise applied).
    DcsRaise,
    /// `dcs` lowered it again (duration: how long it was raised).
    DcsLower,
    /// The slot is the job's (its row is active or its place holds the slot), recorded at every boundary under
    /// a slotted policy: agreement across nodes is measured from these.
    Favour,
}

/// The names of [`Action`], as the `decisions` table stores them.
pub const ACTIONS: Names<Action> = Names(&[
    ("slot", Action::Slot),
    ("replan", Action::Replan),
    ("freeze", Action::Freeze),
    ("thaw", Action::Thaw),
    ("boost", Action::Boost),
    ("unboost", Action::Unboost),
    ("gone", Action::Gone),
    ("dcs-raise", Action::DcsRaise),
    ("dcs-lower", Action::DcsLower),
    ("favour", Action::Favour),
]);

impl Action {
    /// The stored name.
    pub fn name(self) -> &'static str {
        ACTIONS.name(self)
    }
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl ToSql for Action {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.name()))
    }
}

impl FromSql for Action {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let name = value.as_str()?;
        ACTIONS.parse(name).ok_or_else(|| FromSqlError::Other(format!("unknown decision action {name:?}").into()))
    }
}

/// One file the agent changed and must restore, as the agent journals it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    /// The cgroup interface file (or thread) changed.
    pub file: String,
    /// The value to write back.
    pub value: String,
    /// The job it was changed for.
    pub job: JobKey,
}

/// One journaled change as it is read back to be undone: what to write where. The job it was made for stays in
/// the store for people to read; undoing it needs none (and an entry an older build wrote under a name this one
/// refuses is undone all the same).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journaled {
    /// The cgroup interface file (or thread) changed.
    pub file: String,
    /// The value to write back.
    pub value: String,
}

/// One co-scheduling decision.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    /// Seconds since the epoch.
    pub time: f64,
    /// The node.
    pub node: NodeName,
    /// Policy in force.
    pub policy: String,
    /// Slot index (wall-clock slots since the epoch).
    pub slot: u64,
    /// Active row of the slot.
    pub active_row: u32,
    /// Number of rows.
    pub rows: u32,
    /// The job acted on; `None` for the slot's own record.
    pub job: Option<JobKey>,
    /// What was done.
    pub action: Action,
    /// Time the action took, in microseconds; for a slot's own record (`slot`, `replan`), the whole tick: every
    /// job switched, the slow ones last.
    pub duration_us: f64,
    /// For a slot's own record: microseconds from the tick's start until every job known to switch promptly was
    /// switched (those whose change the kernel takes long over, or not yet measured, come after: the agent's
    /// `managed::PROMPT_SWITCH`). What the slot's lateness is measured to. `None` for other records, and for
    /// records of agents before it was kept.
    pub prompt_us: Option<f64>,
}

impl Store {
    /// Adds (or replaces) the journal entry of a file.
    pub fn journal_add(&self, e: &JournalEntry) -> crate::error::Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO restore_journal (file, value, job, since) VALUES (?1, ?2, ?3, ?4)",
            params![e.file, e.value, e.job.to_string(), now()],
        )?;
        Ok(())
    }

    /// Removes the journal entry of `file` (restored).
    pub fn journal_remove(&self, file: &str) -> crate::error::Result<()> {
        self.conn.execute("DELETE FROM restore_journal WHERE file = ?1", params![file])?;
        Ok(())
    }

    /// Every journaled change, oldest first.
    pub fn journal(&self) -> crate::error::Result<Vec<Journaled>> {
        let mut stmt = self.conn.prepare("SELECT file, value FROM restore_journal ORDER BY since")?;
        let rows = stmt.query_map([], |r| Ok(Journaled { file: r.get(0)?, value: r.get(1)? }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Saves (or replaces) managed job `key`'s description, under the key's text (`lu`, `slurm-42`).
    pub fn managed_put(&self, key: &JobKey, saved: &str) -> crate::error::Result<()> {
        let name = key.to_string();
        self.conn.execute("INSERT OR REPLACE INTO managed (name, saved) VALUES (?1, ?2)", params![name, saved])?;
        Ok(())
    }

    /// Forgets managed job `key`.
    pub fn managed_remove(&self, key: &JobKey) -> crate::error::Result<()> {
        self.managed_forget(&key.to_string())
    }

    /// Forgets the description saved under `stored`, text [`Store::managed_all`] returned that names no job now
    /// (an earlier build's, or one whose description cannot be read).
    pub fn managed_forget(&self, stored: &str) -> crate::error::Result<()> {
        self.conn.execute("DELETE FROM managed WHERE name = ?1", params![stored])?;
        Ok(())
    }

    /// Every saved managed job, as (the text it is saved under, description): what the reader parses, since an
    /// earlier build may have saved it.
    pub fn managed_all(&self) -> crate::error::Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare("SELECT name, saved FROM managed ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every job the agent manages, as the CLI shows it (from the descriptions the agent saved; one it cannot
    /// read is left out).
    pub fn managed_jobs(&self) -> crate::error::Result<Vec<ManagedJob>> {
        Ok(self.managed_all()?.into_iter().filter_map(|(name, saved)| ManagedJob::read(&name, &saved)).collect())
    }

    /// Appends decisions and removes the journal entries of `restored` files, in one transaction.
    pub fn log_decisions(&mut self, decisions: &[Decision], restored: &[String]) -> crate::error::Result<()> {
        if decisions.is_empty() && restored.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        {
            let mut remove = tx.prepare_cached("DELETE FROM restore_journal WHERE file = ?1")?;
            for file in restored {
                remove.execute(params![file])?;
            }
            let mut stmt = tx.prepare_cached(
                "INSERT INTO decisions (time, node, policy, slot, active_row, rows, job, action, duration_us,
                 prompt_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for d in decisions {
                stmt.execute(params![
                    d.time,
                    d.node.as_str(),
                    d.policy,
                    d.slot as i64,
                    d.active_row,
                    d.rows,
                    d.job.as_ref().map(JobKey::to_string),
                    d.action,
                    d.duration_us,
                    d.prompt_us
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes the decisions taken before `before` (seconds since the epoch); returns how many. The agent keeps
    /// them as long as its counter samples (`--retention`), so that the store does not grow with uptime.
    pub fn expire_decisions(&self, before: f64) -> crate::error::Result<usize> {
        self.conn.execute("DELETE FROM auto_choices WHERE time < ?1", params![before])?;
        Ok(self.conn.execute("DELETE FROM decisions WHERE time < ?1", params![before])?)
    }

    /// Logs what `auto` chose or started trying, each with the time (seconds since the epoch) it happened.
    pub fn log_auto(&mut self, node: &NodeName, records: &[(f64, Choice)]) -> crate::error::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO auto_choices (time, node, policy, trying, choice) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (time, c) in records {
                stmt.execute(params![time, node.as_str(), c.policy, c.trying, serde_json::to_string(c)?])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// What `auto` chose and tried between `from` and `to` (seconds since the epoch), oldest first.
    pub fn auto_choices(&self, from: f64, to: f64) -> crate::error::Result<Vec<(f64, Choice)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT time, choice FROM auto_choices WHERE time >= ?1 AND time <= ?2 ORDER BY rowid")?;
        let rows = stmt.query_map(params![from, to], |r| Ok((r.get::<_, f64>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (time, json) = row?;
            // A record another version wrote in another shape is skipped, not fatal.
            if let Ok(c) = serde_json::from_str(&json) {
                out.push((time, c));
            }
        }
        Ok(out)
    }

    /// Decisions at or after `since` (seconds since the epoch), oldest first.
    pub fn decisions(&self, since: f64) -> crate::error::Result<Vec<Decision>> {
        self.select_decisions("time >= ?1 ORDER BY rowid", params![since])
    }

    /// Decisions of kind `action` taken within `[from, to]` (seconds since the epoch), oldest first.
    pub fn decisions_between(&self, action: Action, from: f64, to: f64) -> crate::error::Result<Vec<Decision>> {
        self.select_decisions("action = ?1 AND time BETWEEN ?2 AND ?3 ORDER BY rowid", params![action, from, to])
    }

    /// The decisions that `filter` (an SQL condition over `decisions`, with its ordering) selects; one whose node
    /// or job is no valid name (written by an older build under rules this one refuses) is left out.
    fn select_decisions(&self, filter: &str, args: &[&dyn ToSql]) -> crate::error::Result<Vec<Decision>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT time, node, policy, slot, active_row, rows, job, action, duration_us, prompt_us FROM decisions \
             WHERE {filter}"
        ))?;
        let rows = stmt.query_map(args, |r| {
            let Ok(node) = r.get::<_, String>(1)?.parse() else { return Ok(None) };
            let Ok(job) = r.get::<_, Option<String>>(6)?.map(|j| j.parse()).transpose() else { return Ok(None) };
            Ok(Some(Decision {
                time: r.get(0)?,
                node,
                policy: r.get(2)?,
                slot: r.get::<_, i64>(3)? as u64,
                active_row: r.get(4)?,
                rows: r.get(5)?,
                job,
                action: r.get(7)?,
                duration_us: r.get(8)?,
                prompt_us: r.get(9)?,
            }))
        })?;
        let mut decisions = Vec::new();
        for row in rows {
            decisions.extend(row?);
        }
        Ok(decisions)
    }
}

/// A job the agent manages, as `lockstep jobs` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedJob {
    /// The job.
    pub name: JobKey,
    /// How it came under the agent.
    pub origin: JobOrigin,
    /// Its PUs.
    pub pus: String,
    /// Its owner's UID.
    pub owner: u64,
}

impl ManagedJob {
    /// Reads the description the agent saved under `name`: its origin is an object tagged with its `kind`. As at
    /// the agent's take-over, a Slurm job is keyed by its origin's job ID, whatever it was saved under; any other
    /// job's text must be a job name: one an older build saved under a name this one refuses (`slurm-42` adopted
    /// by hand) is no job here, and the agent puts it back when it starts.
    fn read(name: &str, saved: &str) -> Option<Self> {
        let saved: serde_json::Value = serde_json::from_str(saved).ok()?;
        let origin: JobOrigin = serde_json::from_value(saved["origin"]["kind"].clone()).ok()?;
        let key = match origin {
            JobOrigin::Slurm => JobKey::Slurm(serde_json::from_value(saved["origin"]["id"].clone()).ok()?),
            _ => JobKey::Named(name.parse().ok()?),
        };
        Some(Self {
            name: key,
            origin,
            pus: saved["pus"].as_str().unwrap_or("-").to_string(),
            owner: saved["owner"].as_u64().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::db::Store;
    use lockstep_core::ident::JobKey;

    #[test]
    fn a_managed_job_is_keyed_as_the_agent_keys_it_and_an_old_name_is_no_job() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let saved = |origin: &str| format!(r#"{{"origin":{origin},"pus":"0-1","owner":1000}}"#);
        let slurm = |id: u64| saved(&format!(r#"{{"kind":"slurm","id":{id},"dirs":[]}}"#));
        store.managed_put(&"lu".parse().unwrap(), &saved(r#"{"kind":"pids"}"#)).unwrap();
        store.managed_put(&"slurm-7".parse().unwrap(), &slurm(7)).unwrap();
        // An earlier build's: a job adopted by hand as `slurm-42`, and Slurm job 9 saved under another name.
        let old = "INSERT INTO managed (name, saved) VALUES (?1, ?2)";
        store.conn.execute(old, rusqlite::params!["slurm-42", saved(r#"{"kind":"cgroup"}"#)]).unwrap();
        store.conn.execute(old, rusqlite::params!["cg", slurm(9)]).unwrap();
        let keys: Vec<JobKey> = store.managed_jobs().unwrap().into_iter().map(|m| m.name).collect();
        let key = |k: &str| k.parse::<JobKey>().unwrap();
        assert_eq!(keys, [key("slurm-9"), key("lu"), key("slurm-7")]);
    }
}
