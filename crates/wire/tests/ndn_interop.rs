//! Golden interop tests against python-ndn 0.5.2 and NDNts 0.0.20250307, in
//! both directions, for Interest (with and without ApplicationParameters),
//! DigestSha256-signed Data, Nack, and LpPacket with PitToken.
//!
//! Every case is a JSON spec (below) that each side builds into a packet:
//! the peers' bytes must equal ours byte for byte and decode here to the
//! spec's fields; our bytes must decode there to the spec's fields, verify
//! there (params digest, DigestSha256), and re-encode there to the same bytes.
//!
//! The peers are installed by `bash scripts/setup-interop.sh` (a venv under
//! `target/interop-venv`, npm packages under `crates/wire/tests/interop`);
//! when they are absent the tests fail and say so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nexthop_wire::ndn::{
    component_type as ct, params_digest_ok_wire, verify_digest_sha256_wire, Data, Interest,
    LpPacket, MetaInfo, Nack, NackReason, Name, NameComponent, Packet,
};
use serde_json::{json, Map, Value};

const SETUP: &str = "bash scripts/setup-interop.sh";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

#[derive(Clone, Copy, Debug)]
enum Peer {
    PythonNdn,
    Ndnts,
}

impl Peer {
    fn command(self, cmd: &str) -> Command {
        match self {
            Peer::PythonNdn => {
                let py = repo_root().join("target/interop-venv/bin/python");
                assert!(
                    py.exists(),
                    "python-ndn 0.5.2 peer missing: {} not found; install the interop peers with `{SETUP}`",
                    py.display()
                );
                let mut c = Command::new(py);
                c.arg(interop_dir().join("peer.py")).arg(cmd);
                c
            }
            Peer::Ndnts => {
                let pkg = interop_dir().join("node_modules/@ndn/packet/package.json");
                assert!(
                    pkg.exists(),
                    "NDNts peer missing: {} not found; install the interop peers with `{SETUP}`",
                    pkg.display()
                );
                let mut c = Command::new("node");
                c.current_dir(interop_dir()).arg("peer.mjs").arg(cmd);
                c
            }
        }
    }

