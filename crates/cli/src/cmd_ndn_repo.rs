//! `nexthop ndn repo`: the Repo's Redis store (`nexthop-repo`), served
//! through the forwarder, and bulk operations straight on Redis.
//!
//! Contract (outside tests rely on it); `--redis URL` is a Unix socket path,
//! `unix:///PATH`, `redis://[:PASSWORD@]HOST:PORT[/DB]` or, over TLS,
//! `rediss://[:PASSWORD@]HOST:PORT[/DB]` (the server's certificate checked
//! against `--redis-ca FILE`, PEM, or else the system's roots; a client
//! certificate with `--redis-cert FILE --redis-key FILE`; a refused
//! handshake is `status 503: TLS to redis refused: ...`):
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
//!   A complete insert that finds Redis down waits for it (`... insert
//!   NAME waits for Redis`), retried every 100 ms for `--redis-retry-ms`
//!   (default 5000; status 300 to the client's checks meanwhile), then
//!   fails with 503; Redis back in time, the insert completes (200).
//!   Inserts are written in the order they completed; at most
//!   `--max-inserts` wait (more fail with 503 at once).
//!   An insert whose command carries RegisterPrefix Q may name an object
//!   under Q: the Repo registers Q (`nexthop ndn repo: registered Q`),
//!   keeps it in Redis and registers it again when restarted (then listed
//!   on the `serving` line); a delete carrying Q unregisters it. Packets
//!   are taken from the face in batches and the batch's Interests answered
//!   with one Redis round trip (`Store::find_many`). A lost Redis
//!   connection is reopened by the next operation and logged
//!   (`nexthop ndn repo: reconnected to Redis (reconnects=N)`).
//! * `put --prefix NAME FILE [--segment-size N] [--freshness-ms MS]`: cuts
//!   FILE into Data packets `NAME/seg=i` (FinalBlockId set, DigestSha256
//!   signed) and stores them as one atomic object; prints
//!   `stored NAME segments=N bytes=B`.
//! * `get NAME [-o FILE]`: the object's content (stdout without `-o`).
//! * `delete NAME`: deletes every packet under NAME; prints `deleted N`.
//! * `list PREFIX`: one stored name per line, in TLV byte order.
//! * `bench --repo REPO_NAME --forwarder TRANSPORT --prefix P [--count N]
//!   [--size B] [--clients C] [--window W] [--register-prefix]`: writes and
//!   reads per second of a serving Repo (ours or ndn-python-repo's) through
//!   the forwarder; see `cmd_ndn_repo/bench.rs`. Prints
//!   `nexthop ndn repo bench: write|read clients=C packets=N content=B
//!   seconds=S packets_per_s=R`; fails (non-zero) on an insert status other
//!   than 200/300 (`insert status Some(CODE)`), a packet read back that
//!   differs from the one written, or a phase over `--timeout-s`.
//!
//! A failure exits non-zero with `status CODE: reason` (400 bad request,
//! 404 missing/incomplete, 503 Redis down, 507 Redis full, 500 other).

mod bench;
mod face;

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use nexthop_ndnd::client::Target;
use nexthop_ndnd::tools::{command_interest, rand_nonce};
use nexthop_repo::command::{Action, Commands, Config as CommandConfig, DEFAULT_WINDOW};
use nexthop_repo::{
    reassemble, segment_object, RepoError, Store, Tls, DEFAULT_MAX_OBJECT_BYTES, DEFAULT_NAMESPACE,
    DEFAULT_SEGMENT_SIZE,
};
use nexthop_wire::ndn::{Data, Interest, Name, NetPacket};

use face::{check_rib_answer, net_packet, Face};

