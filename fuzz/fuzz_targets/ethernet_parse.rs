//! Untrusted frame bytes: the Ethernet view and the 5-tuple extractors never
//! panic; an accepted header re-emits to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_wire::{five_tuple, five_tuple_v6, EthernetFrame, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return;
    };
    assert_eq!(f.header_len() + f.payload().len(), data.len());
    let _ = (f.dst(), f.src(), f.vlan_ids(), f.ethertype());
    let r = EthernetRepr::parse(&f);
    let mut out = vec![0u8; r.buffer_len()];
    if r.emit(&mut out).is_ok() {
        assert_eq!(&out[..], &data[..f.header_len()]);
    }
    let _ = five_tuple(&f);
    let _ = five_tuple_v6(&f);
});
