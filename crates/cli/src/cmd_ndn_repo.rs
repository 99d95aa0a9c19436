//! `nexthop ndn repo`: the Repo's Redis store (`nexthop-repo`), served
//! through the forwarder, and bulk operations straight on Redis.
//!
//! Contract (outside tests rely on it); `--redis URL` is a Unix socket path,
//! `unix:///PATH` or `redis://[:PASSWORD@]HOST:PORT[/DB]`:
//! * `--name REPO_NAME [--forwarder TRANSPORT] [--register PREFIX ...]`
//!   (TRANSPORT `unix:///PATH`, the default `unix:///run/nfd/nfd.sock`, or
//!   `udp://HOST:PORT`): an application face of the forwarder that
//!   registers REPO_NAME and each `--register` prefix with `rib/register`,
//!   prints `nexthop ndn repo: serving PREFIX ...` on stderr, and answers
//!   Interests from Redis (exact names, CanBePrefix, MustBeFresh: the rules
//!   of `nexthop_repo::Store::find`) until the forwarder goes away. Nothing
//!   is cached in memory: a restarted Repo serves what Redis holds; an
//!   Interest met while Redis is down goes unanswered and the Repo
//!   reconnects by itself. It also speaks ndn-python-repo 0.3's command
//!   protocol (`nexthop_repo::command`): `PutfileClient.insert_file`,
//!   `DeleteClient.delete_file` and their status checks work against it,
//!   for object names under REPO_NAME or a `--register` prefix (outside the
//!   command names `REPO_NAME/insert...`, `/delete...`); each insert is
//!   fetched from the client (`--window N` Interests in flight, at most
//!   `--max-inserts N` inserts at once, objects up to `--max-object-bytes`)
//!   and stored as one atomic object. Stderr gets one line per insert
//!   (`nexthop ndn repo: inserted NAME segments=N` or `... status CODE`).
//! * `put --prefix NAME FILE [--segment-size N] [--freshness-ms MS]`: cuts
//!   FILE into Data packets `NAME/seg=i` (FinalBlockId set, DigestSha256
//!   signed) and stores them as one atomic object; prints
//!   `stored NAME segments=N bytes=B`.
//! * `get NAME [-o FILE]`: the object's content (stdout without `-o`).
//! * `delete NAME`: deletes every packet under NAME; prints `deleted N`.
//! * `list PREFIX`: one stored name per line, in TLV byte order.
//!
//! A failure exits non-zero with `status CODE: reason` (400 bad request,
//! 404 missing/incomplete, 503 Redis down, 507 Redis full, 500 other).

use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use nexthop_ndnd::client::{Client, ClientError, Target};
use nexthop_ndnd::mgmt::ControlParameters;
use nexthop_repo::command::{Action, Commands, Config as CommandConfig};
use nexthop_repo::{
    reassemble, segment_object, RepoError, Store, DEFAULT_MAX_OBJECT_BYTES, DEFAULT_SEGMENT_SIZE,
};
use nexthop_wire::ndn::{Name, NetPacket, Packet};

/// `nexthop ndn repo ...`
#[derive(Debug, Args)]
pub struct RepoArgs {
    /// Redis: a Unix socket path, `unix:///PATH` or `redis://HOST:PORT`.
    #[arg(long, global = true, default_value = "/run/nexthop-repo/redis.sock")]
    pub redis: String,
    /// Serve as the Repo REPO_NAME through the forwarder.
    #[arg(long)]
    pub name: Option<String>,
    /// The forwarder: `unix:///PATH` or `udp://HOST:PORT`.
    #[arg(long, default_value = "unix:///run/nfd/nfd.sock")]
    pub forwarder: String,
    /// More prefixes to register and serve (repeatable).
    #[arg(long)]
    pub register: Vec<String>,
    /// Inserts (ndn-python-repo commands) running at once; more get 503.
    #[arg(long, default_value_t = 4)]
    pub max_inserts: usize,
    /// Segment Interests in flight per insert.
    #[arg(long, default_value_t = 32)]
    pub window: usize,
    /// Largest object an insert or `put` may store (sum of Data sizes).
    #[arg(long, global = true, default_value_t = DEFAULT_MAX_OBJECT_BYTES)]
    pub max_object_bytes: usize,
    #[command(subcommand)]
    pub cmd: Option<RepoCmd>,
}

