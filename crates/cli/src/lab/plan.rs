//! What both lab variants start from: the plan of names, actions and
//! live changes, the FIB built from it, its size, the controller key.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use nexthop_control::AuthKey;
use nexthop_othello::fib::{Action, ConciseFib, KeyType, NameKey, RouteChange};
use nexthop_othello::fibdir;
use nexthop_othello::Sizing;

use super::frame::mask_of;
use super::{step, LabOpts};
use crate::cmd_fib::{self, BuildOpts};
use crate::demo::{actions, pick_action, Mix};

/// The names, their actions, and the live changes, with what a checker
/// needs to know about them.
pub(crate) struct Plan {
    /// Names traffic is sent to (in the FIB for the whole run).
    pub names: Vec<[u8; 6]>,
    /// Their actions at the start.
    pub initial: Vec<Action>,
    /// The live changes, in order: action changes of traffic names, adds
    /// and deletes of other names (no traffic goes to those, so a removed
    /// name cannot be mistaken for a misforward).
    pub changes: Vec<RouteChange<[u8; 6]>>,
    /// For each change, the traffic name it changes (`u32::MAX`: none)
    /// and that name's port mask after it.
    pub touches: Vec<(u32, u8)>,
    /// Per traffic name: the ports any of its actions sent to.
    pub allowed: Vec<u8>,
    /// Per traffic name: the ports of its final action.
    pub final_mask: Vec<u8>,
    /// Adds, deletes and action changes among `changes`.
    pub counts: [usize; 3],
}

impl Plan {
    /// A seeded plan of `n` names and `n_changes` changes.
    pub fn new(n: usize, n_changes: usize, seed: u64) -> Plan {
        let table = actions();
        let names = nexthop_othello::keys::macs(seed, n);
        let mut r = Mix(seed);
        let initial: Vec<Action> = names.iter().map(|_| pick_action(&mut r, &table)).collect();
        let known: HashSet<[u8; 6]> = names.iter().copied().collect();
        let mut fresh: Vec<[u8; 6]> =
            nexthop_othello::keys::macs(seed ^ 0xDA4C_0FFE, n_changes / 2 + 16)
                .into_iter()
                .filter(|m| !known.contains(m))
                .collect();
        fresh.reverse();
        let mut current: Vec<Action> = initial.clone();
        let mut allowed: Vec<u8> = initial.iter().map(mask_of).collect();
        let mut present_dark: Vec<[u8; 6]> = Vec::new();
        let mut changes = Vec::with_capacity(n_changes);
        let mut touches = Vec::with_capacity(n_changes);
        let mut counts = [0usize; 3];
        let mut r = Mix(seed ^ 0x11FE_C4A6);
        for _ in 0..n_changes {
            let k = r.below(10);
            if (6..8).contains(&k) || (k >= 8 && present_dark.is_empty()) {
                if let Some(m) = fresh.pop() {
                    changes.push(RouteChange::Add(m, pick_action(&mut r, &table)));
                    touches.push((u32::MAX, 0));
                    present_dark.push(m);
                    counts[0] += 1;
                    continue;
                }
            } else if k >= 8 {
                let m = present_dark.swap_remove(r.below(present_dark.len()));
                changes.push(RouteChange::Delete(m));
                touches.push((u32::MAX, 0));
                counts[1] += 1;
                continue;
            }
            if names.is_empty() {
                break;
            }
            let i = r.below(names.len());
            let mut a = pick_action(&mut r, &table);
            if a == current[i] {
                let j = table.iter().position(|x| *x == a).unwrap_or(0);
                a = table[(j + 1 + r.below(table.len() - 1)) % table.len()].clone();
            }
            let m = mask_of(&a);
            allowed[i] |= m;
            touches.push((i as u32, m));
            changes.push(RouteChange::Set(names[i], a.clone()));
            current[i] = a;
            counts[2] += 1;
        }
        let final_mask = current.iter().map(mask_of).collect();
        Plan {
            names,
            initial,
            changes,
            touches,
            allowed,
            final_mask,
            counts,
        }
    }

    /// Apply changes `range` to `state` (per traffic name, its port mask):
    /// the state of the plan after those changes, given the state before.
    pub fn apply_touches(&self, state: &mut [u8], range: std::ops::Range<usize>) {
        for &(i, m) in &self.touches[range] {
            if i != u32::MAX {
                state[i as usize] = m;
            }
        }
    }

    /// The port mask of every traffic name at the start.
    pub fn initial_masks(&self) -> Vec<u8> {
        self.initial.iter().map(mask_of).collect()
    }

    /// The first `n` changes as a changes file (`+ NAME ACTION`, `- NAME`,
    /// `= NAME ACTION` per line).
    pub fn changes_text(&self, n: usize) -> String {
        let mut s = String::with_capacity(n * 26 + 64);
        s.push_str("# nexthop lab live changes: + NAME ACTION, - NAME, = NAME ACTION\n");
        for c in &self.changes[..n.min(self.changes.len())] {
            let _ = match c {
                RouteChange::Add(m, a) => writeln!(s, "+ {} {a}", m.fmt_name()),
                RouteChange::Delete(m) => writeln!(s, "- {}", m.fmt_name()),
                RouteChange::Set(m, a) => writeln!(s, "= {} {a}", m.fmt_name()),
            };
        }
        s
    }

