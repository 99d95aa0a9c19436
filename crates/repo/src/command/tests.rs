use super::*;

fn n(uri: &str) -> Name {
    Name::from_uri(uri).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// What python-ndn 0.5.2 writes for `PutfileClient.insert_file`'s command:
/// name /data/f, empty ForwardingHint and RegisterPrefix, blocks 0..=2,
/// process id 01020304, CheckPrefix /client.
const PUTFILE_PARAM: &str =
    "0709080464617461080166d300cc0100cd0102ce0401020304d400d50a07080806636c69656e74";
/// RepoCommandResponse(process_id=01020304, status_code=200, insert_num=3).
const RESPONSE_200: &str = "ce0401020304d001c8d10103";
/// NotifyAppParam(publisher_prefix=/client, notify_nonce=aabbccdd).
const NOTIFY: &str = "07080806636c69656e748004aabbccdd";

#[test]
fn decodes_python_ndn_command_bytes_and_reencodes_them() {
    let p = CommandParam::decode(&hex(PUTFILE_PARAM)).unwrap();
    assert_eq!(p.name, Some(n("/data/f")));
    assert_eq!(p.forwarding_hint, None);
    assert_eq!(p.start_block_id, Some(0));
    assert_eq!(p.end_block_id, Some(2));
    assert_eq!(p.process_id.as_deref(), Some(&[1u8, 2, 3, 4][..]));
    assert_eq!(p.register_prefix, None);
    assert_eq!(p.check_prefix, Some(n("/client")));
    // Empty nested models are not written back; the rest is byte-exact.
    assert_eq!(
        p.encode(),
        hex("0709080464617461080166cc0100cd0102ce0401020304d50a07080806636c69656e74")
    );
    let r = CommandResponse {
        process_id: Some(vec![1, 2, 3, 4]),
        status_code: Some(200),
        insert_num: Some(3),
        ..CommandResponse::default()
    };
    assert_eq!(r.encode(), hex(RESPONSE_200));
    assert_eq!(CommandResponse::decode(&hex(RESPONSE_200)).unwrap(), r);
    let np = NotifyParam::decode(&hex(NOTIFY)).unwrap();
    assert_eq!(np.publisher_prefix, n("/client"));
    assert_eq!(np.nonce, vec![0xaa, 0xbb, 0xcc, 0xdd]);
    assert_eq!(np.encode(), hex(NOTIFY));
}

#[test]
fn malformed_command_bytes_are_errors_not_panics() {
    // Duplicate field, unknown critical type, truncation, missing nonce.
    assert_eq!(
        CommandParam::decode(&hex("ce0101ce0102")),
        Err(CommandError::Duplicate(206))
    );
    assert_eq!(
        CommandParam::decode(&hex("0100")),
        Err(CommandError::UnknownCritical(1))
    );
    assert!(CommandParam::decode(&hex("cc05")).is_err());
    assert!(
        CommandParam::decode(&hex("cc03010203")).is_err(),
        "3-byte NNI"
    );
    assert_eq!(
        NotifyParam::decode(&hex("07080806636c69656e74")),
        Err(CommandError::Missing("notify nonce"))
    );
    assert!(CommandParam::decode(&hex("d3020800")).is_err());
    // An unknown non-critical field is skipped.
    assert_eq!(
        CommandParam::decode(&hex("fd01f400ce0109"))
            .unwrap()
            .process_id,
        Some(vec![9])
    );
}

struct Harness {
    c: Commands,
    now: Instant,
}

fn data_wire(name: &Name, content: &[u8], last: Option<u64>) -> (Data, Vec<u8>) {
    let mut d = Data::new(name.clone(), content.to_vec());
    d.meta_info.final_block_id = last.map(NameComponent::segment);
    d.sign_digest_sha256();
    let w = d.to_wire();
    (Data::decode(&w).unwrap(), w)
}

fn sent_interests(acts: &[Action]) -> Vec<Interest> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Send(w) => Interest::decode(w).ok(),
            _ => None,
        })
        .collect()
}

fn sent_data(acts: &[Action]) -> Vec<Data> {
    acts.iter()
        .filter_map(|a| match a {
            Action::Send(w) => Data::decode(w).ok(),
            _ => None,
        })
        .collect()
}

