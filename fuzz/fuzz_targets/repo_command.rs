//! Untrusted Repo command input: ndn-python-repo 0.3's command messages,
//! responses and pub-sub notify parameters decoded from arbitrary bytes
//! (whatever decodes must survive an encode/decode round trip), and the
//! Repo's command state driven by arbitrary notify and check Interests,
//! Data answering the Interests it sent (message bodies, segments with
//! arbitrary FinalBlockIds), store outcomes and the clock. Never panics,
//! never runs more inserts than its cap.
#![no_main]
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use nexthop_repo::command::{
    Action, CommandParam, CommandResponse, Commands, Config, NotifyParam,
};
use nexthop_wire::ndn::{Data, Interest, Name, NameComponent};

fn name(uri: &str) -> Name {
    Name::from_uri(uri).unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let cfg = Config {
        window: 3,
        max_inserts: 2,
        max_object_bytes: 4096,
        max_segments: 64,
        max_message_fetches: 4,
        max_processes: 8,
        ..Config::default()
    };
    let mut c = Commands::new(name("/repo"), vec![name("/repo"), name("/data")], cfg, 1);
    let mut now = Instant::now();
    let mut asked: Vec<Interest> = Vec::new();
    let mut rest = data;
    // Each item: a header byte (what in the low 3 bits), a length pair, the bytes.
    while let [h, l0, l1, tail @ ..] = rest {
        let len = (usize::from(*l0) << 8 | usize::from(*l1)).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        let actions = match h & 7 {
            0 => {
                if let Ok(p) = CommandParam::decode(bytes) {
                    assert_eq!(CommandParam::decode(&p.encode()), Ok(p));
                }
                if let Ok(r) = CommandResponse::decode(bytes) {
                    assert_eq!(CommandResponse::decode(&r.encode()), Ok(r));
                }
                if let Ok(n) = NotifyParam::decode(bytes) {
                    assert_eq!(NotifyParam::decode(&n.encode()), Ok(n));
                }
                Vec::new()
            }
            1 | 2 => {
                // A notify Interest: arbitrary parameters, or a well-formed
                // NotifyParam whose nonce is the bytes.
                let verb = if h & 8 == 0 { "insert" } else { "delete" };
                let mut i = Interest::new(name(&format!("/repo/{verb}/notify")));
                let params = if h & 7 == 1 {
                    bytes.to_vec()
                } else {
                    NotifyParam {
                        publisher_prefix: name("/client"),
                        nonce: bytes.to_vec(),
                        forwarding_hint: None,
                    }
                    .encode()
                };
                i.set_app_parameters(params);
                c.on_interest(&i, now).unwrap_or_default()
            }
            3 => {
                let verb = if h & 8 == 0 { "insert check" } else { "delete check" };
                let mut n = name("/repo");
                n.push(&NameComponent::generic(verb.as_bytes().to_vec()));
                n.push(&NameComponent::generic(bytes.to_vec()));
                c.on_interest(&Interest::new(n), now).unwrap_or_default()
            }
            4 | 5 if !asked.is_empty() => {
                // Answer one of the Interests the Repo sent.
                let i = asked.swap_remove(usize::from(*l0) % asked.len());
                let mut d = Data::new(i.name.clone(), bytes.to_vec());
                if h & 8 != 0 {
                    d.meta_info.final_block_id = Some(NameComponent::segment(u64::from(*l1)));
                }
                d.sign_digest_sha256();
                let w = d.to_wire();
                match Data::decode(&w) {
                    Ok(d) => c.on_data(&d, &w, now),
                    Err(_) => Vec::new(),
                }
            }
            _ => {
                now += Duration::from_millis(u64::from(*l1) * 20);
                c.poll(now)
            }
        };
        for a in actions {
            match a {
                Action::Send(w) => {
                    if let Ok(i) = Interest::decode(&w) {
                        if asked.len() < 256 {
                            asked.push(i);
                        }
                    }
                }
                Action::Store { process, packets, .. } => {
                    let r = if h & 16 == 0 { Ok(packets.len()) } else { Err(507) };
                    c.stored(&process, r, now);
                }
                Action::Delete { process, .. } => c.deleted(&process, Ok(usize::from(*l0)), now),
                Action::Register(_) | Action::Unregister(_) => {}
            }
        }
        assert!(c.inserts_running() <= 2);
        assert!(c.served().len() <= 2 + Config::default().max_registered);
    }
});