    /// Run `cmd` with `input` on stdin and parse the JSON it prints.
    fn run(self, cmd: &str, input: &Value) -> Map<String, Value> {
        let mut child = self
            .command(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{self:?} peer could not start ({e}); install it with `{SETUP}`")
            });
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input.to_string().as_bytes())
            .expect("write to peer");
        let out = child.wait_with_output().expect("peer output");
        assert!(
            out.status.success(),
            "{self:?} peer `{cmd}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        match serde_json::from_slice(&out.stdout) {
            Ok(Value::Object(m)) => m,
            other => panic!("{self:?} peer printed no JSON object: {other:?}"),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A name as the JSON list of [TLV-TYPE, hex value] components.
fn comps(n: &Name) -> Value {
    Value::Array(
        n.components()
            .map(|c| json!([c.typ(), hex(c.value())]))
            .collect(),
    )
}

fn name_of(v: &Value) -> Name {
    let list = v.as_array().expect("component list");
    Name::from_components(list.iter().map(|c| {
        let t = c[0].as_u64().expect("type") as u16;
        NameComponent::new(t, unhex(c[1].as_str().expect("value"))).expect("component")
    }))
}

// One argument per Interest field the cases set.
#[allow(clippy::too_many_arguments)]
fn interest_spec(
    name: &str,
    cbp: bool,
    mbf: bool,
    hint: &[&str],
    nonce: Option<u32>,
    lifetime: Option<u64>,
    hop: Option<u8>,
    params: Option<&[u8]>,
) -> Value {
    json!({
        "kind": "interest",
        "name": comps(&Name::from_uri(name).unwrap()),
        "cbp": cbp, "mbf": mbf,
        "fwhint": hint.iter().map(|h| comps(&Name::from_uri(h).unwrap())).collect::<Vec<_>>(),
        "nonce": nonce, "lifetime": lifetime, "hop_limit": hop,
        "app_params": params.map(hex),
    })
}

fn data_spec(
    name: &str,
    content_type: Option<u64>,
    freshness: Option<u64>,
    final_seg: Option<u64>,
    content: &[u8],
) -> Value {
    json!({
        "kind": "data",
        "name": comps(&Name::from_uri(name).unwrap()),
        "content_type": content_type, "freshness": freshness,
        "final_block_id": final_seg.map(|s| {
            let c = NameComponent::segment(s);
            json!([c.typ(), hex(c.value())])
        }),
        "content": hex(content),
    })
}

fn lp_spec(pit_token: Option<&[u8]>, nack: Option<u64>, inner: Value) -> Value {
    json!({"kind": "lp", "pit_token": pit_token.map(hex), "nack": nack, "inner": inner})
}

/// The golden cases.
fn cases() -> Value {
    let full = interest_spec(
        "/ndn/edu/ucla/ping/seg=3",
        true,
        true,
        &["/hint/one", "/hint/two"],
        Some(0x0102_0304),
        Some(10_000),
        Some(32),
        None,
    );
    let params = interest_spec(
        "/app/v=7",
        false,
        false,
        &[],
        Some(5),
        Some(2000),
        Some(64),
        Some(b"hello params"),
    );
    let data = data_spec(
        "/ndn/data/v=2/seg=0",
        Some(2),
        Some(1000),
        Some(9),
        b"content bytes",
    );
    let plain = interest_spec("/n", false, false, &[], Some(7), Some(2000), None, None);
    json!({
        "interest_full": full,
        "interest_params": params,
        "data_digest_sha256": data,
        "nack_no_route": lp_spec(None, Some(150), plain.clone()),
        "nack_congestion": lp_spec(None, Some(50), plain),
        "lp_pit_token_interest": lp_spec(Some(&[0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0x07, 0x08]), None, full),
        "lp_pit_token_data": lp_spec(Some(&[1, 2]), None, data),
    })
}

/// Our packet for a spec.
fn build(s: &Value) -> Packet {
    match s["kind"].as_str() {
        Some("interest") => {
            let mut i = Interest::new(name_of(&s["name"]));
            i.can_be_prefix = s["cbp"].as_bool().unwrap();
            i.must_be_fresh = s["mbf"].as_bool().unwrap();
            i.forwarding_hint = s["fwhint"]
                .as_array()
                .unwrap()
                .iter()
                .map(name_of)
                .collect();
            i.nonce = s["nonce"].as_u64().map(|n| n as u32);
            i.lifetime_ms = s["lifetime"].as_u64();
            i.hop_limit = s["hop_limit"].as_u64().map(|h| h as u8);
            if let Some(p) = s["app_params"].as_str() {
                i.set_app_parameters(unhex(p));
            }
            Packet::Interest(i)
        }
        Some("data") => {
            let mut d = Data::new(name_of(&s["name"]), unhex(s["content"].as_str().unwrap()));
            d.meta_info = MetaInfo {
                content_type: s["content_type"].as_u64(),
                freshness_period_ms: s["freshness"].as_u64(),
                final_block_id: s["final_block_id"].as_array().map(|c| {
                    NameComponent::new(c[0].as_u64().unwrap() as u16, unhex(c[1].as_str().unwrap()))
                        .unwrap()
                }),
                keep_empty: false,
            };
            d.sign_digest_sha256();
            Packet::Data(d)
        }
        Some("lp") => {
            let inner = build(&s["inner"]).to_wire();
            Packet::Lp(LpPacket {
                pit_token: s["pit_token"].as_str().map(unhex),
                nack: s["nack"].as_u64().map(|r| Nack {
                    reason: Some(NackReason::from_code(r)),
                }),
                fragment: Some(inner),
                ..Default::default()
            })
        }
        k => panic!("unknown kind {k:?}"),
    }
}

/// Check that bytes decoded here hold the spec's fields.
fn check_decoded(case: &str, spec: &Value, wire: &[u8]) {
    let p = Packet::decode(wire)
        .unwrap_or_else(|e| panic!("{case}: we cannot decode {}: {e}", hex(wire)));
    match p {
        Packet::Interest(i) => {
            let base = Name::from_components(
                i.name
                    .components()
                    .filter(|c| c.typ() != ct::PARAMETERS_SHA256_DIGEST)
                    .map(|c| c.to_owned()),
            );
            assert_eq!(comps(&base), spec["name"], "{case}: name");
            assert_eq!(json!(i.can_be_prefix), spec["cbp"], "{case}: CanBePrefix");
            assert_eq!(json!(i.must_be_fresh), spec["mbf"], "{case}: MustBeFresh");
            let hint: Vec<Value> = i.forwarding_hint.iter().map(comps).collect();
            assert_eq!(json!(hint), spec["fwhint"], "{case}: ForwardingHint");
            assert_eq!(json!(i.nonce), spec["nonce"], "{case}: Nonce");
            assert_eq!(
                json!(i.lifetime_ms),
                spec["lifetime"],
                "{case}: InterestLifetime"
            );
            assert_eq!(json!(i.hop_limit), spec["hop_limit"], "{case}: HopLimit");
            assert_eq!(
                json!(i.app_parameters.as_deref().map(hex)),
                spec["app_params"],
                "{case}: ApplicationParameters"
            );
            assert!(i.params_digest_ok(), "{case}: params digest");
            assert_eq!(
                params_digest_ok_wire(wire),
                Ok(true),
                "{case}: params digest over the received bytes"
            );
        }
        Packet::Data(d) => {
            assert_eq!(comps(&d.name), spec["name"], "{case}: name");
            assert_eq!(
                json!(d.meta_info.content_type),
                spec["content_type"],
                "{case}: ContentType"
            );
            assert_eq!(
                json!(d.meta_info.freshness_period_ms),
                spec["freshness"],
                "{case}: FreshnessPeriod"
            );
            let fb = d
                .meta_info
                .final_block_id
                .as_ref()
                .map(|c| json!([c.typ(), hex(c.value())]));
            assert_eq!(json!(fb), spec["final_block_id"], "{case}: FinalBlockId");
            assert_eq!(
                json!(d.content.as_deref().map(hex)),
                spec["content"],
                "{case}: Content"
            );
            assert_eq!(d.signature_info.signature_type, 0, "{case}: SignatureType");
            assert_eq!(
                verify_digest_sha256_wire(wire),
                Ok(true),
                "{case}: DigestSha256 over the received bytes"
            );
            assert!(d.verify_digest_sha256(), "{case}: DigestSha256");
        }
        Packet::Lp(l) => {
            assert_eq!(
                json!(l.pit_token.as_deref().map(hex)),
                spec["pit_token"],
                "{case}: PitToken"
            );
            assert_eq!(
                json!(l.nack.and_then(|n| n.reason).map(|r| r.code())),
                spec["nack"],
                "{case}: NackReason"
            );
            let frag = l
                .fragment
                .as_deref()
                .unwrap_or_else(|| panic!("{case}: no Fragment"));
            check_decoded(case, &spec["inner"], frag);
        }
    }
}

/// Check the fields a peer decoded from our bytes.
fn check_peer_fields(peer: Peer, case: &str, spec: &Value, got: &Value, ours: &[u8]) {
    let cx = format!("{peer:?} decoding our {case}");
    assert_eq!(got["kind"], spec["kind"], "{cx}: kind");
    match spec["kind"].as_str() {
        Some("interest") => {
            let name = name_of(&got["name"]);
            let base = Name::from_components(
                name.components()
                    .filter(|c| c.typ() != ct::PARAMETERS_SHA256_DIGEST)
                    .map(|c| c.to_owned()),
            );
            assert_eq!(comps(&base), spec["name"], "{cx}: name");
            for f in [
                "cbp",
                "mbf",
                "fwhint",
                "nonce",
                "lifetime",
                "hop_limit",
                "app_params",
            ] {
                assert_eq!(got[f], spec[f], "{cx}: {f}");
            }
            if spec["app_params"].is_string() {
                assert_eq!(got["params_digest_ok"], json!(true), "{cx}: params digest");
            }
            assert_eq!(
                got["reencoded"].as_str(),
                Some(hex(ours).as_str()),
                "{cx}: their re-encoding"
            );
        }
        Some("data") => {
            for f in [
                "name",
                "content_type",
                "freshness",
                "final_block_id",
                "content",
            ] {
                assert_eq!(got[f], spec[f], "{cx}: {f}");
            }
            assert_eq!(got["sig_type"], json!(0), "{cx}: SignatureType");
            assert_eq!(
                got["digest_ok"],
                json!(true),
                "{cx}: DigestSha256 verification"
            );
            assert_eq!(
                got["reencoded"].as_str(),
                Some(hex(ours).as_str()),
                "{cx}: their re-encoding"
            );
        }
        Some("lp") => {
            assert_eq!(got["pit_token"], spec["pit_token"], "{cx}: PitToken");
            assert_eq!(got["nack"], spec["nack"], "{cx}: NackReason");
            let LpPacket {
                fragment: Some(inner),
                ..
            } = LpPacket::decode(ours).unwrap()
            else {
                panic!("{cx}: no fragment in our packet");
            };
            check_peer_fields(peer, case, &spec["inner"], &got["inner"], &inner);
        }
        k => panic!("unknown kind {k:?}"),
    }
}

fn peers_encode_we_decode(peer: Peer) {
    let cases = cases();
    let theirs = peer.run("encode", &cases);
    for (case, spec) in cases.as_object().unwrap() {
        let wire = unhex(
            theirs[case]
                .as_str()
                .unwrap_or_else(|| panic!("{peer:?} gave no {case}")),
        );
        check_decoded(case, spec, &wire);
        assert_eq!(
            hex(&build(spec).to_wire()),
            hex(&wire),
            "{peer:?} {case}: our encoding of the same fields differs from theirs"
        );
        // Decoding and re-encoding their bytes gives their bytes back.
        assert_eq!(
            Packet::decode(&wire).unwrap().to_wire(),
            wire,
            "{peer:?} {case}: re-encoding"
        );
    }
}

fn we_encode_peers_decode(peer: Peer) {
    let cases = cases();
    let mut ours = Map::new();
    for (case, spec) in cases.as_object().unwrap() {
        ours.insert(case.clone(), json!(hex(&build(spec).to_wire())));
    }
    let got = peer.run("decode", &Value::Object(ours.clone()));
    for (case, spec) in cases.as_object().unwrap() {
        let wire = unhex(ours[case].as_str().unwrap());
        check_peer_fields(peer, case, spec, &got[case], &wire);
    }
}

#[test]
fn python_ndn_encodes_we_decode_byte_exact() {
    peers_encode_we_decode(Peer::PythonNdn);
}

#[test]
fn ndnts_encodes_we_decode_byte_exact() {
    peers_encode_we_decode(Peer::Ndnts);
}

#[test]
fn we_encode_python_ndn_decodes_and_verifies() {
    we_encode_peers_decode(Peer::PythonNdn);
}

#[test]
fn we_encode_ndnts_decodes_and_verifies() {
    we_encode_peers_decode(Peer::Ndnts);
}

#[test]
fn tampered_data_fails_verification_in_both_peers_and_here() {
    let mut d = Data::new(Name::from_uri("/t").unwrap(), b"abc".to_vec());
    d.sign_digest_sha256();
    let mut w = d.to_wire();
    let at = w.windows(3).position(|x| x == b"abc").unwrap();
    w[at] = b'x';
    assert_eq!(verify_digest_sha256_wire(&w), Ok(false));
    let req = json!({"t": hex(&w)});
    for peer in [Peer::PythonNdn, Peer::Ndnts] {
        let got = peer.run("decode", &req);
        assert_eq!(
            got["t"]["digest_ok"],
            json!(false),
            "{peer:?} accepted a tampered DigestSha256"
        );
    }
}

#[test]
fn names_with_every_component_type_agree_with_both_peers() {
    let name = Name::from_uri(
        "/generic/%00%FF/seg=0/off=1/v=256/t=1700000000000000/seq=70000/32=kw/300=x/sha256digest=\
         0000000000000000000000000000000000000000000000000000000000000001",
    )
    .unwrap();
    let spec = interest_spec("/", false, false, &[], Some(1), Some(2000), None, None);
    let mut spec = spec;
    spec["name"] = comps(&name);
    let cases = json!({ "names": spec });
    for peer in [Peer::PythonNdn, Peer::Ndnts] {
        let theirs = peer.run("encode", &cases);
        let wire = unhex(theirs["names"].as_str().unwrap());
        let i = Interest::decode(&wire).unwrap();
        assert_eq!(i.name, name, "{peer:?}");
        assert_eq!(i.name.prefix_hashes(), name.prefix_hashes(), "{peer:?}");
    }
}
