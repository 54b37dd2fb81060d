//! Process trees: every process an exec starts stays accountable to that exec, however it forks,
//! `setsid()`s or double-forks, so kills, timeouts, session closes and the daemon's exit reach
//! all of them (a process group alone does not: `setsid` leaves it).
//!
//! Two ways, chosen by `security.process_tracking` (see [`crate::config`]):
//! - **cgroup** (cgroup v2, where the daemon may create cgroups below its own, as root or with
//!   a delegated subtree): each exec's leader joins a fresh cgroup between fork and exec, and
//!   nothing it starts can leave it without write access to an ancestor's `cgroup.procs`
//!   (which a command run as root has: root's commands can undo anything rexd does).
//!   `cgroup.kill` kills them all at once (Linux 5.14).
//! - **subreaper** (everywhere else): the daemon is `PR_SET_CHILD_SUBREAPER`, so an orphaned
//!   descendant is re-parented to it instead of to init, and each exec's processes carry an
//!   environment marker ([`MARKER`]). An exec's tree is its leader's descendants plus the
//!   daemon's descendants with its marker (and theirs), found by walking `/proc`. A process
//!   that both leaves its exec's descendants and clears its environment is not attributed to
//!   the exec; it stays the daemon's descendant, and the end of `rexd --stdio` / `--mcp`
//!   ([`kill_all_descendants`]) kills it.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use crate::sys;

/// How process trees are tracked (`security.process_tracking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Tracking {
    /// A cgroup per exec where the daemon can create them, else the subreaper.
    #[default]
    Auto,
    /// A cgroup per exec, or execs fail.
    Cgroup,
    /// The subreaper and `/proc` walks, even where cgroups would work.
    Subreaper,
}

/// The variable marking an exec's processes in subreaper mode: `<daemon pid>.<n>.<exec>`.
pub const MARKER: &str = "REXD_TREE";

static NEXT_TRACKER: AtomicU64 = AtomicU64::new(0);

/// Tracks the trees of one service.
#[derive(Debug)]
pub struct Tracker {
    mode: Tracking,
    /// Where new execs' cgroups go (cgroup mode).
    base: Option<PathBuf>,
    /// Every base made, removed when the tracker drops.
    bases: Vec<PathBuf>,
    /// Why cgroups are not used.
    why_not: Option<String>,
    /// Unique per tracker: `<pid>.<n>`.
    id: String,
    /// Killed processes to reap once they are our children (subreaper mode), with the number
    /// of tries so far.
    to_reap: HashMap<libc::pid_t, u32>,
    /// Leaders started and not reaped yet.
    leaders: HashSet<libc::pid_t>,
}

/// What a child does between fork and exec to join its tree.
#[derive(Debug, Default)]
pub struct Join {
    /// Its cgroup's directory, to start it in (`clone3(CLONE_INTO_CGROUP)`).
    pub cgroup_dir: Option<OwnedFd>,
    /// Its cgroup's `cgroup.procs`, to write `0` (itself) to where it cannot start there.
    pub cgroup_procs: Option<OwnedFd>,
    /// The marker variable to set.
    pub marker: Option<(String, String)>,
}

/// The processes of one exec.
#[derive(Debug)]
pub struct Tree {
    /// The leader until it is reaped (its pid may be reused after that).
    leader: Option<libc::pid_t>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Cgroup(PathBuf),
    Sweep(String),
}

fn other(message: impl Into<String>) -> io::Error {
    io::Error::other(message.into())
}

/// This process's cgroup v2 directory.
fn own_cgroup_dir() -> io::Result<PathBuf> {
    let cgroup = fs::read_to_string("/proc/self/cgroup")?;
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| other("no cgroup v2 hierarchy"))?;
    let mounts = fs::read_to_string("/proc/self/mountinfo")?;
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if !right.starts_with("cgroup2 ") {
            continue;
        }
        let fields: Vec<&str> = left.split(' ').collect();
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let Some(rel) = path.strip_prefix(root.trim_end_matches('/')) else {
            continue;
        };
        return Ok(Path::new(point).join(rel.trim_start_matches('/')));
    }
    Err(other("no cgroup2 file system mounted"))
}

/// Makes the directory for this tracker's cgroups, checking what moving a child into them
/// takes: `cgroup.kill` in them, write access to our own `cgroup.procs` (the common ancestor).
fn cgroup_base(id: &str) -> io::Result<PathBuf> {
    let own = own_cgroup_dir()?;
    fs::OpenOptions::new()
        .write(true)
        .open(own.join("cgroup.procs"))
        .map_err(|e| other(format!("{}: {e}", own.join("cgroup.procs").display())))?;
    remove_stale(&own);
    let base = own.join(format!("rexd-{id}"));
    fs::create_dir(&base).map_err(|e| other(format!("{}: {e}", base.display())))?;
    if !base.join("cgroup.kill").exists() {
        let _ = fs::remove_dir(&base);
        return Err(other("no cgroup.kill (Linux before 5.14)"));
    }
    Ok(base)
}