impl Harness {
    fn new(cfg: Config) -> Self {
        Harness {
            c: Commands::new(n("/repo"), vec![n("/repo"), n("/data")], cfg, 7),
            now: Instant::now(),
        }
    }

    /// Publish `param` on `verb`'s topic: the notify Interest, the message
    /// fetch answered, and the actions that follow (acknowledgement last).
    fn publish(&mut self, verb: &str, param: &[u8], nonce: u8) -> Vec<Action> {
        let mut i = Interest::new(n(&format!("/repo/{verb}/notify")));
        let np = NotifyParam {
            publisher_prefix: n("/client"),
            nonce: vec![nonce],
            forwarding_hint: None,
        };
        i.set_app_parameters(np.encode());
        let acts = self
            .c
            .on_interest(&i, self.now)
            .expect("a command Interest");
        let asked = sent_interests(&acts);
        assert_eq!(asked.len(), 1);
        let mut want = n(&format!("/client/msg/repo/{verb}"));
        want.push(&NameComponent::generic(vec![nonce]));
        assert_eq!(asked[0].name, want);
        let (d, w) = data_wire(&asked[0].name, param, None);
        let out = self.c.on_data(&d, &w, self.now);
        let acks = sent_data(&out);
        assert_eq!(acks.last().unwrap().name, i.name, "acknowledged");
        out
    }

    fn check(&mut self, verb: &str, pid: &[u8]) -> CommandResponse {
        let p = CommandParam {
            process_id: Some(pid.to_vec()),
            ..CommandParam::default()
        };
        let mut name = n(&format!("/repo/{verb} check"));
        name.push(&NameComponent::generic(p.encode()));
        let acts = self.c.on_interest(&Interest::new(name), self.now).unwrap();
        let d = sent_data(&acts);
        CommandResponse::decode(d[0].content.as_deref().unwrap()).unwrap()
    }
}

fn insert_param(name: &str, start: Option<u64>, end: Option<u64>, pid: &[u8]) -> Vec<u8> {
    CommandParam {
        name: Some(n(name)),
        start_block_id: start,
        end_block_id: end,
        process_id: Some(pid.to_vec()),
        ..CommandParam::default()
    }
    .encode()
}

/// Answer every segment Interest in `acts` (recursively, as the window
/// moves) with a Data of that name; returns the Store action.
fn serve_all(h: &mut Harness, acts: Vec<Action>, last: u64) -> Option<Action> {
    let mut queue = sent_interests(&acts);
    let mut store = acts.into_iter().find(|a| matches!(a, Action::Store { .. }));
    while let Some(i) = queue.pop() {
        let (d, w) = data_wire(&i.name, i.name.to_string().as_bytes(), Some(last));
        let out = h.c.on_data(&d, &w, h.now);
        queue.extend(sent_interests(&out));
        if let Some(s) = out.into_iter().find(|a| matches!(a, Action::Store { .. })) {
            store = Some(s);
        }
    }
    store
}

#[test]
fn insert_fetches_every_segment_within_the_window_and_stores_once_complete() {
    let cfg = Config {
        window: 4,
        ..Config::default()
    };
    let mut h = Harness::new(cfg);
    let acts = h.publish(
        "insert",
        &insert_param("/data/f", Some(0), Some(9), b"p1"),
        1,
    );
    assert_eq!(sent_interests(&acts).len(), 4, "window of 4");
    assert_eq!(h.check("insert", b"p1").status_code, Some(300));
    let Some(Action::Store {
        process,
        prefix,
        packets,
    }) = serve_all(&mut h, acts, 9)
    else {
        panic!("no Store")
    };
    assert_eq!((process.as_slice(), prefix), (&b"p1"[..], n("/data/f")));
    assert_eq!(packets.len(), 10);
    for (i, p) in packets.iter().enumerate() {
        let d = Data::decode(p).unwrap();
        assert_eq!(d.name.to_string(), format!("/data/f/seg={i}"));
    }
    assert_eq!(
        h.check("insert", b"p1").status_code,
        Some(300),
        "until stored"
    );
    h.c.stored(b"p1", Ok(10), h.now);
    let r = h.check("insert", b"p1");
    assert_eq!((r.status_code, r.insert_num), (Some(200), Some(10)));
    assert_eq!(h.c.inserts_running(), 0);
}