    /// The routes file text of the initial FIB.
    pub fn routes_text(&self) -> String {
        let mut s = String::with_capacity(self.names.len() * 24);
        s.push_str("# nexthop lab routes: MAC ACTION\n");
        for (m, a) in self.names.iter().zip(&self.initial) {
            let _ = writeln!(s, "{} {a}", m.fmt_name());
        }
        s
    }
}

/// Index walk over `0..n` that visits every index once per `n` steps in a
/// scattered order (a stride coprime to `n`).
pub(crate) struct Walk {
    n: u64,
    stride: u64,
    at: u64,
}

impl Walk {
    pub fn new(n: usize, seed: u64) -> Walk {
        let n = n.max(1) as u64;
        let mut stride = (n / 2 + 1 + seed % n.max(2)) % n;
        while gcd(stride.max(1), n) != 1 {
            stride = (stride + 1) % n;
        }
        Walk {
            n,
            stride: stride.max(1),
            at: seed % n,
        }
    }

    pub fn next_index(&mut self) -> u32 {
        let i = self.at;
        self.at = (self.at + self.stride) % self.n;
        i as u32
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Build the lab FIB directory `dir` from `plan` exactly as
/// `nexthop fib build` would; returns the build report line.
fn build_fib(plan: &Plan, dir: &Path) -> Result<(String, u64)> {
    let routes = dir.join("routes.txt");
    fs::write(&routes, plan.routes_text())
        .with_context(|| format!("{}: cannot write", routes.display()))?;
    let fib_dir = dir.join("fib");
    let opts = BuildOpts {
        key_type: KeyType::Mac,
        value_bits: 8,
        check_bits: 0,
        sizing: Sizing::PowerOfTwo,
        // Room for the adds, so no change needs a rebuild.
        capacity: Some(plan.names.len() + plan.counts[0] + 1024),
        seed: None,
        stash_capacity: 16,
    };
    let b = cmd_fib::build_dir(&opts, &routes, &fib_dir)?;
    let line = format!(
        "{} names -> {} (generation {}; parse {:.2} s, Othello build {:.2} s, write {:.2} s)",
        plan.names.len(),
        fib_dir.display(),
        b.generation,
        b.parse_secs,
        b.build_secs,
        b.write_secs
    );
    Ok((line, b.generation))
}

/// Load the lab FIB's control state (for the controller).
fn load_fib(dir: &Path) -> Result<ConciseFib<[u8; 6]>> {
    let cur = fibdir::open(&dir.join("fib"))?;
    crate::cmd_controller::load::<[u8; 6]>(&cur)
}

/// Bytes of the FIB's data-plane arrays and bits per name.
fn fib_bytes(fib: &ConciseFib<[u8; 6]>) -> (u64, f64) {
    let q = fib.othello().export(0);
    let bytes = q.memory_bytes() as u64;
    (bytes, bytes as f64 * 8.0 / fib.len().max(1) as f64)
}

/// A fresh random key file (64 hex digits, mode 0600).
pub(crate) fn write_key(path: &Path) -> Result<AuthKey> {
    use rand::RngCore;
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut secret);
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let mut f =
        fs::File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    writeln!(f, "{hex}")?;
    AuthKey::new(hex.as_bytes()).map_err(|e| anyhow!("{e}"))
}

/// What both lab variants start from: the plan, the FIB built from it
/// (as `nexthop fib build` would, under `o.out/fib`), its size, and a
/// fresh controller key (`o.out/controller.key`).
pub(crate) struct Prepared {
    pub plan: Plan,
    pub fib: ConciseFib<[u8; 6]>,
    pub fib_bytes: u64,
    pub bits: f64,
    pub key: AuthKey,
    pub key_path: PathBuf,
    /// The generation of `o.out/fib` the controller starts from.
    pub generation: u64,
}

/// Make the plan, build and load the FIB, write the key; prints a step
/// line for the plan and the build.
pub(crate) fn prepare(o: &LabOpts, n_changes: usize, t: Instant) -> Result<Prepared> {
    let plan = Plan::new(o.names, n_changes, o.seed);
    step(
        "plan",
        t,
        format_args!(
            "{} names, {} changes ({} adds, {} deletes, {} action changes)",
            plan.names.len(),
            plan.changes.len(),
            plan.counts[0],
            plan.counts[1],
            plan.counts[2]
        ),
    );
    let (built, generation) = build_fib(&plan, &o.out)?;
    step("build", t, built);
    let fib = load_fib(&o.out)?;
    let (fib_bytes, bits) = fib_bytes(&fib);
    let key_path = o.out.join("controller.key");
    let key = write_key(&key_path)?;
    Ok(Prepared {
        plan,
        fib,
        fib_bytes,
        bits,
        key,
        key_path,
        generation,
    })
}

/// Write the first `applied` changes of `plan` to `out/changes.txt` (the
/// format of `nexthop fib update`) and apply them to `out/fib` as that
/// command would, so the directory ends holding the controller's final
/// FIB (and `nexthop fib lookup --fib out/fib` shows the final actions).
/// Returns the generation it ends at (unchanged when nothing was applied).
pub(crate) fn save_final_fib(out: &Path, plan: &Plan, applied: usize) -> Result<u64> {
    let fib_dir = out.join("fib");
    if applied == 0 {
        return Ok(fibdir::current_generation(&fib_dir)?);
    }
    let path = out.join("changes.txt");
    fs::write(&path, plan.changes_text(applied))
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(cmd_fib::update_dir(&fib_dir, &path)?.generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_visit_every_index_once_per_round() {
        for n in [1usize, 2, 3, 10, 97, 1000, 4096] {
            for seed in 0..4 {
                let mut w = Walk::new(n, seed);
                let mut seen = vec![false; n];
                for _ in 0..n {
                    let i = w.next_index() as usize;
                    assert!(!seen[i], "n {n} seed {seed}: {i} twice");
                    seen[i] = true;
                }
            }
        }
    }

    /// The plan's bookkeeping agrees with replaying its changes on a map.
    #[test]
    fn plans_agree_with_a_replay_of_their_changes() {
        let p = Plan::new(2_000, 5_000, 9);
        assert_eq!(p.changes.len(), 5_000);
        assert_eq!(p.counts.iter().sum::<usize>(), 5_000);
        let mut fib: std::collections::HashMap<[u8; 6], Action> = p
            .names
            .iter()
            .copied()
            .zip(p.initial.iter().cloned())
            .collect();
        let mut allowed: Vec<u8> = p.initial.iter().map(mask_of).collect();
        let index: std::collections::HashMap<[u8; 6], usize> =
            p.names.iter().enumerate().map(|(i, m)| (*m, i)).collect();
        for (c, &(t, m)) in p.changes.iter().zip(&p.touches) {
            match c {
                RouteChange::Add(k, a) => {
                    assert!(!index.contains_key(k), "an add of a traffic name");
                    assert!(fib.insert(*k, a.clone()).is_none(), "add of a present name");
                    assert_eq!(t, u32::MAX);
                }
                RouteChange::Delete(k) => {
                    assert!(!index.contains_key(k), "a delete of a traffic name");
                    assert!(fib.remove(k).is_some(), "delete of an absent name");
                    assert_eq!(t, u32::MAX);
                }
                RouteChange::Set(k, a) => {
                    let i = index[k];
                    assert_eq!(t as usize, i);
                    assert_eq!(m, mask_of(a));
                    assert_ne!(
                        fib.insert(*k, a.clone()).as_ref(),
                        Some(a),
                        "a no-op change"
                    );
                    allowed[i] |= m;
                }
            }
        }
        let mut state = p.initial_masks();
        p.apply_touches(&mut state, 0..p.changes.len() / 2);
        p.apply_touches(&mut state, p.changes.len() / 2..p.changes.len());
        assert_eq!(state, p.final_mask);
        for (i, n) in p.names.iter().enumerate() {
            assert_eq!(p.final_mask[i], mask_of(&fib[n]));
            assert_eq!(p.allowed[i], allowed[i]);
            assert_eq!(p.allowed[i] & p.final_mask[i], p.final_mask[i]);
        }
    }

    /// `OUT/fib` ends holding the plan's final state, not the one the
    /// controller started from.
    #[test]
    fn the_saved_final_fib_holds_every_applied_change() {
        let t = tempfile::tempdir().unwrap();
        let p = Plan::new(300, 400, 5);
        let (_, first) = build_fib(&p, t.path()).unwrap();
        let last = save_final_fib(t.path(), &p, p.changes.len()).unwrap();
        assert!(last > first, "{first} -> {last}");
        assert_eq!(
            fibdir::current_generation(&t.path().join("fib")).unwrap(),
            last
        );
        let fib = load_fib(t.path()).unwrap();
        assert_eq!(fib.len(), p.names.len() + p.counts[0] - p.counts[1]);
        for (i, n) in p.names.iter().enumerate() {
            let a = fib.get(n).expect("traffic names stay in the FIB");
            assert_eq!(mask_of(a), p.final_mask[i], "name #{i}");
        }
        let text = fs::read_to_string(t.path().join("changes.txt")).unwrap();
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 400);
        // Nothing applied: the FIB stays at its generation.
        let t2 = tempfile::tempdir().unwrap();
        let (_, g) = build_fib(&p, t2.path()).unwrap();
        assert_eq!(save_final_fib(t2.path(), &p, 0).unwrap(), g);
    }
}
