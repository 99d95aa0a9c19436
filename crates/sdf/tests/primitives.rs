//! The arithmetic primitives on real IPv4 and IPv6 frames: the incremental
//! checksum equals a full recomputation (RFC 1624 eqn. 3, corners
//! included), TTL / hop limit 0 and 1 expire the frame untouched, VLAN tags
//! move the offsets, and a cached router decision applies them.

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, Outcome, Primitive,
};
use nexthop_wire::checksum::checksum_update;
use nexthop_wire::Ipv4Packet;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The IPv4 header checksum computed from scratch (checksum field as 0).
fn full_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, p) in h.chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([p[0], p[1]]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn eth(vlans: usize, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    for v in 0..vlans {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 10 + v as u8]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn v4_frame(r: &mut impl Rng, vlans: usize, ihl: u8, ttl: u8) -> Vec<u8> {
    let mut f = eth(vlans, 0x0800);
    let hl = usize::from(ihl) * 4;
    let mut h: Vec<u8> = (0..hl).map(|_| r.gen()).collect();
    h[0] = 0x40 | ihl;
    let total = (hl + 8) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6] &= 0x1f;
    h[8] = ttl;
    h[9] = 17;
    let c = full_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0u8; 8]);
    f
}

fn v6_frame(vlans: usize, hop_limit: u8) -> Vec<u8> {
    let mut f = eth(vlans, 0x86DD);
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&8u16.to_be_bytes());
    h[6] = 17;
    h[7] = hop_limit;
    h[8] = 0x20;
    h[24] = 0x20;
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0u8; 8]);
    f
}

fn ttl_actions(frame: &[u8]) -> Actions {
    let mut a = Actions::output(1);
    a.push_primitive(Primitive::ip_ttl_for(frame).expect("an IP frame"))
        .unwrap();
    a
}

#[test]
fn ipv4_incremental_checksum_equals_full_recomputation() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(7);
    for i in 0..20_000 {
        let vlans = i % 3;
        let ihl = r.gen_range(5..=15);
        let ttl = r.gen_range(2..=255);
        let f = v4_frame(&mut r, vlans, ihl, ttl);
        let ip = 14 + 4 * vlans;
        let a = ttl_actions(&f);
        let mut out = f.clone();
        assert_eq!(a.apply(&mut out), Outcome::Forward);
        let hl = usize::from(ihl) * 4;
        let h = &out[ip..ip + hl];
        assert_eq!(h[8], ttl - 1);
        assert_eq!(
            u16::from_be_bytes([h[10], h[11]]),
            full_checksum(h),
            "frame {i}"
        );
        assert!(Ipv4Packet::new_checked(&out[ip..]).unwrap().checksum_ok());
        // Nothing else changed.
        let diff: Vec<usize> = (0..f.len()).filter(|&j| f[j] != out[j]).collect();
        assert!(
            diff.iter().all(|&j| (ip + 8..ip + 12).contains(&j)),
            "{diff:?}"
        );
    }
}

#[test]
fn ttl_zero_and_one_expire_untouched_two_forwards_with_one() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(8);
    for ttl in [0u8, 1] {
        let f = v4_frame(&mut r, 0, 5, ttl);
        let mut out = f.clone();
        assert_eq!(ttl_actions(&f).apply(&mut out), Outcome::Expired);
        assert_eq!(out, f);
        let f = v6_frame(1, ttl);
        let mut out = f.clone();
        assert_eq!(ttl_actions(&f).apply(&mut out), Outcome::Expired);
        assert_eq!(out, f);
    }
    let f = v4_frame(&mut r, 0, 5, 2);
    let mut out = f.clone();
    assert_eq!(ttl_actions(&f).apply(&mut out), Outcome::Forward);
    assert_eq!(out[22], 1);
    assert!(Ipv4Packet::new_checked(&out[14..]).unwrap().checksum_ok());
}

