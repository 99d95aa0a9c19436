//! `nexthop ndn route add|remove|list`, `ndn face list`, `ndn strategy
//! set|unset|list`, `ndn status`: glue over `nexthop_ndnd::client`, acting
//! on a running forwarder in the spirit of `nfdc`.
//!
//! Contract (outside tests rely on it):
//! * every command connects to `--unix PATH` (default `/run/nfd/nfd.sock`)
//!   or `--udp ADDR:PORT` and waits `--timeout-ms` (default 4000) per
//!   answer; a failed command exits non-zero with the status code and text
//!   on stderr.
//! * `route add PREFIX FACEID [--cost N]`, `route remove PREFIX FACEID`:
//!   `rib/register` / `rib/unregister`; prints `route add|remove PREFIX
//!   face=F cost=C: OK`.
//! * `route list`: one line per FIB entry, `PREFIX FACE:COST[,FACE:COST]`.
//! * `face list`: one line per face, `faceid=F remote=URI local=URI
//!   scope=local|non-local in=Ii/Dd/Nn/Bb out=Ii/Dd/Nn/Bb flags=...`.
//! * `status`: `key: value` lines of ForwarderStatus.
//! * `--json`: one JSON object (status) or one per line (lists).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use nexthop_ndnd::client::{Client, Target};
use nexthop_ndnd::dataset::{FaceStatus, FLAG_LOCAL_FIELDS};
use nexthop_ndnd::mgmt::ControlParameters;
use nexthop_wire::ndn::Name;
use serde_json::json;

/// Where the forwarder is and how long to wait.
#[derive(Debug, Args)]
pub struct ConnArgs {
    /// The forwarder's Unix socket (default /run/nfd/nfd.sock).
    #[arg(long, value_name = "PATH", global = true)]
    unix: Option<PathBuf>,
    /// The forwarder's UDP address instead.
    #[arg(long, value_name = "ADDR:PORT", global = true, conflicts_with = "unix")]
    udp: Option<std::net::SocketAddr>,
    /// Milliseconds to wait for each answer.
    #[arg(long, value_name = "MS", default_value_t = 4000, global = true)]
    timeout_ms: u64,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
}

/// `nexthop ndn route ...`
#[derive(Debug, Subcommand)]
pub enum RouteCmd {
    /// Register PREFIX on face FACEID (rib/register).
    Add {
        /// Name prefix.
        prefix: String,
        /// Face id (as `ndn face list` prints it).
        face: u64,
        /// Route cost.
        #[arg(long, default_value_t = 0)]
        cost: u64,
    },
    /// Unregister PREFIX from face FACEID (rib/unregister).
    Remove {
        /// Name prefix.
        prefix: String,
        /// Face id.
        face: u64,
    },
    /// List the FIB (fib/list).
    List,
}

/// `nexthop ndn face ...`
#[derive(Debug, Subcommand)]
pub enum FaceCmd {
    /// List the faces with their counters (faces/list).
    List,
}

/// `nexthop ndn strategy ...`
#[derive(Debug, Subcommand)]
pub enum StrategyCmd {
    /// Choose best-route or multicast for PREFIX (strategy-choice/set).
    Set {
        /// Name prefix.
        prefix: String,
        /// `best-route`, `multicast`, or a full
        /// `/localhost/nfd/strategy/...` name.
        strategy: String,
    },
    /// Remove PREFIX's choice (strategy-choice/unset).
    Unset {
        /// Name prefix.
        prefix: String,
    },
    /// List the strategy choices (strategy-choice/list).
    List,
}

fn connect(c: &ConnArgs) -> Result<Client> {
    let target = match (c.udp, &c.unix) {
        (Some(a), _) => Target::Udp(a),
        (None, Some(p)) => Target::Unix(p.clone()),
        (None, None) => Target::Unix(PathBuf::from("/run/nfd/nfd.sock")),
    };
    Client::connect(&target, Duration::from_millis(c.timeout_ms))
        .map_err(|e| anyhow!("connecting to the forwarder at {target:?}: {e}"))
}

fn name(uri: &str) -> Result<Name> {
    Name::from_uri(uri).map_err(|e| anyhow!("invalid name '{uri}': {e}"))
}

fn command(c: &ConnArgs, module: &str, verb: &str, p: &ControlParameters) -> Result<()> {
    let mut cl = connect(c)?;
    let (code, text, body) = cl
        .command(module, verb, p)
        .map_err(|e| anyhow!("{module}/{verb}: {e}"))?;
    if code != 200 {
        return Err(anyhow!("{module}/{verb} refused: {code} {text}"));
    }
    let b = body.unwrap_or_default();
    if c.json {
        let v = json!({
            "status": code,
            "text": text,
            "name": b.name.as_ref().map(|n| n.to_string()),
            "face": b.face_id,
            "cost": b.cost,
            "strategy": b.strategy.as_ref().map(|n| n.to_string()),
        });
        println!("{v}");
    } else {
        let mut line = format!("{module} {verb}");
        if let Some(n) = &b.name {
            line += &format!(" {n}");
        }
        if let Some(f) = b.face_id {
            line += &format!(" face={f}");
        }
        if let Some(x) = b.cost {
            line += &format!(" cost={x}");
        }
        if let Some(s) = &b.strategy {
            line += &format!(" strategy={s}");
        }
        println!("{line}: {text}");
    }
    Ok(())
}

