//! The cache's correctness oracle for the built-in L2 learning switch: the
//! same app run on every packet with no cache must give identical output
//! (ports and bytes) for every packet of random and adversarial traffic,
//! while MACs are learned, move, time out and the cache fills, and the
//! revocations those cause must be exactly the affected decisions.

use std::time::Duration;

use nexthop_sdf::app::{Emits, L2Config, L2Switch, Ports, Switch};
use nexthop_sdf::Config;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const PORTS: [u16; 4] = [0, 1, 2, 3];

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i]
}

fn eth(dst: [u8; 6], src: [u8; 6], len: usize, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; len.max(14)];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn pair(cfg: Config, l2: L2Config) -> (Switch<L2Switch>, Switch<L2Switch>) {
    let ports = Ports::physical(&PORTS);
    (
        Switch::new(L2Switch::new(l2), cfg, ports.clone(), true).unwrap(),
        Switch::new(L2Switch::new(l2), cfg, ports, false).unwrap(),
    )
}

/// One packet of random or adversarial traffic from `hosts` (each at its
/// current port).
fn packet(rng: &mut Xoshiro256PlusPlus, hosts: &[u16]) -> (u16, Vec<u8>) {
    let n = hosts.len() as u8;
    let s = rng.gen_range(0..n);
    let in_port = hosts[usize::from(s)];
    let dst = match rng.gen_range(0..20) {
        0 => [0xff; 6],
        1 => [0x01, 0x00, 0x5e, 0, 0, rng.gen()],
        2 => {
            let mut m: [u8; 6] = rng.gen();
            m[0] &= 0xfe;
            m
        }
        _ => mac(rng.gen_range(0..n)),
    };
    let src = match rng.gen_range(0..40) {
        0 => [0x01, 0, 0, 0, 0, rng.gen()],
        _ => mac(s),
    };
    let f = match rng.gen_range(0..30) {
        // Runts and frames cut inside the Ethernet header.
        0 => (0..rng.gen_range(0..14)).map(|_| rng.gen()).collect(),
        // Anything at all, from any port.
        1 => {
            let f = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
            return (PORTS[rng.gen_range(0..4)], f);
        }
        _ => eth(dst, src, rng.gen_range(14..300), rng.gen()),
    };
    (in_port, f)
}

fn run_oracle(seed: u64, cfg: Config, l2: L2Config, packets: usize) -> (Switch<L2Switch>, u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut cached, mut plain) = pair(cfg, l2);
    let mut hosts: Vec<u16> = (0..24).map(|_| PORTS[rng.gen_range(0..4)]).collect();
    let mut now = Duration::ZERO;
    let mut moves = 0;
    for i in 0..packets {
        if rng.gen_range(0..200) == 0 {
            let h = rng.gen_range(0..hosts.len());
            hosts[h] = PORTS[rng.gen_range(0..4)];
            moves += 1;
        }
        now += Duration::from_millis(rng.gen_range(0..5));
        cached.tick(now);
        plain.tick(now);
        let (in_port, f) = packet(&mut rng, &hosts);
        let a: Emits = cached.process(in_port, &f);
        let b: Emits = plain.process(in_port, &f);
        assert_eq!(
            a, b,
            "packet {i} (seed {seed}) from port {in_port}: {f:02x?}"
        );
    }
    (cached, moves)
}

#[test]
fn cached_l2_switch_equals_the_app_on_every_packet() {
    let l2 = L2Config {
        timeout: Duration::from_secs(20),
        max_macs: 1 << 10,
    };
    for seed in 0..4 {
        let (sw, _) = run_oracle(seed, Config::default(), l2, 20_000);
        let c = *sw.cache().counters();
        assert!(
            sw.counters().hits > 12_000,
            "the cache answered {:?}",
            sw.counters()
        );
        assert!(c.revocations > 100, "revocations {c:?}");
        assert!(sw.app().moves() > 0 && sw.app().expired() > 0);
    }
}

#[test]
fn cached_l2_switch_equals_the_app_at_the_caps() {
    // A tiny cache, few masks, few bindings: evictions, refusals and
    // uncacheable decisions everywhere.
    let cfg = Config {
        capacity: 16,
        front_slots: 8,
        max_masks: 2,
        ..Config::default()
    };
    let l2 = L2Config {
        timeout: Duration::from_millis(700),
        max_macs: 12,
    };
    for seed in 10..14 {
        let (sw, _) = run_oracle(seed, cfg, l2, 20_000);
        assert!(sw.cache().counters().evictions > 0);
        // Past the binding cap decisions are sent without marks.
        assert!(sw.cache().counters().not_cached_no_deps > 1000);
    }
}

#[test]
fn mac_move_revokes_exactly_the_decisions_to_and_from_it() {
    let (mut sw, _) = pair(Config::default(), L2Config::default());
    let (a, b, c) = (mac(1), mac(2), mac(3));
    // Learn A on 1, B on 2, C on 3.
    sw.process(1, &eth([0xff; 6], a, 60, 0));
    sw.process(2, &eth([0xff; 6], b, 60, 0));
    sw.process(3, &eth([0xff; 6], c, 60, 0));
    let flows = [(1, a, b), (2, b, a), (3, c, b), (2, b, c)];
    for &(p, s, d) in &flows {
        sw.process(p, &eth(d, s, 60, 0));
    }
    let before = *sw.cache().counters();
    for &(p, s, d) in &flows {
        sw.process(p, &eth(d, s, 60, 1));
    }
    assert_eq!(
        sw.cache().counters().misses,
        before.misses,
        "all four cached"
    );
    let len = sw.cache().len();
    // A moves to port 3.
    let e = sw.process(3, &eth(b, a, 60, 2));
    assert_eq!(e[0].ports.as_slice(), &[2]);
    assert_eq!(sw.app().moves(), 1);
    assert_eq!(sw.app().port_of(a), Some(3));
    // Revoked: A→B and B→A, and A's broadcast on 1; C↔B kept.
    let revoked = sw.cache().counters().revocations - before.revocations;
    assert_eq!(revoked, 3);
    assert_eq!(sw.cache().len(), len - 3 + 1);
    let misses = sw.cache().counters().misses;
    sw.process(3, &eth(b, c, 60, 3));
    sw.process(2, &eth(c, b, 60, 3));
    assert_eq!(sw.cache().counters().misses, misses, "C<->B still cached");
    let e = sw.process(2, &eth(a, b, 60, 3));
    assert_eq!(e[0].ports.as_slice(), &[3], "B->A goes to A's new port");
}

#[test]
fn timeout_revokes_the_bindings_decisions() {
    let l2 = L2Config {
        timeout: Duration::from_secs(10),
        max_macs: 100,
    };
    let (mut sw, _) = pair(Config::default(), l2);
    let (a, b) = (mac(1), mac(2));
    sw.process(1, &eth([0xff; 6], a, 60, 0));
    sw.process(2, &eth(a, b, 60, 0));
    assert_eq!(sw.process(2, &eth(a, b, 60, 0))[0].ports.as_slice(), &[1]);
    sw.tick(Duration::from_secs(9));
    assert_eq!(sw.app().expired(), 0);
    sw.tick(Duration::from_secs(10));
    // A and B expire.
    assert_eq!(sw.app().expired(), 2);
    assert_eq!(sw.cache().len(), 0);
    // A is unknown again: B's frame to A is flooded.
    assert_eq!(
        sw.process(2, &eth(a, b, 60, 0))[0].ports.as_slice(),
        &[0, 1, 3]
    );
}