/// Removes the empty cgroups of daemons that died without cleaning up (killed by a signal).
/// A cgroup that still has processes stays: they are found there.
fn remove_stale(own: &Path) {
    let Ok(dir) = fs::read_dir(own) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("rexd-"))
            .and_then(|n| n.split('.').next())
        else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        if let Ok(execs) = fs::read_dir(entry.path()) {
            for exec in execs.flatten().filter(|e| e.path().is_dir()) {
                let _ = fs::remove_dir(exec.path());
            }
        }
        let _ = fs::remove_dir(entry.path());
    }
}

impl Tracker {
    /// A tracker in `mode`. In `Cgroup` mode a tracker that cannot make cgroups fails every
    /// [`Tracker::prepare`] with the reason.
    pub fn new(mode: Tracking) -> Tracker {
        let id = format!(
            "{}.{}",
            std::process::id(),
            NEXT_TRACKER.fetch_add(1, Ordering::Relaxed)
        );
        let mut t = Tracker {
            mode,
            base: None,
            bases: Vec::new(),
            why_not: None,
            id,
            to_reap: HashMap::new(),
            leaders: HashSet::new(),
        };
        if mode == Tracking::Subreaper {
            t.why_not = Some("security.process_tracking = \"subreaper\"".into());
        } else {
            match cgroup_base(&t.id) {
                Ok(base) => {
                    t.bases.push(base.clone());
                    t.base = Some(base);
                }
                Err(e) => t.why_not = Some(e.to_string()),
            }
        }
        if t.base.is_none() && mode != Tracking::Cgroup {
            t.start_subreaper();
        }
        t
    }

    fn start_subreaper(&mut self) {
        if let Err(e) = sys::set_child_subreaper() {
            crate::log::warn(&format!("cannot become the child subreaper: {e}"));
        }
    }

    /// Whether execs get a cgroup each.
    pub fn uses_cgroups(&self) -> bool {
        self.base.is_some()
    }

    /// How trees are tracked, for the log.
    pub fn describe(&self) -> String {
        match (&self.base, &self.why_not) {
            (Some(b), _) => format!("a cgroup per exec under {}", b.display()),
            (None, why) => format!(
                "the child subreaper and /proc (no cgroups: {})",
                why.as_deref().unwrap_or("?")
            ),
        }
    }

