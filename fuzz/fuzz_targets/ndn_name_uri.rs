//! Untrusted name URIs: parsing never panics; a parsed name prints to a
//! canonical URI that parses back to the same name and prints identically.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_wire::ndn::Name;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(n) = Name::from_uri(s) else {
        return;
    };
    let printed = n.to_string();
    let back = Name::from_uri(&printed).expect("canonical URI must parse");
    assert_eq!(back, n);
    assert_eq!(back.to_string(), printed);
    assert_eq!(Name::from_wire(&n.to_wire()).expect("wire form must decode"), n);
});