#[test]
fn the_default_window_asks_for_default_window_segments_at_once() {
    let mut h = Harness::new(Config::default());
    let acts = h.publish(
        "insert",
        &insert_param("/data/w", Some(0), Some(999), b"pw"),
        1,
    );
    assert_eq!(sent_interests(&acts).len(), DEFAULT_WINDOW);
    assert_eq!(DEFAULT_WINDOW, 128);
}

#[test]
fn a_vanished_client_abandons_the_insert_after_its_tries() {
    let mut h = Harness::new(Config::default());
    let acts = h.publish(
        "insert",
        &insert_param("/data/v", Some(0), Some(5), b"pv"),
        2,
    );
    // Segment 0 arrives, then the client goes silent.
    let first = sent_interests(&acts)[0].clone();
    let (d, w) = data_wire(&first.name, b"x", Some(5));
    h.c.on_data(&d, &w, h.now);
    let mut retransmitted = 0;
    for _ in 0..3 {
        h.now += Duration::from_millis(1001);
        let out = h.c.poll(h.now);
        assert!(!out.iter().any(|a| matches!(a, Action::Store { .. })));
        retransmitted += sent_interests(&out).len();
    }
    assert!(retransmitted > 0);
    assert_eq!(h.check("insert", b"pv").status_code, Some(400));
    assert_eq!(h.c.inserts_running(), 0);
    assert!(h.c.next_deadline().is_some(), "the status expires later");
    h.now += Duration::from_secs(61);
    h.c.poll(h.now);
    assert_eq!(h.check("insert", b"pv").status_code, Some(404));
}

#[test]
fn without_an_end_the_final_block_id_bounds_the_object() {
    let mut h = Harness::new(Config::default());
    let acts = h.publish("insert", &insert_param("/data/e", Some(0), None, b"pe"), 3);
    assert_eq!(
        sent_interests(&acts).len(),
        1,
        "one Interest until the end is known"
    );
    let Some(Action::Store { packets, .. }) = serve_all(&mut h, acts, 2) else {
        panic!("no Store")
    };
    assert_eq!(packets.len(), 3);
}

#[test]
fn refused_commands_get_400_and_unknown_processes_404() {
    let mut h = Harness::new(Config {
        max_segments: 100,
        ..Config::default()
    });
    // Outside the served prefixes, inside the command space, end < start,
    // too many segments, no name.
    for (i, (name, s, e)) in [
        ("/elsewhere/f", Some(0), Some(1)),
        ("/repo/insert/x", Some(0), Some(1)),
        ("/data/f", Some(5), Some(1)),
        ("/data/f", Some(0), Some(100)),
    ]
    .into_iter()
    .enumerate()
    {
        let pid = [b'r', i as u8];
        let acts = h.publish("insert", &insert_param(name, s, e, &pid), 10 + i as u8);
        assert!(sent_interests(&acts).is_empty(), "{name}");
        assert_eq!(h.check("insert", &pid).status_code, Some(400), "{name}");
    }
    let no_name = CommandParam {
        process_id: Some(b"nn".to_vec()),
        ..CommandParam::default()
    };
    h.publish("insert", &no_name.encode(), 20);
    assert_eq!(h.check("insert", b"nn").status_code, Some(400));
    // Garbage: acknowledged, nothing recorded, counted.
    h.publish("insert", &[0xff, 0xff], 21);
    assert_eq!(h.check("insert", b"zz").status_code, Some(404));
    assert!(h.c.counters().malformed >= 2);
    // A check whose parameter does not decode.
    let mut name = n("/repo/insert check");
    name.push(&NameComponent::generic(vec![0x01]));
    let acts = h.c.on_interest(&Interest::new(name), h.now).unwrap();
    let d = sent_data(&acts);
    let r = CommandResponse::decode(d[0].content.as_deref().unwrap()).unwrap();
    assert_eq!(r.status_code, Some(403));
    // Non-command names are left to the store.
    assert!(h
        .c
        .on_interest(&Interest::new(n("/data/f/seg=0")), h.now)
        .is_none());
}

