//! `nexthop controller`: serve a FIB directory to forwarders over the
//! authenticated update protocol (`docs/control.md`), apply changes files
//! and push their deltas.
//!
//! Glue only: the protocol and the controller are `nexthop_control`; this
//! module loads the FIB directory (verified against its manifest), reads
//! the key file and the changes files, and logs what it serves and applies
//! as `tracing` events on stderr (`--log-level`, `--log-format`).
//!
//! With `--redis URL` the FIB goes through Redis instead
//! (`nexthop_control::RedisController`): the controller waits for the
//! FIB's lease (a standby while another holds it), rebuilds the FIB from
//! Redis (the directory is the state only when Redis holds none), publishes
//! a snapshot, applies the changes files, renews the lease, and takes the
//! lease again (rebuilding) when it loses it or Redis. With `--network
//! ROUTES` instead of `--fib DIR` it publishes a network-wide FIB
//! (`nexthop_othello::fib_net`): one shared graph, a value column per
//! switch, a delta stream per column (`nexthop run --redis URL --fib
//! NAME/COLUMN` follows one).
//!
//! `nexthop controller push` and `nexthop controller stats` are admin
//! clients of a running controller (`nexthop_control::AdminClient`): they
//! push a changes file to it, or print its counters.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use nexthop_control::{
    AdminClient, AuthKey, BusFib, Controller, ControllerConfig, RedisController,
    RedisControllerConfig,
};
use nexthop_othello::fib::{parse_changes, ConciseFib, KeyType, NameKey};
use nexthop_othello::fib_net::{
    parse_network_changes, parse_network_routes, route_columns, NetworkFib,
};

use crate::cmd_fib::read_text;
use nexthop_othello::fibdir::{self, ACTIONS, CONTROL};

/// `nexthop controller` arguments: serve a FIB directory, or (with a
/// subcommand) talk to a running controller.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ControllerArgs {
    /// Talk to a running controller instead of starting one.
    #[command(subcommand)]
    pub admin: Option<AdminCmd>,
    /// FIB directory to serve (made by `nexthop fib build`; not modified).
    #[arg(long, value_name = "DIR", required_unless_present = "network")]
    pub fib: Option<PathBuf>,
    /// With --redis, instead of --fib: a network-wide FIB from this routes
    /// file (`NAME ACTION...`, one action per switch: the number of
    /// actions is the number of columns). Changes files then give every
    /// column's action (`+ NAME ACTION...`, `- NAME`, `= NAME ACTION...`).
    #[arg(long, value_name = "ROUTES", conflicts_with = "fib")]
    pub network: Option<PathBuf>,
    /// With --network: the names' key type (mac, ipv4, ipv6, u64, str).
    #[arg(long, value_name = "TYPE", default_value = "mac")]
    pub key_type: KeyType,
    /// Shared secret file (16 to 4096 bytes, trailing whitespace ignored;
    /// owner-only: `chmod 600`).
    #[arg(long, value_name = "FILE", required = true)]
    pub key_file: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6653")]
    pub listen: SocketAddr,
    /// Changes file to apply after start (+ NAME ACTION, - NAME, = NAME
    /// ACTION); repeatable, applied in order, each all or nothing.
    #[arg(long, value_name = "FILE")]
    pub changes: Vec<PathBuf>,
    /// Wait this many seconds before applying the changes files (lets
    /// forwarders connect first).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub changes_delay: f64,
    /// Stop after this many seconds (default: serve until killed).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Route changes merged into one delta (1..=65536): the forwarder
    /// applies each chunk of this many changes as one update, its readers
    /// see the FIB before or after the whole chunk. 1 sends one delta per
    /// change.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub changes_per_delta: u32,
    /// Connections open at once, in their handshake or served; more are
    /// closed at once (counted and logged).
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Connections in their handshake at once (each has
    /// --handshake-timeout to finish); more are closed at once.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_handshakes: u32,
    /// Deadline in seconds for a connection's whole handshake.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub handshake_timeout: f64,
    /// Publish the FIB through the Redis at this URL (`redis://HOST:PORT/`,
    /// `unix:///PATH`) instead of serving it on --listen: snapshots and a
    /// delta stream under --redis-fib, authenticated with --key-file
    /// (`docs/control.md`, "Redis bus"). Another controller on the same
    /// Redis and name is a standby: it takes over when this one stops
    /// renewing its lease.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// With --redis: the FIB's name in Redis (what `nexthop run --redis URL
    /// --fib NAME` follows).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub redis_fib: String,
    /// With --redis: lease time in seconds (a standby takes over at most
    /// this long after the active one stopped).
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub lease: f64,
    /// With --redis: publish a fresh snapshot, and trim the stream, after
    /// this many changes (0: only on start).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub snapshot_every: u64,
}