/// `nexthop ndn repo ...`
#[derive(Debug, Args)]
pub struct RepoArgs {
    /// Redis: a Unix socket path, `unix:///PATH`, `redis://HOST:PORT` or,
    /// over TLS, `rediss://HOST:PORT`.
    #[arg(long, global = true, default_value = "/run/nexthop-repo/redis.sock")]
    pub redis: String,
    /// PEM file of the CA(s) to trust for a `rediss://` Redis instead of the
    /// system's root certificates (a self-signed or private CA).
    #[arg(long, global = true)]
    pub redis_ca: Option<PathBuf>,
    /// PEM client certificate for a `rediss://` Redis that asks for one
    /// (`--tls-auth-clients yes`); needs `--redis-key`.
    #[arg(long, global = true, requires = "redis_key")]
    pub redis_cert: Option<PathBuf>,
    /// PEM private key of `--redis-cert`.
    #[arg(long, global = true, requires = "redis_cert")]
    pub redis_key: Option<PathBuf>,
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
    #[arg(long, default_value_t = DEFAULT_WINDOW)]
    pub window: usize,
    /// How long a complete insert that finds Redis down waits for it
    /// (retried every 100 ms, its status 300 meanwhile) before it fails
    /// with 503; 0 fails at once.
    #[arg(long, default_value_t = 5000)]
    pub redis_retry_ms: u64,
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
    /// Writes and reads per second of a serving Repo through the forwarder
    /// (ndn-python-repo 0.3's command protocol; see `bench.rs`).
    Bench(bench::BenchArgs),
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

/// The serving Repo's state beside the command protocol: its face, the
/// packets to send after this batch, the `rib` commands it waits on, and
/// what it counts.
struct Server<'a> {
    face: Face,
    store: &'a mut Store,
    cmds: Commands,
    out: Vec<Vec<u8>>,
    /// `rib` command Interests sent and not answered yet: name -> (verb,
    /// prefix, when to give up).
    rib_pending: HashMap<Name, (&'static str, Name, Instant)>,
    answered: u64,
    unanswered: u64,
    failed: u64,
    registered: u64,
    reconnects: u64,
    /// Complete inserts waiting for Redis to come back, oldest first.
    waiting: VecDeque<Waiting>,
    /// How long one waits (`--redis-retry-ms`).
    redis_retry: Duration,
    /// When the waiting inserts are tried next.
    next_retry: Instant,
    /// Most inserts that wait at once (`--max-inserts`: as many objects
    /// again as those being fetched); past it, 503 at once.
    max_waiting: usize,
}

/// A complete insert on its way to Redis.
struct Waiting {
    process: Vec<u8>,
    prefix: Name,
    packets: Vec<Vec<u8>>,
    /// When it stops waiting for a Redis that is down (then 503).
    until: Instant,
}

/// How often inserts waiting for Redis are tried again.
const REDIS_RETRY_EVERY: Duration = Duration::from_millis(100);

/// Most `rib` commands the Repo waits on at once; past it, a command is
/// sent without waiting for its answer.
const MAX_RIB_PENDING: usize = 256;

impl Server<'_> {
    /// Carry out what the command state asks: queue packets, store or
    /// delete objects (reporting the outcome back), register prefixes.
    fn execute(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(w) => self.out.push(w),
                Action::Store {
                    process,
                    prefix,
                    packets,
                } => self.store_object(Waiting {
                    process,
                    prefix,
                    packets,
                    until: Instant::now() + self.redis_retry,
                }),
                Action::Delete {
                    process,
                    name,
                    start,
                    end,
                } => {
                    let r = self.store.delete_segments(&name, start, end);
                    if let Err(e) = &r {
                        eprintln!("nexthop ndn repo: delete {name} status {}: {e}", e.status());
                    }
                    self.cmds
                        .deleted(&process, r.map_err(|e| e.status()), Instant::now());
                }
                Action::Register(p) => {
                    if let Err(e) = self.store.add_prefix(&p) {
                        eprintln!(
                            "nexthop ndn repo: keeping registered prefix {p} status {}: {e}",
                            e.status()
                        );
                    }
                    self.rib("register", p);
                }
                Action::Unregister(p) => {
                    if let Err(e) = self.store.remove_prefix(&p) {
                        eprintln!(
                            "nexthop ndn repo: forgetting registered prefix {p} status {}: {e}",
                            e.status()
                        );
                    }
                    self.rib("unregister", p);
                }
            }
        }
    }

    /// Write a complete insert's object, or queue it behind the ones
    /// waiting for Redis (so objects are written in the order they
    /// completed). One that finds Redis down waits, its status 300, and is
    /// tried again by [`Server::retry_waiting`] until its `until`.
    fn store_object(&mut self, w: Waiting) {
        if !self.waiting.is_empty() {
            if self.waiting.len() >= self.max_waiting {
                let e = format!("{} inserts already wait for Redis", self.max_waiting);
                self.finish_store(&w, Err(RepoError::Unavailable(e)));
            } else {
                self.waiting.push_back(w);
            }
            return;
        }
        let r = self.store.put_object(&w.prefix, &w.packets);
        match r {
            Err(RepoError::Unavailable(e)) if Instant::now() < w.until => {
                eprintln!(
                    "nexthop ndn repo: insert {} waits for Redis (status 503: {e}), retrying for {} ms",
                    w.prefix,
                    self.redis_retry.as_millis()
                );
                self.next_retry = Instant::now() + REDIS_RETRY_EVERY;
                self.waiting.push_back(w);
            }
            r => self.finish_store(&w, r),
        }
    }

    /// Try the inserts waiting for Redis again, oldest first, once their
    /// retry time has come; one whose retry window ran out fails with 503.
    fn retry_waiting(&mut self, now: Instant) {
        if self.waiting.is_empty() || now < self.next_retry {
            return;
        }
        while let Some(w) = self.waiting.pop_front() {
            match self.store.put_object(&w.prefix, &w.packets) {
                Err(RepoError::Unavailable(_)) if now < w.until => {
                    self.waiting.push_front(w);
                    self.next_retry = now + REDIS_RETRY_EVERY;
                    return;
                }
                r => self.finish_store(&w, r),
            }
        }
    }

    /// Log an insert's outcome and report it to the command state.
    fn finish_store(&mut self, w: &Waiting, r: Result<usize, RepoError>) {
        match &r {
            Ok(n) => eprintln!("nexthop ndn repo: inserted {} segments={n}", w.prefix),
            Err(e) => eprintln!(
                "nexthop ndn repo: insert {} status {}: {e}",
                w.prefix,
                e.status()
            ),
        }
        self.cmds
            .stored(&w.process, r.map_err(|e| e.status()), Instant::now());
    }

    /// Send a `rib/<verb>` command for `prefix`; its answer is logged when
    /// it comes ([`Server::on_rib_answer`]).
    fn rib(&mut self, verb: &'static str, prefix: Name) {
        let cmd = command_interest(verb, &prefix, rand_nonce());
        self.out.push(cmd.to_wire());
        if self.rib_pending.len() < MAX_RIB_PENDING {
            let until = Instant::now() + RIB_TIMEOUT;
            self.rib_pending.insert(cmd.name, (verb, prefix, until));
        }
    }

    /// A Data that answers a `rib` command: log the outcome. False when it
    /// answers none.
    fn on_rib_answer(&mut self, d: &Data) -> bool {
        let Some((verb, prefix, _)) = self.rib_pending.remove(&d.name) else {
            return false;
        };
        match check_rib_answer(verb, &prefix, d.content.as_deref().unwrap_or_default()) {
            Ok(()) => {
                if verb == "register" {
                    self.registered += 1;
                }
                eprintln!("nexthop ndn repo: {verb}ed {prefix}");
            }
            Err(e) => eprintln!("nexthop ndn repo: {e}"),
        }
        true
    }

    /// Answer the Interests for stored Data of one batch, in few Redis
    /// round trips ([`Store::find_many`]).
    fn serve_reads(&mut self, reads: &[Interest]) {
        if reads.is_empty() {
            return;
        }
        let reqs: Vec<(&Name, bool, bool)> = reads
            .iter()
            .map(|i| (&i.name, i.can_be_prefix, i.must_be_fresh))
            .collect();
        match self.store.find_many(&reqs) {
            Ok(found) => {
                for d in found {
                    match d {
                        Some(d) => {
                            self.out.push(d);
                            self.answered += 1;
                        }
                        None => self.unanswered += 1,
                    }
                }
            }
            Err(e) => {
                self.failed += reads.len() as u64;
                eprintln!(
                    "nexthop ndn repo: {} Interests ({} first) status {}: {e}",
                    reads.len(),
                    reads[0].name,
                    e.status()
                );
            }
        }
    }

    /// Log a reconnection to Redis once (the store counts them).
    fn note_reconnects(&mut self) {
        let r = self.store.reconnects();
        if r > self.reconnects {
            self.reconnects = r;
            eprintln!("nexthop ndn repo: reconnected to Redis (reconnects={r})");
        }
    }

    fn summary(&self, why: &str) {
        let c = self.cmds.counters();
        eprintln!(
            "nexthop ndn repo: stopped ({why}) answered={} unanswered={} failed={} inserted={} failed_inserts={} deletes={} malformed_commands={} registered={} redis_reconnects={}",
            self.answered,
            self.unanswered,
            self.failed,
            c.inserted,
            c.failed_inserts,
            c.deletes,
            c.malformed,
            self.registered,
            self.store.reconnects()
        );
    }
}