#[test]
fn inserts_over_the_cap_get_503_and_oversized_objects_are_abandoned() {
    let mut h = Harness::new(Config {
        max_inserts: 1,
        max_object_bytes: 200,
        window: 1,
        ..Config::default()
    });
    let acts = h.publish(
        "insert",
        &insert_param("/data/a", Some(0), Some(9), b"a"),
        30,
    );
    h.publish(
        "insert",
        &insert_param("/data/b", Some(0), Some(1), b"b"),
        31,
    );
    assert_eq!(h.check("insert", b"b").status_code, Some(503));
    // Each segment is ~60 bytes: the fourth passes 200 bytes.
    assert!(serve_all(&mut h, acts, 9).is_none());
    assert_eq!(h.check("insert", b"a").status_code, Some(400));
    assert_eq!(h.c.inserts_running(), 0);
}

#[test]
fn a_repeated_notify_nonce_is_fetched_once() {
    let mut h = Harness::new(Config::default());
    let np = NotifyParam {
        publisher_prefix: n("/client"),
        nonce: vec![9],
        forwarding_hint: Some(n("/hint")),
    };
    let mut i = Interest::new(n("/repo/delete/notify"));
    i.set_app_parameters(np.encode());
    let first = h.c.on_interest(&i, h.now).unwrap();
    let asked = sent_interests(&first);
    assert_eq!(asked[0].forwarding_hint, vec![n("/hint")]);
    assert!(h.c.on_interest(&i, h.now).unwrap().is_empty());
    // A notify whose parameters digest is wrong is ignored.
    let mut bad = i.clone();
    bad.app_parameters = Some(vec![1, 2, 3]);
    assert!(h.c.on_interest(&bad, h.now).unwrap().is_empty());
}

#[test]
fn delete_reports_the_count_from_the_store() {
    let mut h = Harness::new(Config::default());
    let p = CommandParam {
        name: Some(n("/data/f")),
        process_id: Some(b"d".to_vec()),
        ..CommandParam::default()
    };
    let acts = h.publish("delete", &p.encode(), 40);
    assert!(acts.contains(&Action::Delete {
        process: b"d".to_vec(),
        name: n("/data/f"),
        start: 0,
        end: u64::MAX,
    }));
    assert_eq!(h.check("delete", b"d").status_code, Some(300));
    h.c.deleted(b"d", Ok(3), h.now);
    let r = h.check("delete", b"d");
    assert_eq!((r.status_code, r.delete_num), (Some(200), Some(3)));
    // The insert table is separate.
    assert_eq!(h.check("insert", b"d").status_code, Some(404));
}

#[test]
fn an_insert_overlapping_a_running_one_gets_503() {
    let mut h = Harness::new(Config::default());
    h.publish(
        "insert",
        &insert_param("/data/x", Some(0), Some(3), b"x1"),
        50,
    );
    h.publish(
        "insert",
        &insert_param("/data/x", Some(0), Some(3), b"x2"),
        51,
    );
    h.publish("insert", &insert_param("/data/x/y", None, None, b"x3"), 52);
    assert_eq!(h.check("insert", b"x1").status_code, Some(300));
    assert_eq!(h.check("insert", b"x2").status_code, Some(503));
    assert_eq!(h.check("insert", b"x3").status_code, Some(503));
    assert_eq!(h.c.inserts_running(), 1);
}

#[test]
fn remembered_notify_nonces_are_bounded() {
    let mut h = Harness::new(Config {
        max_processes: 2,
        ..Config::default()
    });
    let delete = |pid: &[u8]| {
        CommandParam {
            name: Some(n("/data/f")),
            process_id: Some(pid.to_vec()),
            ..CommandParam::default()
        }
        .encode()
    };
    h.publish("delete", &delete(b"1"), 1);
    h.publish("delete", &delete(b"2"), 2);
    // A third nonce within the minute is not fetched.
    let mut i = Interest::new(n("/repo/delete/notify"));
    i.set_app_parameters(
        NotifyParam {
            publisher_prefix: n("/client"),
            nonce: vec![3],
            forwarding_hint: None,
        }
        .encode(),
    );
    assert!(h.c.on_interest(&i, h.now).unwrap().is_empty());
    // Once the first two are forgotten it is.
    h.now += Duration::from_secs(61);
    assert_eq!(
        sent_interests(&h.c.on_interest(&i, h.now).unwrap()).len(),
        1
    );
}