    /// The tree for exec `key` and what its leader must do to join it.
    pub fn prepare(&self, key: u64) -> io::Result<(Tree, Join)> {
        if let Some(base) = &self.base {
            let dir = base.join(format!("p{key}"));
            fs::create_dir(&dir)?;
            let procs = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"));
            let opened = procs.and_then(|procs| {
                let dir = fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_CLOEXEC | libc::O_DIRECTORY)
                    .open(&dir)?;
                Ok((procs, dir))
            });
            return match opened {
                Ok((procs, cgroup)) => Ok((
                    Tree {
                        leader: None,
                        kind: Kind::Cgroup(dir),
                    },
                    Join {
                        cgroup_dir: Some(cgroup.into()),
                        cgroup_procs: Some(procs.into()),
                        marker: None,
                    },
                )),
                Err(e) => {
                    let _ = fs::remove_dir(&dir);
                    Err(e)
                }
            };
        }
        if self.mode == Tracking::Cgroup {
            return Err(other(format!(
                "security.process_tracking is \"cgroup\" but no cgroup can be made: {}",
                self.why_not.as_deref().unwrap_or("?")
            )));
        }
        Ok(self.prepare_sweep(key))
    }

    /// The tree for exec `key` in subreaper mode, whatever the tracker's mode (the retry of a
    /// child that could not join its cgroup).
    pub fn prepare_sweep(&self, key: u64) -> (Tree, Join) {
        if self.base.is_some() {
            // Not the subreaper yet: the retried child's orphans must come here too.
            let _ = sys::set_child_subreaper();
        }
        let marker = format!("{}.{key}", self.id);
        (
            Tree {
                leader: None,
                kind: Kind::Sweep(marker.clone()),
            },
            Join {
                cgroup_dir: None,
                cgroup_procs: None,
                marker: Some((MARKER.to_owned(), marker)),
            },
        )
    }

    /// The retry of [`Tracker::prepare_sweep`] failed too: the program could not start, not
    /// the cgroup, so cgroups stay, and so does init as the reaper of orphans. Without this
    /// the daemon stayed the subreaper, and what later execs left behind came back to it as
    /// zombies that nothing reaps in cgroup mode.
    pub fn abandon_sweep(&self) {
        if self.base.is_some() {
            let _ = sys::clear_child_subreaper();
        }
    }

    /// In `Auto` mode, after an exec's cgroup could not be made or joined: the subreaper from
    /// now on. `false` when there is nothing to fall back to.
    pub fn fall_back(&mut self, why: &io::Error) -> bool {
        if self.mode != Tracking::Auto || self.base.is_none() {
            return false;
        }
        crate::log::warn(&format!(
            "an exec's cgroup failed ({why}): tracking process trees with the subreaper"
        ));
        self.base = None;
        self.why_not = Some(why.to_string());
        self.start_subreaper();
        true
    }

    /// Kills every process of `tree` (`SIGKILL`); in subreaper mode they are reaped later by
    /// [`Tracker::reap`].
    pub fn kill(&mut self, tree: &Tree) {
        match &tree.kind {
            Kind::Cgroup(dir) => {
                if let Some(leader) = tree.leader {
                    let _ = sys::kill_group(leader, libc::SIGKILL);
                }
                if let Err(e) = fs::write(dir.join("cgroup.kill"), "1")
                    && e.kind() != io::ErrorKind::NotFound
                {
                    crate::log::warn(&format!("{}: {e}", dir.display()));
                }
            }
            Kind::Sweep(_) => {
                // Orphans of every exec come to us: when each child of ours is a live leader, a
                // tree whose leader is gone has nothing left, and the walk is saved.
                if tree.leader.is_none()
                    && own_children().is_some_and(|c| c.iter().all(|p| self.leaders.contains(p)))
                {
                    return;
                }
                // A process may fork between the walk and the kill: walk again until none is
                // left (a few rounds; a fork bomb outruns any walk, cgroups do not).
                for _ in 0..4 {
                    let members = tree.members();
                    if members.is_empty() {
                        break;
                    }
                    for pid in members {
                        let _ = sys::kill_pid(pid, libc::SIGKILL);
                        // Leaders are the service's to reap: it reads their exit status.
                        if !self.leaders.contains(&pid) {
                            self.to_reap.entry(pid).or_insert(0);
                        }
                    }
                }
            }
        }
    }

    /// Whether killed processes wait to be reaped ([`Tracker::reap`]).
    pub fn has_pending(&self) -> bool {
        !self.to_reap.is_empty()
    }

    /// Reaps killed processes that ended up as our children (subreaper mode). `true` while
    /// some are left to reap.
    pub fn reap(&mut self) -> bool {
        self.to_reap.retain(|&pid, tries| match sys::try_wait(pid) {
            Ok(Some(_)) => false,
            Ok(None) => true,
            // Not (yet) our child: its parent may be dying and about to hand it over.
            Err(_) => {
                *tries += 1;
                *tries < 50 && Path::new(&format!("/proc/{pid}")).exists()
            }
        });
        !self.to_reap.is_empty()
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for base in self.bases.iter().rev() {
            let _ = fs::remove_dir(base);
        }
    }
}

impl Tracker {
    /// `tree`'s leader started as `pid`.
    pub fn started(&mut self, tree: &mut Tree, pid: libc::pid_t) {
        tree.leader = Some(pid);
        self.leaders.insert(pid);
    }

    /// `tree`'s leader was reaped: its pid no longer names it.
    pub fn reaped(&mut self, tree: &mut Tree) {
        if let Some(pid) = tree.leader.take() {
            self.leaders.remove(&pid);
        }
    }
}

impl Tree {
    /// The live processes of the tree.
    pub fn members(&self) -> Vec<libc::pid_t> {
        match &self.kind {
            Kind::Cgroup(dir) => fs::read_to_string(dir.join("cgroup.procs"))
                .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
                .unwrap_or_default(),
            Kind::Sweep(marker) => sweep(self.leader, marker),
        }
    }

    /// Sends `signal` to the leader's process group and to every process of the tree.
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(leader) = self.leader {
            let _ = sys::kill_group(leader, signal);
        }
        for pid in self.members() {
            let _ = sys::kill_pid(pid, signal);
        }
    }

    /// Removes the tree's cgroup once it is empty; `true` when nothing is left to remove.
    pub fn remove(&self) -> bool {
        match &self.kind {
            Kind::Cgroup(dir) => match fs::remove_dir(dir) {
                Ok(()) => true,
                Err(e) => e.kind() == io::ErrorKind::NotFound,
            },
            Kind::Sweep(_) => true,
        }
    }
}

