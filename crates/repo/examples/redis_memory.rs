//! Bytes of Redis memory per stored packet beyond the packet itself.
//!
//! ```sh
//! cargo run --release -p nexthop-repo --example redis_memory -- \
//!     --redis /path/redis.sock [--count N] [--size B]... [--segments-per-object K]
//! ```
//!
//! For each `--size` (content bytes per packet; default 100 and 8000), stores
//! `--count` packets (default 10 000) through [`Store::put_object`] in objects
//! of `--segments-per-object` segments (default 1000), named
//! `/mem/<size>/o<k>/seg=<i>`, in a namespace of its own (`ndnrepo-mem`,
//! emptied before and after), and prints one line:
//!
//! `redis_memory: size=B packets=N wire=W name=L used_memory_delta=D
//! per_packet=P beyond_packet=E data_key=K zset_member=Z hash_field=H`
//!
//! `wire` is the mean wire size of a packet, `name` the mean length of its
//! Name TLV-VALUE; `per_packet` is the growth of `INFO memory`'s
//! `used_memory` over the count, `beyond_packet` that less `wire`. The last
//! three split it by structure (`MEMORY USAGE ... SAMPLES 0`, divided by the
//! count): the data key with its value (less the wire bytes), the sorted-set
//! member of the name index and the insert-time hash field. The Redis
//! should be otherwise idle (its own other keys do not count, but other
//! clients' writes would).

use nexthop_repo::{segment_object, Store};
use nexthop_wire::Name;

const NS: &str = "ndnrepo-mem";

fn main() {
    if let Err(e) = run() {
        eprintln!("redis_memory: {e}");
        std::process::exit(1);
    }
}

struct Opts {
    redis: String,
    count: usize,
    sizes: Vec<usize>,
    per_object: usize,
}

fn opts() -> Result<Opts, String> {
    let mut o = Opts {
        redis: String::new(),
        count: 10_000,
        sizes: Vec::new(),
        per_object: 1000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().ok_or(format!("{what} needs a value"));
        let num = |v: String, what: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{what} {v:?}: expected a positive integer"))
        };
        match a.as_str() {
            "--redis" => o.redis = val("--redis")?,
            "--count" => o.count = num(val("--count")?, "--count")?,
            "--size" => o.sizes.push(num(val("--size")?, "--size")?),
            "--segments-per-object" => {
                o.per_object = num(val("--segments-per-object")?, "--segments-per-object")?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.redis.is_empty() {
        return Err("--redis LOCATION is required".into());
    }
    if o.sizes.is_empty() {
        o.sizes = vec![100, 8000];
    }
    Ok(o)
}

fn run() -> Result<(), String> {
    let o = opts()?;
    let url = nexthop_repo::redis_url(&o.redis);
    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let mut c = client.get_connection().map_err(|e| e.to_string())?;
    let mut store = Store::with_namespace(&o.redis, NS).map_err(|e| e.to_string())?;
    let root = Name::from_uri("/mem").map_err(|e| e.to_string())?;
    for &size in &o.sizes {
        store.delete(&root).map_err(|e| e.to_string())?;
        let before = used_memory(&mut c)?;
        let (mut wire, mut name_len, mut stored) = (0usize, 0usize, 0usize);
        let mut k = 0;
        while stored < o.count {
            let n = o.per_object.min(o.count - stored);
            let prefix = Name::from_uri(&format!("/mem/{size}/o{k}")).map_err(|e| e.to_string())?;
            let content = vec![0x5au8; n * size];
            let segs = segment_object(&prefix, &content, size, 0);
            wire += segs.iter().map(Vec::len).sum::<usize>();
            name_len += (0..n as u64)
                .map(|i| nexthop_repo::segment_name(&prefix, i).value().len())
                .sum::<usize>();
            store
                .put_object(&prefix, &segs)
                .map_err(|e| e.to_string())?;
            stored += n;
            k += 1;
        }
        let after = used_memory(&mut c)?;
        let n = stored as f64;
        let delta = after.saturating_sub(before) as f64;
        let (zset, hash) = (
            usage(&mut c, &format!("{NS}:i"))?,
            usage(&mut c, &format!("{NS}:t"))?,
        );
        // Every data key's MEMORY USAGE, in one pipeline per object.
        let mut data = 0u64;
        for obj in 0..k {
            let prefix =
                Name::from_uri(&format!("/mem/{size}/o{obj}")).map_err(|e| e.to_string())?;
            let segs = o.per_object.min(stored - obj * o.per_object) as u64;
            let mut p = redis::pipe();
            for i in 0..segs {
                let mut key = format!("{NS}:d:").into_bytes();
                key.extend_from_slice(nexthop_repo::segment_name(&prefix, i).value());
                p.cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0);
            }
            let got: Vec<Option<u64>> = p.query(&mut c).map_err(|e| e.to_string())?;
            data += got.into_iter().flatten().sum::<u64>();
        }
        let wire_mean = wire as f64 / n;
        println!(
            "redis_memory: size={size} packets={stored} wire={wire_mean:.0} name={:.0} used_memory_delta={} per_packet={:.0} beyond_packet={:.0} data_key={:.0} zset_member={:.0} hash_field={:.0}",
            name_len as f64 / n,
            after.saturating_sub(before),
            delta / n,
            delta / n - wire_mean,
            (data as f64 - wire as f64) / n,
            zset as f64 / n,
            hash as f64 / n,
        );
        store.delete(&root).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `used_memory` of `INFO memory`.
fn used_memory(c: &mut redis::Connection) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(c)
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "INFO memory has no used_memory".to_string())
}

/// `MEMORY USAGE key SAMPLES 0` (every element counted), 0 when absent.
fn usage(c: &mut redis::Connection, key: &str) -> Result<u64, String> {
    let v: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(c)
        .map_err(|e| e.to_string())?;
    Ok(v.unwrap_or(0))
}