fn param_with_register(name: &str, reg: &str, pid: &[u8]) -> Vec<u8> {
    CommandParam {
        name: Some(n(name)),
        start_block_id: Some(0),
        end_block_id: Some(1),
        process_id: Some(pid.to_vec()),
        register_prefix: Some(n(reg)),
        ..CommandParam::default()
    }
    .encode()
}

#[test]
fn register_prefix_is_registered_once_and_unregistered_by_a_delete() {
    let mut h = Harness::new(Config::default());
    // /dyn is not served: the RegisterPrefix admits the insert and is
    // registered before the segments are fetched.
    let acts = h.publish("insert", &param_with_register("/dyn/f", "/dyn", b"r1"), 50);
    assert_eq!(acts.first(), Some(&Action::Register(n("/dyn"))));
    assert_eq!(sent_interests(&acts).len(), 2, "segments 0 and 1 asked for");
    assert!(h.c.served().contains(&n("/dyn")));
    let Some(Action::Store { .. }) = serve_all(&mut h, acts, 1) else {
        panic!("no Store")
    };
    h.c.stored(b"r1", Ok(2), h.now);
    // The same prefix again: no second registration.
    let acts = h.publish("insert", &param_with_register("/dyn/g", "/dyn", b"r2"), 51);
    assert!(!acts.iter().any(|a| matches!(a, Action::Register(_))));
    assert_eq!(h.check("insert", b"r2").status_code, Some(300));
    // A delete naming it unregisters it; one naming a prefix the Repo was
    // started with does not.
    let del = |reg: &str, pid: &[u8]| {
        CommandParam {
            name: Some(n("/dyn/f")),
            process_id: Some(pid.to_vec()),
            register_prefix: Some(n(reg)),
            ..CommandParam::default()
        }
        .encode()
    };
    let acts = h.publish("delete", &del("/dyn", b"d1"), 52);
    assert_eq!(acts.first(), Some(&Action::Unregister(n("/dyn"))));
    assert!(!h.c.served().contains(&n("/dyn")));
    let acts = h.publish("delete", &del("/data", b"d2"), 53);
    assert!(!acts.iter().any(|a| matches!(a, Action::Unregister(_))));
    assert!(h.c.served().contains(&n("/data")));
}

#[test]
fn register_prefix_must_cover_the_name_and_is_bounded() {
    let cfg = Config {
        max_registered: 1,
        ..Config::default()
    };
    let mut h = Harness::new(cfg);
    // A RegisterPrefix that does not cover the name does not admit it.
    let acts = h.publish(
        "insert",
        &param_with_register("/other/f", "/dyn", b"x1"),
        60,
    );
    assert!(!acts.iter().any(|a| matches!(a, Action::Register(_))));
    assert_eq!(h.check("insert", b"x1").status_code, Some(400));
    // Nor does one in the Repo's command names.
    let acts = h.publish(
        "insert",
        &param_with_register("/repo/insert/f", "/repo/insert", b"x2"),
        61,
    );
    assert!(!acts.iter().any(|a| matches!(a, Action::Register(_))));
    assert_eq!(h.check("insert", b"x2").status_code, Some(400));
    // One registration allowed, the second refused.
    let acts = h.publish("insert", &param_with_register("/one/f", "/one", b"x3"), 62);
    assert_eq!(acts.first(), Some(&Action::Register(n("/one"))));
    let acts = h.publish("insert", &param_with_register("/two/f", "/two", b"x4"), 63);
    assert!(!acts.iter().any(|a| matches!(a, Action::Register(_))));
    assert_eq!(h.check("insert", b"x4").status_code, Some(400));
    // A prefix read back from the store after a restart is served again.
    assert!(!h.c.add_served(n("/one")), "already served");
    assert!(h.c.add_served(n("/three")));
    assert!(!h.c.add_served(n("/repo/delete")), "command names");
}