/// One line of `/proc/PID/stat`: parent and whether it is a zombie.
fn stat_of(pid: libc::pid_t) -> Option<(libc::pid_t, bool)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((ppid, state == "Z"))
}

/// Live processes by parent.
fn children_table() -> HashMap<libc::pid_t, Vec<libc::pid_t>> {
    let mut table: HashMap<libc::pid_t, Vec<libc::pid_t>> = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return table;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some((ppid, false)) = stat_of(pid) {
            table.entry(ppid).or_default().push(pid);
        }
    }
    table
}

/// This process's children (zombies included), or `None` where the kernel does not list them.
fn own_children() -> Option<Vec<libc::pid_t>> {
    let mut out = Vec::new();
    for task in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let text = fs::read_to_string(task.path().join("children")).ok()?;
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<libc::pid_t>().ok()),
        );
    }
    Some(out)
}

/// `roots` and their descendants.
fn closure(
    table: &HashMap<libc::pid_t, Vec<libc::pid_t>>,
    roots: impl IntoIterator<Item = libc::pid_t>,
) -> Vec<libc::pid_t> {
    let mut seen = HashSet::new();
    let mut stack: Vec<libc::pid_t> = roots.into_iter().collect();
    let mut out = Vec::new();
    while let Some(pid) = stack.pop() {
        if seen.insert(pid) {
            out.push(pid);
            stack.extend(table.get(&pid).into_iter().flatten().copied());
        }
    }
    out
}

fn has_marker(pid: libc::pid_t, marker: &str) -> bool {
    let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{MARKER}={marker}");
    env.split(|b| *b == 0).any(|kv| kv == want.as_bytes())
}

/// Subreaper mode: the leader's descendants and the daemon's descendants that carry the
/// marker, with theirs.
fn sweep(leader: Option<libc::pid_t>, marker: &str) -> Vec<libc::pid_t> {
    let me = std::process::id() as libc::pid_t;
    let table = children_table();
    let ours: Vec<libc::pid_t> = closure(&table, table.get(&me).into_iter().flatten().copied());
    let mut roots: Vec<libc::pid_t> = ours
        .iter()
        .copied()
        .filter(|&p| has_marker(p, marker))
        .collect();
    if let Some(leader) = leader
        && ours.contains(&leader)
    {
        roots.push(leader);
    }
    closure(&table, roots)
}

/// Kills every descendant of this process and reaps what it can within about a second: the
/// end of a daemon process, for what no tree claims (a subreaper-mode escapee that cleared
/// its marker).
pub fn kill_all_descendants() {
    // No child, no descendant (and nothing to reap): walking all of /proc was most of the time
    // a `rexd --stdio` took to end, which `rex` and ssh wait for.
    if own_children().is_some_and(|children| children.is_empty()) {
        return;
    }
    let me = std::process::id() as libc::pid_t;
    for _ in 0..4 {
        let table = children_table();
        let all = closure(&table, table.get(&me).into_iter().flatten().copied());
        if all.is_empty() {
            break;
        }
        for pid in all {
            let _ = sys::kill_pid(pid, libc::SIGKILL);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while std::time::Instant::now() < deadline {
        match sys::try_wait(-1) {
            Ok(Some(_)) => continue,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon killed by a signal leaves its (empty) cgroups; the next one removes them.
    #[test]
    fn stale_cgroups_of_dead_daemons_are_removed() {
        let Ok(own) = own_cgroup_dir() else {
            eprintln!("SKIPPED: no cgroup v2 here");
            return;
        };
        // Above the kernel's largest pid_max: no such process can exist.
        let stale = own.join("rexd-4194305.0");
        if fs::create_dir_all(stale.join("p1")).is_err() {
            eprintln!("SKIPPED: cannot make cgroups in {}", own.display());
            return;
        }
        let t = Tracker::new(Tracking::Auto);
        assert!(!stale.exists(), "{} is still there", stale.display());
        assert!(t.uses_cgroups(), "{}", t.describe());
    }

    #[test]
    fn proc_walk_finds_a_child_and_its_child() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let members = loop {
            let m = closure(&children_table(), [pid]);
            if m.len() == 2 || std::time::Instant::now() > deadline {
                break m;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        for p in &members {
            let _ = sys::kill_pid(*p, libc::SIGKILL);
        }
        let _ = child.wait();
        assert_eq!(members.len(), 2, "{members:?}");
        assert_eq!(members[0], pid);
    }
}
