//! Batched lookups allocate nothing: `Fib::lookup_batch` over names and
//! `Fib::lookup_batch_tlv` over raw name TLVs (after its scratch buffers
//! have seen names this long), both strategies, every prefetch mode.
//! A counting global allocator (this test binary only) checks it.

use nexthop_ndn::names::WorstCase;
use nexthop_ndn::{BatchScratch, Config, Fib, NameView, NextHop, Prefetch, Strategy};
use nexthop_testutil::alloc::{allocations, Counting, SERIAL};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn batched_lookups_do_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for strategy in [Strategy::VerifyEach, Strategy::VerifyAtEnd] {
        let ws = WorstCase::new(30_000, 15, 9);
        let (fib, _) = Fib::build(
            Config {
                max_components: 15,
                strategy,
                ..Config::default()
            },
            ws.rules_iter().map(|r| (r, [NextHop { face: 1, cost: 0 }])),
        )
        .unwrap();
        let names = ws.trace(5_000, 2);
        let tlvs: Vec<&[u8]> = names.iter().map(|n| n.tlv()).collect();
        let mut out = vec![None; names.len()];
        let mut scratch = BatchScratch::new();
        // Warm-up: the offset buffers grow to the longest name once.
        fib.lookup_batch_tlv(&tlvs, &mut out, Prefetch::All, &mut scratch);
        for pf in [Prefetch::None, Prefetch::First, Prefetch::All] {
            let before = allocations();
            let hits = fib.lookup_batch(&names, &mut out, pf);
            let r = fib.lookup_batch_tlv(&tlvs, &mut out, pf, &mut scratch);
            let lin = fib.lookup_linear_batch(&names, &mut out, pf);
            let after = allocations();
            assert_eq!((hits, r.hits, lin), (names.len(), names.len(), names.len()));
            assert_eq!(
                after - before,
                0,
                "{strategy:?} {pf:?}: allocations in a batch"
            );
        }
    }
}

/// Interest/Data exchanges (LpPacket with a PitToken, then the Data),
/// steady state: PIT slots are reused, the Content Store is full and
/// evicts. Either one `Forwarder::process` call per packet or (`batched`)
/// groups of 16 exchanges, one `process_batch` (with every FIB level
/// prefetched) for the group's Interests and one for its Data. Returns
/// the allocations made by the Interests and by the Data after a
/// warm-up, and the exchanges counted.
fn exchange_allocations(batched: bool) -> (u64, u64, u64) {
    use nexthop_ndn::cs::CsConfig;
    use nexthop_ndn::fw::{Actions, Forwarder, FwConfig, PitMode};
    use nexthop_ndn::pit::ExactPitConfig;
    use nexthop_wire::ndn::{Data, Interest, LpPacket, Name, NameComponent};

    let rule = |k: usize| {
        Name::from_components([
            NameComponent::generic(format!("s{k}")),
            NameComponent::generic("d"),
        ])
    };
    let (fib, _) = Fib::build(
        Config::default(),
        (0..64).map(|k| (rule(k), [NextHop { face: 2, cost: 0 }])),
    )
    .unwrap();
    let mut fw = Forwarder::new(FwConfig {
        pit: PitMode::Exact(ExactPitConfig::default()),
        cs: Some(CsConfig {
            capacity_packets: 256,
            ..CsConfig::default()
        }),
        batch_prefetch: if batched {
            Prefetch::All
        } else {
            Prefetch::None
        },
        ..FwConfig::default()
    })
    .unwrap();
    let packets: Vec<(Vec<u8>, Vec<u8>)> = (0..3008u32)
        .map(|j| {
            let mut n = rule(j as usize % 64);
            n.push(&NameComponent::generic(format!("obj{j}")));
            n.push(&NameComponent::segment(0));
            let mut i = Interest::new(n.clone());
            i.nonce = Some(j);
            i.lifetime_ms = Some(4000);
            let lp = LpPacket {
                pit_token: Some(u64::from(j).to_be_bytes().to_vec()),
                ..LpPacket::wrap(i.to_wire())
            };
            let mut d = Data::new(n, vec![0xab; 100]);
            d.meta_info.freshness_period_ms = Some(10_000);
            d.sign_digest_sha256();
            (lp.to_wire(), d.to_wire())
        })
        .collect();
    let group = if batched { 16 } else { 1 };
    let mut out = Actions::new();
    let mut ib: Vec<(u32, &[u8])> = Vec::with_capacity(group);
    let mut db: Vec<(u32, &[u8])> = Vec::with_capacity(group);
    let (mut interests, mut data) = (0u64, 0u64);
    for (k, g) in packets.chunks(group).enumerate() {
        ib.clear();
        db.clear();
        ib.extend(g.iter().map(|(i, _)| (1u32, i.as_slice())));
        db.extend(g.iter().map(|(_, d)| (2u32, d.as_slice())));
        out.clear();
        let before = allocations();
        if batched {
            fw.process_batch(&fib, &ib, 0, &mut out);
        } else {
            fw.process(&fib, 1, ib[0].1, 0, &mut out);
        }
        let mid = allocations();
        assert_eq!(out.sends().len(), g.len(), "Interests upstream");
        out.clear();
        if batched {
            fw.process_batch(&fib, &db, 0, &mut out);
        } else {
            fw.process(&fib, 2, db[0].1, 0, &mut out);
        }
        let after = allocations();
        assert_eq!(out.sends().len(), g.len(), "Data to the consumer");
        // Warm-up: scratch buffers, the CS (256 packets) and the action
        // buffers grow during the first exchanges.
        if k * group >= 1008 {
            interests += mid - before;
            data += after - mid;
        }
    }
    assert_eq!(fw.counters().satisfied, packets.len() as u64);
    (interests, data, (packets.len() - 1008) as u64)
}

/// `Forwarder::process`: the decode path (borrowed views into the
/// forwarder's scratch Interest and Name) allocates nothing; what is left
/// is amortized table growth (the PIT's index and expiry heap, the
/// dead-nonce list: the clock stands still here, so the last two keep
/// growing), under 1 in 100 Interests and 1 in 10 Data. Before the views,
/// an exchange made about 12 allocations in decoding alone.
#[test]
fn forwarder_exchanges_decode_without_allocating() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (interests, data, n) = exchange_allocations(false);
    eprintln!(
        "allocations per exchange: Interest {:.2}, Data {:.2}",
        interests as f64 / n as f64,
        data as f64 / n as f64
    );
    assert!(
        interests * 100 <= n,
        "{interests} allocations for {n} Interests"
    );
    assert!(data * 10 <= n, "{data} allocations for {n} Data");
}

/// `Forwarder::process_batch` with prefetch decodes a batch into pools
/// the forwarder keeps (it made a `Vec` per batch and an owned name per
/// packet before): the same bound as one `process` call per packet.
#[test]
fn forwarder_batches_decode_without_allocating() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (interests, data, n) = exchange_allocations(true);
    eprintln!(
        "allocations per batched exchange: Interest {:.2}, Data {:.2}",
        interests as f64 / n as f64,
        data as f64 / n as f64
    );
    assert!(
        interests * 100 <= n,
        "{interests} allocations for {n} Interests"
    );
    assert!(data * 10 <= n, "{data} allocations for {n} Data");
}
