//! Allocations on the daemon's receive path, counted by a counting global
//! allocator (this test binary only): `Core::receive` on an LpPacket
//! Interest with a PitToken and on the producer's Data reads the NDNLPv2
//! header and the packet as borrowed views and hands them to the
//! forwarder's scratch buffers, so in steady state what allocates is what
//! must outlive the datagram: the bytes of each packet sent (one buffer
//! each) plus amortized table growth.

use nexthop_ndnd::{Core, FaceInfo, NdndConfig};
use nexthop_testutil::alloc::{allocations, Counting};
use nexthop_wire::ndn::{Data, Interest, LpPacket, LpView, Name, NameComponent};

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONSUMER: u32 = 2;
const PRODUCER: u32 = 1;

fn face(port: u16) -> FaceInfo {
    FaceInfo {
        uri: format!("udp4://192.0.2.1:{port}"),
        local_uri: "udp4://192.0.2.2:6363".into(),
        local: false,
        mtu: None,
    }
}

/// Interest/Data exchanges through `Core::receive` (the single-threaded
/// daemon's path for every datagram): the consumer's Interest in an
/// LpPacket with a PitToken, forwarded to the producer; the producer's
/// Data with the PitToken the forwarder put on the Interest, back to the
/// consumer. After a warm-up (the Content Store full, PIT slots reused),
/// each packet received makes one allocation: the bytes of the packet it
/// sends, returned to the caller (under 0.1 more in amortized table
/// growth). Reading the packets and storing the Data allocate nothing.
/// (With a Content Store that is not full yet, each Data's copy into it
/// is one more.)
#[test]
fn receive_path_allocates_only_the_packets_it_sends() {
    // A Content Store smaller than the run, so that it is full and each
    // insert reuses an evicted packet's buffer.
    let mut c = Core::new(&NdndConfig {
        cs_packets: 256,
        ..NdndConfig::default()
    })
    .unwrap();
    c.face_opened(PRODUCER, face(1));
    c.face_opened(CONSUMER, face(2));
    let prefix = Name::from_uri("/p").unwrap();
    c.add_route(&prefix, PRODUCER, 0).unwrap();

    const N: u32 = 4000;
    let names: Vec<Name> = (0..N)
        .map(|k| {
            let mut n = prefix.clone();
            n.push(&NameComponent::generic(format!("obj{}", k % 500)));
            n.push(&NameComponent::segment(u64::from(k)));
            n
        })
        .collect();
    let interests: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let mut i = Interest::new(n.clone());
            i.nonce = Some(k as u32 ^ 0x5a5a_0000);
            i.lifetime_ms = Some(4000);
            LpPacket {
                pit_token: Some((k as u32).to_be_bytes().to_vec()),
                ..LpPacket::wrap(i.to_wire())
            }
            .to_wire()
        })
        .collect();
    let datas: Vec<Vec<u8>> = names
        .iter()
        .map(|n| {
            let mut d = Data::new(n.clone(), vec![7; 100]);
            d.sign_digest_sha256();
            d.to_wire()
        })
        .collect();

    let mut send: Vec<(u32, Vec<u8>)> = Vec::with_capacity(16);
    let (mut on_interest, mut on_data, mut exchanges) = (0u64, 0u64, 0u64);
    for k in 0..N as usize {
        let now = k as u64;
        send.clear();
        let before = allocations();
        c.receive(CONSUMER, false, &interests[k], now, &mut send);
        let mid = allocations();
        assert_eq!(send.len(), 1, "exchange {k}: the Interest goes upstream");
        assert_eq!(send[0].0, PRODUCER);
        // The producer echoes the forwarder's PitToken (test-side work,
        // not counted).
        let token = LpView::parse(&send[0].1)
            .ok()
            .and_then(|lp| lp.pit_token.map(<[u8]>::to_vec));
        let reply = match token {
            Some(t) => LpPacket {
                pit_token: Some(t),
                ..LpPacket::wrap(datas[k].clone())
            }
            .to_wire(),
            None => datas[k].clone(),
        };
        send.clear();
        let again = allocations();
        c.receive(PRODUCER, false, &reply, now, &mut send);
        let after = allocations();
        assert_eq!(send.len(), 1, "exchange {k}: the Data goes back");
        assert_eq!(send[0].0, CONSUMER);
        let echoed = LpView::parse(&send[0].1).ok().and_then(|lp| lp.pit_token);
        assert_eq!(echoed, Some(&(k as u32).to_be_bytes()[..]));
        if k >= 1000 {
            on_interest += mid - before;
            on_data += after - again;
            exchanges += 1;
        }
    }
    let per_interest = on_interest as f64 / exchanges as f64;
    let per_data = on_data as f64 / exchanges as f64;
    eprintln!("allocations per Interest {per_interest:.3}, per Data {per_data:.3}");
    assert!(
        per_interest < 1.1 && per_data < 1.1,
        "{per_interest} {per_data}"
    );
}
