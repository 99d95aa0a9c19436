//! Untrusted OpenFlow bytes from a switch: framing and decoding never
//! panic; a decoded message re-encodes to bytes that decode to it again;
//! the backend's controller handles whatever decodes without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_openflow::codec::{frame_len, Message};
use nexthop_openflow::{BackendConfig, Controller};
use nexthop_sdf::app::{L2Config, L2Switch};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let cfg = BackendConfig { ports: vec![1, 2, 3], ..BackendConfig::default() };
    let mut ctl = Controller::new(L2Switch::new(L2Config::default()), &cfg).expect("config");
    let mut out = Vec::new();
    ctl.connected(&mut out);
    let mut at = 0;
    while let Ok(Some(len)) = frame_len(&data[at..]) {
        let Some(msg) = data.get(at..at + len) else { break };
        if let Ok(m) = Message::decode(msg) {
            let again = m.encode().expect("a decoded message fits 64 KiB");
            assert_eq!(Message::decode(&again).as_ref(), Ok(&m));
            ctl.handle(m, Duration::ZERO, &mut out);
        }
        at += len;
    }
    ctl.tick(Duration::from_secs(1000), &mut out);
});