#[test]
fn ipv6_hop_limit_is_decremented_behind_vlan_tags() {
    for vlans in 0..=2 {
        let f = v6_frame(vlans, 64);
        let mut out = f.clone();
        assert_eq!(ttl_actions(&f).apply(&mut out), Outcome::Forward);
        let at = 14 + 4 * vlans + 7;
        assert_eq!(out[at], 63);
        let diff: Vec<usize> = (0..f.len()).filter(|&j| f[j] != out[j]).collect();
        assert_eq!(diff, vec![at]);
    }
    assert_eq!(Primitive::ip_ttl_for(&eth(0, 0x0806)), None);
    assert_eq!(Primitive::ip_ttl_for(&v6_frame(0, 5)[..40]), None);
}

#[test]
fn checksum_corners_match_full_recomputation() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(9);
    // A header whose checksum after the decrement is 0x0000, and one whose
    // checksum before it is 0x0000: choose the identification field so the
    // sum of the words comes out 0xFFFF.
    for ttl_in_sum in [63u8, 64] {
        let f = v4_frame(&mut r, 0, 5, 64);
        let mut h = f[14..34].to_vec();
        h[4..6].copy_from_slice(&[0, 0]);
        h[8] = ttl_in_sum;
        let s = !full_checksum(&h);
        h[4..6].copy_from_slice(&(!s).to_be_bytes());
        h[8] = 64;
        let c = full_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut frame = f[..14].to_vec();
        frame.extend_from_slice(&h);
        let mut out = frame.clone();
        assert_eq!(ttl_actions(&frame).apply(&mut out), Outcome::Forward);
        let got = u16::from_be_bytes([out[24], out[25]]);
        assert_eq!(got, full_checksum(&out[14..34]));
        if ttl_in_sum == 63 {
            assert_eq!(got, 0x0000);
        } else {
            assert_eq!(c, 0x0000);
        }
    }
    for hc in [0x0000, 0x0001, 0xfffe, 0xffff] {
        for (old, new) in [(0x4011, 0x3f11), (0x0111, 0x0011), (0x0100, 0x0000)] {
            assert_ne!(checksum_update(hc, old, new), 0xffff, "{hc:04x}");
        }
    }
}

#[test]
fn a_cached_router_decision_marks_only_the_destination_and_still_fixes_ttl_and_checksum() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(10);
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let route = c.new_state_id().unwrap();
    let first = v4_frame(&mut r, 0, 5, 64);
    // Marks: EtherType and the destination address, nothing else.
    let mut mask = Mask::new();
    mask.mark_bytes(12, 2).unwrap();
    mask.mark_bytes(14 + 16, 4).unwrap();
    let mut actions = ttl_actions(&first);
    actions.set_bytes(0, &[0x02, 0xaa, 0, 0, 0, 9]).unwrap();
    let d = Decision {
        mask,
        states: [route].as_slice().into(),
        actions,
    };
    let key = HeaderKey::from_frame(&first, 0);
    let Installed::Cached(_) = c.install(&key, &d).unwrap() else {
        panic!("cached")
    };
    for _ in 0..200 {
        // Same destination, everything else in the header different.
        let (ihl, ttl) = (r.gen_range(5..=15), r.gen_range(0..=255));
        let mut f = v4_frame(&mut r, 0, ihl, ttl);
        f[30..34].copy_from_slice(&first[30..34]);
        let ck = {
            let hl = usize::from(f[14] & 0xf) * 4;
            full_checksum(&f[14..14 + hl])
        };
        f[24..26].copy_from_slice(&ck.to_be_bytes());
        let hit = c.lookup(&HeaderKey::from_frame(&f, 3)).expect("hit");
        let mut out = f.clone();
        let ttl = f[22];
        match c.apply(hit, &mut out).unwrap() {
            Outcome::Expired => {
                assert!(ttl <= 1);
                assert_eq!(out, f);
            }
            Outcome::Forward => {
                assert_eq!(out[22], ttl - 1);
                assert_eq!(&out[..6], &[0x02, 0xaa, 0, 0, 0, 9]);
                assert!(Ipv4Packet::new_checked(&out[14..]).unwrap().checksum_ok());
            }
            Outcome::TooShort => panic!("matched frames are long enough"),
        }
    }
}
