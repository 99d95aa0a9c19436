//! `nexthop ndn repo put|get|delete|list`: bulk operations on the Repo's
//! Redis store (`nexthop-repo`), straight on Redis.
//!
//! Contract (outside tests rely on it); `--redis URL` is a Unix socket path,
//! `unix:///PATH` or `redis://[:PASSWORD@]HOST:PORT[/DB]`:
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
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use nexthop_repo::{reassemble, segment_object, RepoError, Store, DEFAULT_SEGMENT_SIZE};
use nexthop_wire::ndn::Name;

/// `nexthop ndn repo ...`
#[derive(Debug, Args)]
pub struct RepoArgs {
    /// Redis: a Unix socket path, `unix:///PATH` or `redis://HOST:PORT`.
    #[arg(long, global = true, default_value = "/run/nexthop-repo/redis.sock")]
    pub redis: String,
    #[command(subcommand)]
    pub cmd: RepoCmd,
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

/// Run one bulk operation.
pub fn run(a: RepoArgs) -> Result<()> {
    let mut store = Store::open(&a.redis).map_err(status)?;
    match a.cmd {
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