/// Bulk operations on the Repo's store.
#[derive(Debug, Subcommand)]
pub enum RepoCmd {
    /// Segment FILE under NAME, sign with DigestSha256, store atomically.
    Put {
        /// The object's name (segments are NAME/seg=i).
        #[arg(long)]
        prefix: String,
        /// The file to store.
        file: PathBuf,
        /// Content bytes per segment.
        #[arg(long, default_value_t = DEFAULT_SEGMENT_SIZE)]
        segment_size: usize,
        /// FreshnessPeriod of each segment in ms (0: absent).
        #[arg(long, default_value_t = 0)]
        freshness_ms: u64,
    },
    /// Write a stored object's content to stdout or FILE.
    Get {
        /// The object's name.
        name: String,
        /// Output file (stdout when absent).
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Delete every packet under NAME.
    Delete {
        /// The prefix to delete.
        name: String,
    },
    /// List the stored names under PREFIX.
    List {
        /// The prefix.
        prefix: String,
    },
}

fn name(uri: &str) -> Result<Name> {
    Name::from_uri(uri).map_err(|e| anyhow!("status 400: bad name {uri:?}: {e}"))
}

fn status(e: RepoError) -> anyhow::Error {
    anyhow!("status {}: {e}", e.status())
}

fn target(t: &str) -> Result<Target> {
    if let Some(p) = t.strip_prefix("unix://") {
        Ok(Target::Unix(PathBuf::from(p)))
    } else if let Some(a) = t.strip_prefix("udp://") {
        let addr = a
            .to_socket_addrs()
            .ok()
            .and_then(|mut i| i.next())
            .ok_or_else(|| anyhow!("bad forwarder address {t:?}"))?;
        Ok(Target::Udp(addr))
    } else {
        Err(anyhow!(
            "--forwarder {t:?}: expected unix:///PATH or udp://HOST:PORT"
        ))
    }
}

/// The network packet inside a received packet and its wire bytes (a
/// Data is stored as received); Nacks and fragments are skipped.
fn net_packet(wire: Vec<u8>) -> Option<(NetPacket, Vec<u8>)> {
    match Packet::decode(&wire).ok()? {
        Packet::Interest(i) => Some((NetPacket::Interest(i), wire)),
        Packet::Data(d) => Some((NetPacket::Data(d), wire)),
        Packet::Lp(lp) if lp.nack.is_none() && lp.is_whole() => {
            let frag = lp.fragment?;
            let p = NetPacket::decode(&frag).ok()?;
            Some((p, frag))
        }
        Packet::Lp(_) => None,
    }
}

/// Carry out what the command state asks: send packets, store or delete
/// objects (reporting the outcome back).
fn execute(
    face: &mut Client,
    store: &mut Store,
    cmds: &mut Commands,
    actions: Vec<Action>,
) -> Result<()> {
    for a in actions {
        match a {
            Action::Send(w) => face.send(&w).map_err(|e| anyhow!("sending: {e}"))?,
            Action::Store {
                process,
                prefix,
                packets,
            } => {
                let r = store.put_object(&prefix, &packets);
                match &r {
                    Ok(n) => eprintln!("nexthop ndn repo: inserted {prefix} segments={n}"),
                    Err(e) => eprintln!(
                        "nexthop ndn repo: insert {prefix} status {}: {e}",
                        e.status()
                    ),
                }
                cmds.stored(&process, r.map_err(|e| e.status()), Instant::now());
            }
            Action::Delete {
                process,
                name,
                start,
                end,
            } => {
                let r = store.delete_segments(&name, start, end);
                if let Err(e) = &r {
                    eprintln!("nexthop ndn repo: delete {name} status {}: {e}", e.status());
                }
                cmds.deleted(&process, r.map_err(|e| e.status()), Instant::now());
            }
        }
    }
    Ok(())
}

fn serve(
    store: &mut Store,
    repo_name: &str,
    forwarder: &str,
    extra: &[String],
    cfg: CommandConfig,
) -> Result<()> {
    let mut prefixes = vec![name(repo_name)?];
    for p in extra {
        prefixes.push(name(p)?);
    }
    let mut face = Client::connect(&target(forwarder)?, Duration::from_secs(4))
        .map_err(|e| anyhow!("connecting to {forwarder}: {e}"))?;
    for p in &prefixes {
        let params = ControlParameters {
            name: Some(p.clone()),
            ..ControlParameters::default()
        };
        let (code, text, _) = face
            .command("rib", "register", &params)
            .map_err(|e| anyhow!("rib/register {p}: {e}"))?;
        if code != 200 {
            return Err(anyhow!("rib/register {p} refused: {code} {text}"));
        }
    }
    let listed: Vec<String> = prefixes.iter().map(Name::to_string).collect();
    eprintln!("nexthop ndn repo: serving {}", listed.join(" "));
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let mut cmds = Commands::new(prefixes[0].clone(), prefixes.clone(), cfg, seed);
    let (mut answered, mut unanswered, mut failed) = (0u64, 0u64, 0u64);
    loop {
        let idle = Instant::now() + Duration::from_secs(3600);
        let deadline = cmds.next_deadline().map_or(idle, |d| d.min(idle));
        let packet = match face.recv(deadline) {
            Ok(w) => net_packet(w),
            Err(ClientError::Timeout) => None,
            Err(e) => {
                let c = cmds.counters();
                eprintln!(
                    "nexthop ndn repo: stopped ({e}) answered={answered} unanswered={unanswered} failed={failed} inserted={} failed_inserts={} deletes={} malformed_commands={}",
                    c.inserted, c.failed_inserts, c.deletes, c.malformed
                );
                return Ok(());
            }
        };
        let now = Instant::now();
        match packet {
            Some((NetPacket::Interest(i), _)) => {
                if let Some(actions) = cmds.on_interest(&i, now) {
                    execute(&mut face, store, &mut cmds, actions)?;
                } else {
                    match store.find(&i.name, i.can_be_prefix, i.must_be_fresh) {
                        Ok(Some(d)) => {
                            face.send(&d).map_err(|e| anyhow!("sending Data: {e}"))?;
                            answered += 1;
                        }
                        Ok(None) => unanswered += 1,
                        Err(e) => {
                            failed += 1;
                            eprintln!("nexthop ndn repo: {} status {}: {e}", i.name, e.status());
                        }
                    }
                }
            }
            Some((NetPacket::Data(d), wire)) => {
                let actions = cmds.on_data(&d, &wire, now);
                execute(&mut face, store, &mut cmds, actions)?;
            }
            None => {}
        }
        let actions = cmds.poll(Instant::now());
        execute(&mut face, store, &mut cmds, actions)?;
    }
}

/// Serve (no subcommand) or run one bulk operation.
pub fn run(a: RepoArgs) -> Result<()> {
    let mut store = Store::open(&a.redis).map_err(status)?;
    store.set_max_object_bytes(a.max_object_bytes);
    let Some(cmd) = a.cmd else {
        let n = a.name.ok_or_else(|| {
            anyhow!("nexthop ndn repo: --name REPO_NAME (to serve) or a subcommand is required")
        })?;
        if a.window == 0 || a.max_inserts == 0 {
            return Err(anyhow!("--window and --max-inserts must be at least 1"));
        }
        let cfg = CommandConfig {
            window: a.window,
            max_inserts: a.max_inserts,
            max_object_bytes: a.max_object_bytes,
            ..CommandConfig::default()
        };
        return serve(&mut store, &n, &a.forwarder, &a.register, cfg);
    };
    match cmd {
        RepoCmd::Put {
            prefix,
            file,
            segment_size,
            freshness_ms,
        } => {
            let p = name(&prefix)?;
            let content =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let segs = segment_object(&p, &content, segment_size, freshness_ms);
            // Replace, not merge with, an object stored earlier under it.
            store.delete(&p).map_err(status)?;
            let n = store.put_object(&p, &segs).map_err(status)?;
            println!("stored {p} segments={n} bytes={}", content.len());
        }
        RepoCmd::Get { name: n, out } => {
            let p = name(&n)?;
            let segs = store
                .get_object(&p)
                .map_err(status)?
                .ok_or_else(|| anyhow!("status 404: {p} is not stored"))?;
            let content = reassemble(&segs).map_err(status)?;
            match out {
                Some(f) => std::fs::write(&f, &content)
                    .with_context(|| format!("writing {}", f.display()))?,
                None => {
                    let mut o = std::io::stdout().lock();
                    o.write_all(&content)?;
                    o.flush()?;
                }
            }
        }
        RepoCmd::Delete { name: n } => {
            let p = name(&n)?;
            println!("deleted {}", store.delete(&p).map_err(status)?);
        }
        RepoCmd::List { prefix } => {
            let p = name(&prefix)?;
            let mut o = std::io::stdout().lock();
            for n in store.list(&p).map_err(status)? {
                writeln!(o, "{n}")?;
            }
            o.flush()?;
        }
    }
    Ok(())
}