/// Run `ndn route ...`.
pub fn route(cmd: RouteCmd, c: &ConnArgs) -> Result<()> {
    match cmd {
        RouteCmd::Add { prefix, face, cost } => {
            let p = ControlParameters {
                name: Some(name(&prefix)?),
                face_id: Some(face),
                cost: Some(cost),
                ..ControlParameters::default()
            };
            command(c, "rib", "register", &p)
        }
        RouteCmd::Remove { prefix, face } => {
            let p = ControlParameters {
                name: Some(name(&prefix)?),
                face_id: Some(face),
                ..ControlParameters::default()
            };
            command(c, "rib", "unregister", &p)
        }
        RouteCmd::List => {
            let fib = connect(c)?.fib().map_err(|e| anyhow!("fib/list: {e}"))?;
            for e in fib {
                if c.json {
                    let hops: Vec<_> = e
                        .next_hops
                        .iter()
                        .map(|&(f, cost)| json!({"face": f, "cost": cost}))
                        .collect();
                    println!("{}", json!({"prefix": e.name.to_string(), "hops": hops}));
                } else {
                    let hops: Vec<String> = e
                        .next_hops
                        .iter()
                        .map(|(f, c)| format!("{f}:{c}"))
                        .collect();
                    println!("{} {}", e.name, hops.join(","));
                }
            }
            Ok(())
        }
    }
}

fn face_json(f: &FaceStatus) -> serde_json::Value {
    json!({
        "face": f.face_id, "remote": f.uri, "local": f.local_uri,
        "scope": if f.scope == 1 { "local" } else { "non-local" },
        "mtu": f.mtu, "local_fields": f.flags & FLAG_LOCAL_FIELDS != 0,
        "in_interests": f.in_interests, "in_data": f.in_data, "in_nacks": f.in_nacks,
        "in_bytes": f.in_bytes, "out_interests": f.out_interests, "out_data": f.out_data,
        "out_nacks": f.out_nacks, "out_bytes": f.out_bytes,
    })
}

/// Run `ndn face ...`.
pub fn face(cmd: FaceCmd, c: &ConnArgs) -> Result<()> {
    let FaceCmd::List = cmd;
    let faces = connect(c)?
        .faces()
        .map_err(|e| anyhow!("faces/list: {e}"))?;
    for f in faces {
        if c.json {
            println!("{}", face_json(&f));
            continue;
        }
        let scope = if f.scope == 1 { "local" } else { "non-local" };
        let flags = if f.flags & FLAG_LOCAL_FIELDS != 0 {
            "local-fields"
        } else {
            "-"
        };
        println!(
            "faceid={} remote={} local={} scope={scope} in={}i/{}d/{}n/{}B out={}i/{}d/{}n/{}B \
             flags={flags}",
            f.face_id,
            f.uri,
            f.local_uri,
            f.in_interests,
            f.in_data,
            f.in_nacks,
            f.in_bytes,
            f.out_interests,
            f.out_data,
            f.out_nacks,
            f.out_bytes,
        );
    }
    Ok(())
}

/// Run `ndn strategy ...`.
pub fn strategy(cmd: StrategyCmd, c: &ConnArgs) -> Result<()> {
    match cmd {
        StrategyCmd::Set { prefix, strategy } => {
            let s = if strategy.starts_with('/') {
                name(&strategy)?
            } else {
                name(&format!("/localhost/nfd/strategy/{strategy}"))?
            };
            let p = ControlParameters {
                name: Some(name(&prefix)?),
                strategy: Some(s),
                ..ControlParameters::default()
            };
            command(c, "strategy-choice", "set", &p)
        }
        StrategyCmd::Unset { prefix } => {
            let p = ControlParameters {
                name: Some(name(&prefix)?),
                ..ControlParameters::default()
            };
            command(c, "strategy-choice", "unset", &p)
        }
        StrategyCmd::List => {
            let list = connect(c)?
                .strategy_choices()
                .map_err(|e| anyhow!("strategy-choice/list: {e}"))?;
            for e in list {
                if c.json {
                    let v =
                        json!({"prefix": e.name.to_string(), "strategy": e.strategy.to_string()});
                    println!("{v}");
                } else {
                    println!("{} {}", e.name, e.strategy);
                }
            }
            Ok(())
        }
    }
}

/// Run `ndn status`.
pub fn status(c: &ConnArgs) -> Result<()> {
    let s = connect(c)?
        .general_status()
        .map_err(|e| anyhow!("status/general: {e}"))?;
    let fields: [(&str, u64); 15] = [
        ("start_ms", s.start_ms),
        ("current_ms", s.current_ms),
        ("name_tree_entries", s.name_tree_entries),
        ("fib_entries", s.fib_entries),
        ("pit_entries", s.pit_entries),
        ("measurement_entries", s.measurement_entries),
        ("cs_entries", s.cs_entries),
        ("in_interests", s.in_interests),
        ("in_data", s.in_data),
        ("in_nacks", s.in_nacks),
        ("out_interests", s.out_interests),
        ("out_data", s.out_data),
        ("out_nacks", s.out_nacks),
        ("satisfied", s.satisfied),
        ("unsatisfied", s.unsatisfied),
    ];
    if c.json {
        let mut v = json!({"version": s.version});
        for (k, x) in fields {
            v[k] = x.into();
        }
        println!("{v}");
    } else {
        println!("version: {}", s.version);
        for (k, x) in fields {
            println!("{k}: {x}");
        }
    }
    Ok(())
}