/// How long a `rib` command the Repo sent is waited for.
const RIB_TIMEOUT: Duration = Duration::from_secs(4);

fn serve(
    store: &mut Store,
    repo_name: &str,
    forwarder: &str,
    extra: &[String],
    cfg: CommandConfig,
    redis_retry: Duration,
) -> Result<()> {
    let mut prefixes = vec![name(repo_name)?];
    for p in extra {
        prefixes.push(name(p)?);
    }
    let mut face = Face::connect(&target(forwarder)?)
        .map_err(|e| anyhow!("connecting to {forwarder}: {e}"))?;
    for p in &prefixes {
        face.rib("register", p, RIB_TIMEOUT)?;
    }
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let cfg_max_inserts = cfg.max_inserts;
    let mut cmds = Commands::new(prefixes[0].clone(), prefixes.clone(), cfg, seed);
    // The prefixes inserts registered before a restart (RegisterPrefix).
    match store.prefixes() {
        Ok(kept) => {
            for p in kept {
                if cmds.add_served(p.clone()) {
                    face.rib("register", &p, RIB_TIMEOUT)?;
                    prefixes.push(p);
                }
            }
        }
        Err(e) => eprintln!(
            "nexthop ndn repo: registered prefixes not read back, status {}: {e}",
            e.status()
        ),
    }
    let listed: Vec<String> = prefixes.iter().map(Name::to_string).collect();
    eprintln!("nexthop ndn repo: serving {}", listed.join(" "));
    let mut s = Server {
        face,
        store,
        cmds,
        out: Vec::new(),
        rib_pending: HashMap::new(),
        answered: 0,
        unanswered: 0,
        failed: 0,
        registered: 0,
        reconnects: 0,
        waiting: VecDeque::new(),
        redis_retry,
        next_retry: Instant::now(),
        max_waiting: cfg_max_inserts,
    };
    s.reconnects = s.store.reconnects();
    let mut batch = Vec::new();
    let mut reads = Vec::new();
    loop {
        let idle = Instant::now() + Duration::from_secs(3600);
        let rib = s.rib_pending.values().map(|p| p.2).min();
        let retry = (!s.waiting.is_empty()).then_some(s.next_retry);
        let deadline = [s.cmds.next_deadline(), rib, retry]
            .into_iter()
            .flatten()
            .fold(idle, Instant::min);
        batch.clear();
        if let Err(e) = s.face.recv_batch(deadline, &mut batch) {
            s.summary(&e.to_string());
            return Ok(());
        }
        let now = Instant::now();
        reads.clear();
        for w in batch.drain(..) {
            match net_packet(w) {
                Some((NetPacket::Interest(i), _)) => match s.cmds.on_interest(&i, now) {
                    Some(actions) => s.execute(actions),
                    None => reads.push(i),
                },
                Some((NetPacket::Data(d), wire)) if !s.on_rib_answer(&d) => {
                    let actions = s.cmds.on_data(&d, &wire, now);
                    s.execute(actions);
                }
                Some((NetPacket::Data(_), _)) | None => {}
            }
        }
        s.serve_reads(&reads);
        let now = Instant::now();
        s.retry_waiting(now);
        let actions = s.cmds.poll(now);
        s.execute(actions);
        s.note_reconnects();
        s.rib_pending.retain(|_, (verb, p, until)| {
            let keep = *until > now;
            if !keep {
                eprintln!("nexthop ndn repo: rib/{verb} {p}: no answer from the forwarder");
            }
            keep
        });
        let out = std::mem::take(&mut s.out);
        if let Err(e) = s.face.send_all(&out) {
            s.summary(&format!("sending: {e}"));
            return Ok(());
        }
    }
}

/// The store `--redis` names, with the TLS files of `--redis-ca`,
/// `--redis-cert` and `--redis-key` read in.
fn open_store(a: &RepoArgs) -> Result<Store> {
    let read = |flag: &str, f: &PathBuf| {
        std::fs::read(f).with_context(|| format!("status 400: {flag} {}", f.display()))
    };
    let tls = Tls {
        ca_pem: a
            .redis_ca
            .as_ref()
            .map(|f| read("--redis-ca", f))
            .transpose()?,
        client: match (&a.redis_cert, &a.redis_key) {
            (Some(c), Some(k)) => Some((read("--redis-cert", c)?, read("--redis-key", k)?)),
            _ => None,
        },
    };
    Store::with_tls(&a.redis, DEFAULT_NAMESPACE, &tls).map_err(status)
}

/// Serve (no subcommand) or run one bulk operation.
pub fn run(a: RepoArgs) -> Result<()> {
    let mut store = open_store(&a)?;
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
        let retry = Duration::from_millis(a.redis_retry_ms);
        return serve(&mut store, &n, &a.forwarder, &a.register, cfg, retry);
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
        RepoCmd::Bench(b) => bench::run(&b)?,
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