/// `nexthop controller push|stats`.
#[derive(Debug, Subcommand)]
pub enum AdminCmd {
    /// Push a changes file (+ NAME ACTION, - NAME, = NAME ACTION) to a
    /// running controller: applied all or nothing, as --changes files are.
    Push(PushArgs),
    /// Print a running controller's counters.
    Stats(AdminStatsArgs),
}

/// How to reach a running controller.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The controller's address (its --listen).
    #[arg(long, value_name = "ADDR")]
    pub connect: String,
    /// The controller's shared secret file.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// Seconds to wait for the connection and for each answer.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub timeout: f64,
}

/// `nexthop controller push` arguments.
#[derive(Debug, Args)]
pub struct PushArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// Changes file (`-` or absent: standard input).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// `nexthop controller stats` arguments.
#[derive(Debug, Args)]
pub struct AdminStatsArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// One JSON object instead of `NAME VALUE` lines.
    #[arg(long)]
    pub json: bool,
}

fn secs(what: &str, s: f64) -> Result<Duration> {
    if s.is_finite() && (0.0..1e9).contains(&s) {
        Ok(Duration::from_secs_f64(s))
    } else {
        bail!("{what} {s}: expected a non-negative number of seconds")
    }
}

/// `nexthop controller`.
pub fn run(a: &ControllerArgs) -> Result<()> {
    match &a.admin {
        Some(AdminCmd::Push(p)) => return push(p),
        Some(AdminCmd::Stats(s)) => return stats(s),
        None => {}
    }
    if let Some(routes) = &a.network {
        let Some(key_file) = &a.key_file else {
            bail!("nexthop controller needs --key-file FILE");
        };
        let key = AuthKey::from_file(key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
        return match a.key_type {
            KeyType::Mac => serve_network::<[u8; 6]>(a, routes, &key),
            KeyType::Ipv4 => serve_network::<std::net::Ipv4Addr>(a, routes, &key),
            KeyType::Ipv6 => serve_network::<std::net::Ipv6Addr>(a, routes, &key),
            KeyType::U64 => serve_network::<u64>(a, routes, &key),
            KeyType::Str => serve_network::<Vec<u8>>(a, routes, &key),
        };
    }
    let (Some(fib), Some(key_file)) = (&a.fib, &a.key_file) else {
        bail!("nexthop controller needs --fib DIR and --key-file FILE");
    };
    let key = AuthKey::from_file(key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
    let cur = fibdir::open(fib)?;
    match cur.key_type {
        KeyType::Mac => serve::<[u8; 6]>(a, fib, &cur, key),
        KeyType::Ipv4 => serve::<std::net::Ipv4Addr>(a, fib, &cur, key),
        KeyType::Ipv6 => serve::<std::net::Ipv6Addr>(a, fib, &cur, key),
        KeyType::U64 => serve::<u64>(a, fib, &cur, key),
        KeyType::Str => serve::<Vec<u8>>(a, fib, &cur, key),
    }
}

pub(crate) fn load<K: NameKey>(cur: &fibdir::Current) -> Result<ConciseFib<K>> {
    let control = cur.read_verified(CONTROL)?;
    let actions = cur.read_actions_text()?;
    ConciseFib::<K>::load_control(&control, &actions).map_err(|e| {
        anyhow!(
            "{} / {}: {e}",
            cur.path(CONTROL).display(),
            cur.path(ACTIONS).display()
        )
    })
}

fn serve<K: NameKey + Send + 'static>(
    a: &ControllerArgs,
    fib_dir: &Path,
    cur: &fibdir::Current,
    key: AuthKey,
) -> Result<()> {
    let duration = a.duration.map(|d| secs("--duration", d)).transpose()?;
    let delay = secs("--changes-delay", a.changes_delay)?;
    // Parse every changes file up front: a typo fails before serving.
    let mut files = Vec::new();
    for p in &a.changes {
        let text = read_text(p)?;
        let ch = parse_changes::<K>(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?;
        files.push((p.as_path(), ch));
    }
    // `cur` chose the key type; the generation is read again (once) if a
    // concurrent `fib update` replaced it in between.
    let (fib, generation) = fibdir::open_retrying(fib_dir, |c| {
        Ok::<_, anyhow::Error>((load::<K>(&c)?, c.manifest.generation))
    })?;
    if let Some(url) = &a.redis {
        let files: Vec<_> = files
            .iter()
            .map(|(p, ch)| (*p, ch.iter().map(|(l, c)| (*l, c)).collect()))
            .collect();
        return serve_redis(a, url, fib, &files, &key, duration, delay);
    }
    tracing::info!(
        fib = %fib_dir.display(),
        names = fib.len(),
        key_type = %cur.key_type,
        generation,
        listen = %a.listen,
        "controller serving"
    );
    let cfg = ControllerConfig {
        listen: a.listen,
        changes_per_delta: a.changes_per_delta as usize,
        max_connections: a.max_connections as usize,
        max_handshakes: a.max_handshakes as usize,
        handshake_timeout: secs("--handshake-timeout", a.handshake_timeout)?,
        ..ControllerConfig::default()
    };
    let c = Controller::start(fib, key, cfg)?;
    eprintln!("controller: listening on {}", c.local_addr());
    let start = Instant::now();
    if !files.is_empty() {
        std::thread::sleep(delay);
    }
    for (path, changes) in &files {
        apply_file(&c, path, changes)?;
    }
    match duration {
        Some(d) => std::thread::sleep(d.saturating_sub(start.elapsed())),
        None => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
    let s = c.stats();
    c.shutdown();
    tracing::info!(
        connections = s.accepted,
        snapshots_sent = s.snapshots_sent,
        deltas_sent = s.deltas_sent,
        changes_sent = s.changes_sent,
        acks = s.acks,
        rejects = s.rejects,
        "controller stopped"
    );
    Ok(())
}

/// A parsed changes file: its path and its numbered changes.
type ChangesFile<'a, C> = (&'a Path, Vec<(usize, &'a C)>);

/// `nexthop controller --redis URL --network ROUTES`: build the network
/// FIB, parse the changes files (all before publishing anything), then
/// publish as [`serve_redis`] does.
fn serve_network<K: NameKey>(a: &ControllerArgs, routes: &Path, key: &AuthKey) -> Result<()> {
    let Some(url) = &a.redis else {
        bail!("--network is published through Redis: give --redis URL");
    };
    let duration = a.duration.map(|d| secs("--duration", d)).transpose()?;
    let delay = secs("--changes-delay", a.changes_delay)?;
    let text = read_text(routes)?;
    let Some(columns) = route_columns(&text) else {
        bail!("{}: no routes", routes.display());
    };
    if columns == 0 || columns > nexthop_control::redis_bus::MAX_COLUMNS {
        bail!(
            "{}: {columns} actions per route: expected 1 to {}",
            routes.display(),
            nexthop_control::redis_bus::MAX_COLUMNS
        );
    }
    let parsed = parse_network_routes::<K>(&text, columns)
        .map_err(|e| anyhow!("{}: {e}", routes.display()))?;
    let cfg = nexthop_othello::Config {
        columns,
        ..nexthop_othello::Config::default()
    };
    let fib = NetworkFib::build(cfg, &parsed).map_err(|e| anyhow!("{}: {e}", routes.display()))?;
    let mut parsed_files = Vec::new();
    for p in &a.changes {
        let text = read_text(p)?;
        let ch = parse_network_changes::<K>(&text, columns)
            .map_err(|e| anyhow!("{}: {e}", p.display()))?;
        parsed_files.push((p.as_path(), ch));
    }
    let files: Vec<_> = parsed_files
        .iter()
        .map(|(p, ch)| (*p, ch.iter().map(|(l, c)| (*l, c)).collect()))
        .collect();
    eprintln!(
        "controller: network FIB of {} names, {columns} columns (switches), from {}",
        fib.len(),
        routes.display()
    );
    serve_redis(a, url, fib, &files, key, duration, delay)
}

/// `nexthop controller --redis`: hold the lease and publish (see the
/// module docs) until --duration or a signal ends it; then the lease is
/// released, so a standby takes over at once.
fn serve_redis<K: NameKey, F: BusFib<K>>(
    a: &ControllerArgs,
    url: &str,
    fib: F,
    files: &[ChangesFile<'_, F::Change>],
    key: &AuthKey,
    duration: Option<Duration>,
    delay: Duration,
) -> Result<()> {
    let lease = secs("--lease", a.lease)?.max(Duration::from_millis(100));
    let mut cfg = RedisControllerConfig::new(url, a.redis_fib.as_str());
    cfg.lease = lease;
    cfg.poll = (lease / 10).max(Duration::from_millis(20));
    cfg.snapshot_every = a.snapshot_every;
    cfg.changes_per_delta = a.changes_per_delta as usize;
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let stop_at = |d: Option<Duration>| d.is_some_and(|d| start.elapsed() >= d);
    let mut state = Some(Box::new((fib, 0u64)));
    let mut pending = files.iter();
    let mut applied_files = false;
    loop {
        eprintln!(
            "controller: waiting for the lease of FIB {} on {url}",
            a.redis_fib
        );
        let Some(st) = state.take() else {
            return Ok(());
        };
        let (fib, version) = *st;
        // Waiting for the lease ends with --duration.
        let done = AtomicBool::new(false);
        let c = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop_at(duration) && !done.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                stop.store(true, Ordering::SeqCst);
            });
            let r = RedisController::<K, F>::acquire(key, cfg.clone(), fib, version, &stop);
            done.store(true, Ordering::SeqCst);
            r
        });
        if stop_at(duration) {
            if let Ok(c) = c {
                c.release();
            }
            return Ok(());
        }
        stop.store(false, Ordering::SeqCst);
        let mut c = match c {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("redis: {e}; retrying");
                std::thread::sleep(cfg.poll);
                state = e.state;
                continue;
            }
        };
        eprintln!(
            "controller: active for FIB {} at version {} ({} names)",
            a.redis_fib,
            c.version(),
            c.fib().len()
        );
        if !applied_files {
            applied_files = true;
            if !files.is_empty() {
                std::thread::sleep(delay);
            }
        }
        let mut lost = None;
        for (path, changes) in pending.by_ref() {
            match c.apply_lined(changes) {
                Ok(r) => eprintln!(
                    "controller: {}: {} changes published, version {}",
                    path.display(),
                    r.changes,
                    r.version
                ),
                Err(e @ nexthop_control::BusError::Fib(_)) => {
                    bail!("{}: {e}", path.display())
                }
                Err(e) => {
                    lost = Some(format!("{}: {e}", path.display()));
                    break;
                }
            }
        }
        while lost.is_none() && !stop_at(duration) {
            std::thread::sleep(lease / 4);
            if let Err(e) = c.renew() {
                lost = Some(e.to_string());
            }
        }
        match lost {
            None => {
                tracing::info!(version = c.version(), "controller stopped; lease released");
                c.release();
                return Ok(());
            }
            Some(why) => {
                tracing::warn!("lost the lease or Redis ({why}); taking the lease again");
                state = Some(Box::new(c.into_state()));
            }
        }
    }
}

