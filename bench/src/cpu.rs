//! CPU used by the processes of a benchmark case, read from `/proc/<pid>/stat`: the broker,
//! the gateway (or a peer and the processes it starts) and the load generator share the same
//! cores here, so a case reports what each of them used, not only what the pair reached.

use std::time::Instant;

use serde_json::json;

/// CPU seconds (user + system) process `pid` has used, and with `children` also what its
/// exited children it waited for used (a peer that runs a command per hook).
pub fn cpu_secs(pid: u32, children: bool) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&stat)?;
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // utime, stime, cutime, cstime are fields 14-17 of proc(5), 11-14 after `state`.
    let mut ticks = field(11)? + field(12)?;
    if children {
        ticks += field(13)? + field(14)?;
    }
    // SAFETY: sysconf reads a constant of the running system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// The fields of a `/proc/<pid>/stat` line from `state` on (the command name before them may
/// hold spaces and parentheses).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(
        stat.get(stat.rfind(')')? + 2..)?
            .split_whitespace()
            .collect(),
    )
}

/// The pids of processes named exactly `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    std::process::Command::new("pgrep")
        .args(["-x", name])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `root` and every live process below it.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| stat_fields(&s)?.get(1)?.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

/// What a group of processes is: fixed pids, or a process and everything it starts (read
/// again at the end: a peer's workers or per-hook commands come and go).
pub enum Procs {
    Pids(Vec<u32>),
    Tree(u32),
}

impl Procs {
    fn used(&self) -> f64 {
        match self {
            Procs::Pids(pids) => pids.iter().filter_map(|p| cpu_secs(*p, false)).sum(),
            // A child that exited and was waited for is in its parent's children's time; one
            // that is alive is counted by itself.
            Procs::Tree(root) => process_tree(*root)
                .iter()
                .filter_map(|p| cpu_secs(*p, true))
                .sum(),
        }
    }
}

/// CPU used by named groups of processes between `start` and `finish`.
pub struct CpuProbe {
    groups: Vec<(&'static str, Procs, f64)>,
    t0: Instant,
}

impl CpuProbe {
    pub fn start(groups: Vec<(&'static str, Vec<u32>)>) -> Self {
        Self::start_procs(
            groups
                .into_iter()
                .map(|(n, pids)| (n, Procs::Pids(pids)))
                .collect(),
        )
    }

    pub fn start_procs(groups: Vec<(&'static str, Procs)>) -> Self {
        let groups = groups
            .into_iter()
            .map(|(n, procs)| {
                let used = procs.used();
                (n, procs, used)
            })
            .collect();
        CpuProbe {
            groups,
            t0: Instant::now(),
        }
    }

    /// `{<group>_cores, <group>_us_per_hook}` for `rate` accepted hooks a second.
    pub fn finish(self, rate: f64) -> serde_json::Map<String, serde_json::Value> {
        self.report(|used, wall| (rate > 0.0).then(|| used / wall * 1e6 / rate))
    }

    /// `{<group>_cores, <group>_us_per_hook}` for `hooks` hooks handled in all since `start`
    /// (CPU over the whole window divided by every hook in it).
    pub fn finish_hooks(self, hooks: u64) -> serde_json::Map<String, serde_json::Value> {
        self.report(|used, _| (hooks > 0).then(|| used * 1e6 / hooks as f64))
    }

    /// Each group's cores over the window and `us_per_hook(cpu seconds, wall seconds)`.
    fn report(
        self,
        us_per_hook: impl Fn(f64, f64) -> Option<f64>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let wall = self.t0.elapsed().as_secs_f64();
        let mut out = serde_json::Map::new();
        for (name, procs, before) in self.groups {
            let used = procs.used() - before;
            out.insert(format!("{name}_cores"), json!(round2(used / wall)));
            if let Some(us) = us_per_hook(used, wall) {
                out.insert(
                    format!("{name}_us_per_hook"),
                    json!((us * 10.0).round() / 10.0),
                );
            }
        }
        out
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Prints `{case: "<case>_cpu", ...cpu}`.
pub fn cpu_line(case: &str, cpu: serde_json::Map<String, serde_json::Value>) {
    let mut line = serde_json::Map::new();
    line.insert("case".into(), json!(format!("{case}_cpu")));
    line.extend(cpu);
    crate::emit(serde_json::Value::Object(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let stat = "4242 (node (worker) 1) S 17 4242 4242 0 -1 4194560 9 0 0 0 250 30 7 3 20";
        let f = stat_fields(stat).expect("fields");
        assert_eq!(f[0], "S");
        assert_eq!(f[1], "17", "ppid");
        assert_eq!((f[11], f[12], f[13], f[14]), ("250", "30", "7", "3"));
    }

    #[test]
    fn this_process_is_in_its_own_tree_and_has_used_cpu() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let tree = process_tree(me);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(tree[0], me);
        assert!(tree.contains(&child.id()), "the child is below its parent");
        assert!(cpu_secs(me, false).is_some());
        assert!(cpu_secs(u32::MAX, false).is_none(), "no such process");
    }
}
