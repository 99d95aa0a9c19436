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
//!   reconnects by itself.
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
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use nexthop_ndnd::client::{Client, ClientError, Target};
use nexthop_ndnd::mgmt::ControlParameters;
use nexthop_repo::{reassemble, segment_object, RepoError, Store, DEFAULT_SEGMENT_SIZE};
use nexthop_wire::ndn::{Interest, Name, Packet};

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

/// The Interest inside a received packet, if it holds one.
fn interest_of(wire: &[u8]) -> Option<Interest> {
    match Packet::decode(wire).ok()? {
        Packet::Interest(i) => Some(i),
        Packet::Lp(lp) if lp.nack.is_none() => Interest::decode(lp.fragment.as_deref()?).ok(),
        _ => None,
    }
}

fn serve(store: &mut Store, repo_name: &str, forwarder: &str, extra: &[String]) -> Result<()> {
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
    let (mut answered, mut unanswered, mut failed) = (0u64, 0u64, 0u64);
    loop {
        let wire = match face.recv(Instant::now() + Duration::from_secs(3600)) {
            Ok(w) => w,
            Err(ClientError::Timeout) => continue,
            Err(e) => {
                eprintln!(
                    "nexthop ndn repo: stopped ({e}) answered={answered} unanswered={unanswered} failed={failed}"
                );
                return Ok(());
            }
        };
        let Some(i) = interest_of(&wire) else {
            continue;
        };
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

/// Serve (no subcommand) or run one bulk operation.
pub fn run(a: RepoArgs) -> Result<()> {
    let mut store = Store::open(&a.redis).map_err(status)?;
    let Some(cmd) = a.cmd else {
        let n = a.name.ok_or_else(|| {
            anyhow!("nexthop ndn repo: --name REPO_NAME (to serve) or a subcommand is required")
        })?;
        return serve(&mut store, &n, &a.forwarder, &a.register);
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