fn connect(c: &ConnectArgs) -> Result<AdminClient> {
    let key = AuthKey::from_file(&c.key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
    let t = secs("--timeout", c.timeout)?;
    AdminClient::connect(c.connect.as_str(), &key, t).map_err(|e| anyhow!("{e}"))
}

/// `nexthop controller push`: one line on stdout with what was applied.
fn push(a: &PushArgs) -> Result<()> {
    let (what, text) = match &a.file {
        Some(p) if p.as_os_str() != "-" => (p.display().to_string(), read_text(p)?),
        _ => {
            let mut t = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
                .context("reading the changes from standard input")?;
            ("<stdin>".to_string(), t)
        }
    };
    let r = connect(&a.conn)?
        .push(&text)
        .map_err(|e| anyhow!("{what}: {e}"))?;
    println!(
        "pushed {} changes: version {}, generation {}, {} names, {} deltas to {} forwarders",
        r.changes, r.version, r.generation, r.names, r.deltas, r.followers
    );
    Ok(())
}

/// `nexthop controller stats`: `NAME VALUE` lines, or a JSON object.
fn stats(a: &AdminStatsArgs) -> Result<()> {
    let v = connect(&a.conn)?.stats().map_err(|e| anyhow!("{e}"))?;
    if a.json {
        let m: serde_json::Map<String, serde_json::Value> =
            v.into_iter().map(|(k, x)| (k, x.into())).collect();
        println!("{}", serde_json::Value::Object(m));
    } else {
        for (k, x) in v {
            println!("{k} {x}");
        }
    }
    Ok(())
}

fn apply_file<K: NameKey + Send + 'static>(
    c: &Controller<K>,
    path: &Path,
    changes: &[(usize, nexthop_othello::fib::RouteChange<K>)],
) -> Result<()> {
    let t = Instant::now();
    let r = c
        .apply_numbered(changes)
        .with_context(|| format!("{}", path.display()))?;
    tracing::info!(
        file = %path.display(),
        changes = r.changes,
        deltas = r.deltas,
        slot_writes = r.slot_writes,
        rebuilds = r.rebuilds,
        new_actions = r.new_actions,
        version = r.version,
        followers = r.followers,
        seconds = t.elapsed().as_secs_f64(),
        "controller applied a changes file"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_control::{FibFollower, FollowerConfig};
    use nexthop_othello::fib::Action;

    /// Key files must be owner-only (`chmod 600`).
    fn owner_only(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    fn free_port() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    }

    #[test]
    fn controller_serves_a_fib_directory_and_pushes_changes_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let routes = dir.path().join("routes.txt");
        std::fs::write(
            &routes,
            "02:00:00:00:00:01 1\n02:00:00:00:00:02 2\n02:00:00:00:00:03 drop\n",
        )
        .expect("write");
        let fib = dir.path().join("fib");
        let opts = crate::cmd_fib::BuildOpts {
            key_type: KeyType::Mac,
            value_bits: 8,
            check_bits: 0,
            sizing: nexthop_othello::Sizing::PowerOfTwo,
            capacity: None,
            seed: None,
            stash_capacity: 16,
        };
        crate::cmd_fib::build_dir(&opts, &routes, &fib).expect("build");
        let changes = dir.path().join("changes.txt");
        std::fs::write(
            &changes,
            "+ 02:00:00:00:00:04 3+4\n- 02:00:00:00:00:01\n= 02:00:00:00:00:02 controller\n",
        )
        .expect("write");
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "cli-test-secret-0123456789\n").expect("write");
        owner_only(&key_file);
        let listen = free_port();
        let args = ControllerArgs {
            admin: None,
            fib: Some(fib),
            key_file: Some(key_file.clone()),
            listen,
            changes: vec![changes],
            changes_delay: 1.0,
            duration: Some(3.0),
            changes_per_delta: 256,
            max_connections: 1024,
            max_handshakes: 64,
            handshake_timeout: 10.0,
            redis: None,
            redis_fib: "default".into(),
            network: None,
            key_type: KeyType::Mac,
            lease: 3.0,
            snapshot_every: 100_000,
        };
        let server = std::thread::spawn(move || run(&args));
        let key = AuthKey::from_file(&key_file).expect("key");
        let mut cfg = FollowerConfig::new(listen, "cli-test");
        cfg.log = false;
        cfg.backoff_min = Duration::from_millis(10);
        let f = FibFollower::start(key, cfg).expect("follower");
        // The file's three changes are one merged delta.
        assert!(f.wait_for(Duration::from_secs(20), |s| s.deltas == 1));
        let t = f.table().expect("table");
        assert_eq!(
            t.lookup(&[2u8, 0, 0, 0, 0, 4]),
            Some(&Action::PortSet(vec![3, 4]))
        );
        assert_eq!(t.lookup(&[2u8, 0, 0, 0, 0, 2]), Some(&Action::Controller));
        assert_eq!(t.lookup(&[2u8, 0, 0, 0, 0, 3]), Some(&Action::Drop));
        f.stop();
        server.join().expect("thread").expect("controller run");
    }

    #[derive(Debug, clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        a: ControllerArgs,
    }

    #[test]
    fn serving_flags_and_admin_subcommands_both_parse() {
        use clap::Parser;
        let w = Wrap::try_parse_from(["c", "--fib", "d", "--key-file", "k"]).expect("serve");
        assert!(w.a.admin.is_none() && w.a.fib.is_some());
        let w = Wrap::try_parse_from(["c", "push", "--connect", "h:1", "--key-file", "k", "-"])
            .expect("push");
        assert!(
            matches!(w.a.admin, Some(AdminCmd::Push(ref p)) if p.file.as_deref() == Some(Path::new("-")))
        );
        let w = Wrap::try_parse_from([
            "c",
            "stats",
            "--connect",
            "h:1",
            "--key-file",
            "k",
            "--json",
        ])
        .expect("stats");
        assert!(matches!(w.a.admin, Some(AdminCmd::Stats(ref s)) if s.json));
        // Serving without --fib, or mixing both, is refused.
        assert!(Wrap::try_parse_from(["c", "--key-file", "k"]).is_err());
        assert!(Wrap::try_parse_from([
            "c",
            "--fib",
            "d",
            "stats",
            "--connect",
            "h:1",
            "--key-file",
            "k"
        ])
        .is_err());
    }

    #[test]
    fn push_and_stats_reach_a_running_controller() {
        let dir = tempfile::tempdir().expect("tempdir");
        let routes = dir.path().join("routes.txt");
        std::fs::write(&routes, "02:00:00:00:00:01 1\n02:00:00:00:00:02 2\n").expect("write");
        let fib = dir.path().join("fib");
        let opts = crate::cmd_fib::BuildOpts {
            key_type: KeyType::Mac,
            value_bits: 8,
            check_bits: 0,
            sizing: nexthop_othello::Sizing::PowerOfTwo,
            capacity: None,
            seed: None,
            stash_capacity: 16,
        };
        crate::cmd_fib::build_dir(&opts, &routes, &fib).expect("build");
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "cli-admin-secret-0123456789\n").expect("write");
        owner_only(&key_file);
        let key = AuthKey::from_file(&key_file).expect("key");
        let cur = fibdir::open(&fib).expect("open");
        let cfg = ControllerConfig {
            log: false,
            ..ControllerConfig::default()
        };
        let c = Controller::start(load::<[u8; 6]>(&cur).expect("load"), key, cfg).expect("start");
        let conn = || ConnectArgs {
            connect: c.local_addr().to_string(),
            key_file: key_file.clone(),
            timeout: 20.0,
        };
        let good = dir.path().join("good.txt");
        std::fs::write(&good, "+ 02:00:00:00:00:03 3+4\n- 02:00:00:00:00:01\n").expect("write");
        push(&PushArgs {
            conn: conn(),
            file: Some(good),
        })
        .expect("push");
        assert_eq!(c.version(), 2);
        c.with_fib(|f| {
            assert_eq!(
                f.get(&[2, 0, 0, 0, 0, 3]),
                Some(&Action::PortSet(vec![3, 4]))
            );
            assert_eq!(f.get(&[2, 0, 0, 0, 0, 1]), None);
        });
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "= 02:00:00:00:00:09 1\n").expect("write");
        let e = push(&PushArgs {
            conn: conn(),
            file: Some(bad.clone()),
        })
        .expect_err("refused");
        let e = e.to_string();
        assert!(
            e.starts_with(&bad.display().to_string()) && e.contains("line 1"),
            "{e}"
        );
        assert_eq!(c.version(), 2);
        stats(&AdminStatsArgs {
            conn: conn(),
            json: true,
        })
        .expect("stats");
        let s = c.stats();
        assert_eq!((s.pushes, s.pushes_refused, s.admin_sessions), (1, 1, 3));
        let mut wrong = conn();
        wrong.timeout = -1.0;
        assert!(stats(&AdminStatsArgs {
            conn: wrong,
            json: false
        })
        .is_err());
    }

    #[test]
    fn key_file_readable_by_others_is_refused_with_chmod_advice() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "cli-test-secret-0123456789\n").expect("write");
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let args = ControllerArgs {
            admin: None,
            fib: Some(dir.path().join("nofib")),
            key_file: Some(key_file),
            listen: free_port(),
            changes: vec![],
            changes_delay: 0.0,
            duration: Some(0.0),
            changes_per_delta: 1,
            max_connections: 1024,
            max_handshakes: 64,
            handshake_timeout: 10.0,
            redis: None,
            redis_fib: "default".into(),
            network: None,
            key_type: KeyType::Mac,
            lease: 3.0,
            snapshot_every: 100_000,
        };
        let e = run(&args).expect_err("open key file");
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }

    #[test]
    fn short_key_file_is_refused_before_serving() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "short\n").expect("write");
        owner_only(&key_file);
        let args = ControllerArgs {
            admin: None,
            fib: Some(dir.path().join("nofib")),
            key_file: Some(key_file),
            listen: free_port(),
            changes: vec![],
            changes_delay: 0.0,
            duration: Some(0.0),
            changes_per_delta: 1,
            max_connections: 1024,
            max_handshakes: 64,
            handshake_timeout: 10.0,
            redis: None,
            redis_fib: "default".into(),
            network: None,
            key_type: KeyType::Mac,
            lease: 3.0,
            snapshot_every: 100_000,
        };
        let e = run(&args).expect_err("short key");
        assert!(e.to_string().contains("too short"), "{e}");
    }
}
