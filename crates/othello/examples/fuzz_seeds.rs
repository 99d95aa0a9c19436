//! Writes small valid inputs for the fuzz targets: `fuzz_seeds DIR` creates
//! `DIR/{snapshot_decode,delta_decode,control_load}/*`.

use nexthop_othello::{Config, Delta, Op, Othello, Sizing};

fn main() -> std::io::Result<()> {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/seeds".into()),
    );
    for t in ["snapshot_decode", "delta_decode", "control_load"] {
        std::fs::create_dir_all(dir.join(t))?;
    }
    let cfgs = [
        Config::default(),
        Config {
            value_bits: 12,
            check_bits: 8,
            sizing: Sizing::Tight,
            ..Config::default()
        },
    ];
    for (i, cfg) in cfgs.iter().enumerate() {
        let mut o: Othello<u64> =
            Othello::with_capacity(*cfg, 40).map_err(std::io::Error::other)?;
        for k in 0..40u64 {
            let c = o.insert(k, k & 0xff).map_err(std::io::Error::other)?;
            if k % 10 == 0 {
                std::fs::write(
                    dir.join(format!("delta_decode/insert-{i}-{k}")),
                    o.delta(&c, 0).encode(),
                )?;
            }
        }
        std::fs::write(dir.join(format!("snapshot_decode/snap-{i}")), o.snapshot(0))?;
        std::fs::write(dir.join(format!("control_load/ctl-{i}")), o.save())?;
    }
    let d = Delta::Ops {
        generation: 1,
        ops: vec![Op::StashPut { fp: 5, word: 1 }, Op::StashDel { fp: 5 }],
    };
    std::fs::write(dir.join("delta_decode/stash"), d.encode())?;
    Ok(())
}
