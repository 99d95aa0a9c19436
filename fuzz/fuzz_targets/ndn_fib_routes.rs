//! Untrusted routes files and FIB files: neither parser panics. A routes
//! file that parses builds a FIB whose file decodes to the same answers,
//! and the bulk build (`Fib::build`) of the same routes answers the same;
//! any bytes that decode as a FIB file can be looked up without panicking;
//! the bytes looked up as a raw name TLV (`lookup_batch_tlv`) never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_ndn::routes::parse_routes;
use nexthop_ndn::{persist, BatchScratch, Config, Fib, FibControl, NameBuf, NameView, Prefetch};

fuzz_target!(|data: &[u8]| {
    let probe = NameBuf::from_components(["a", "b", "c", "d"]).expect("valid");
    if let Ok((fib, _)) = persist::decode(data) {
        let _ = fib.lookup(&probe);
        let _ = fib.lookup_linear(&probe);
    }
    {
        let (fib, _) = Fib::build(Config::default(), [(probe.clone(), [nexthop_ndn::NextHop { face: 1, cost: 0 }])])
            .expect("one valid rule");
        let mut out = [None; 2];
        let _ = fib.lookup_batch_tlv(&[data, probe.tlv()], &mut out, Prefetch::All, &mut BatchScratch::new());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(routes) = parse_routes(text) else {
        return;
    };
    let k = routes.iter().map(|r| r.name.component_count()).max().unwrap_or(1).clamp(1, 64);
    let Ok(mut ctl) = FibControl::new(Config { max_components: k, ..Config::default() }) else {
        return;
    };
    for r in &routes {
        if ctl.insert(&r.name, &r.hops).is_err() {
            return;
        }
    }
    let cfg = Config { max_components: k, ..Config::default() };
    let (bulk, _) = Fib::build(cfg, routes.iter().map(|r| (&r.name, &r.hops))).expect("same routes as the control build");
    let bytes = persist::encode(ctl.fib(), ctl.len() as u64);
    let (back, rules) = persist::decode(&bytes).expect("own encoding decodes");
    assert_eq!(rules as usize, ctl.len());
    for r in &routes {
        let mut q = r.name.clone();
        let _ = q.push(8, b"x");
        assert_eq!(back.lookup(&q), ctl.fib().lookup(&q));
        assert_eq!(back.lookup(&r.name), ctl.fib().lookup(&r.name));
        let want = ctl.fib().lookup(&q).map(|m| (m.len, ctl.fib().next_hops(m.nh).to_vec()));
        assert_eq!(bulk.lookup(&q).map(|m| (m.len, bulk.next_hops(m.nh).to_vec())), want);
    }
});
