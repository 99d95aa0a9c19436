//! Untrusted routes files and FIB files: neither parser panics. A routes
//! file that parses builds a FIB whose file decodes to the same answers;
//! any bytes that decode as a FIB file can be looked up without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_ndn::routes::parse_routes;
use nexthop_ndn::{persist, Config, FibControl, NameBuf, NameView};

fuzz_target!(|data: &[u8]| {
    let probe = NameBuf::from_components(["a", "b", "c", "d"]).expect("valid");
    if let Ok((fib, _)) = persist::decode(data) {
        let _ = fib.lookup(&probe);
        let _ = fib.lookup_linear(&probe);
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
    let bytes = persist::encode(ctl.fib(), ctl.len() as u64);
    let (back, rules) = persist::decode(&bytes).expect("own encoding decodes");
    assert_eq!(rules as usize, ctl.len());
    for r in &routes {
        let mut q = r.name.clone();
        let _ = q.push(8, b"x");
        assert_eq!(back.lookup(&q), ctl.fib().lookup(&q));
        assert_eq!(back.lookup(&r.name), ctl.fib().lookup(&r.name));
    }
});
