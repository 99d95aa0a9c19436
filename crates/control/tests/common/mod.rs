//! Helpers shared by the loopback tests: a FIB, a scripted controller
//! and a follower by hand, both speaking the protocol through the crate's
//! own handshake.
#![allow(dead_code)]

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use nexthop_control::frame::{encode_parts, read_frame, write_all, Frame, MsgType, MAX_PAYLOAD};
use nexthop_control::handshake::{self, fresh_nonce, SessionKeys};
use nexthop_control::{AuthKey, Hello, Message};
use nexthop_othello::fib::{Action, ConciseFib};
use nexthop_othello::Config;

pub const WAIT: Duration = Duration::from_secs(20);

pub fn key() -> AuthKey {
    AuthKey::new(b"loopback-test-secret-0123456789").expect("key")
}

pub fn mac(i: u64) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

pub fn action(i: u64) -> Action {
    match i % 6 {
        0 => Action::Drop,
        1 => Action::Controller,
        2 => Action::PortSet(vec![1, (i % 7) as u16 + 2]),
        _ => Action::Port((i % 11) as u16),
    }
}

pub fn fib(n: u64) -> ConciseFib<[u8; 6]> {
    let routes: Vec<_> = (0..n)
        .map(|i| (i as usize + 1, mac(i), action(i)))
        .collect();
    ConciseFib::build(Config::default(), &routes).expect("build")
}

pub fn wait_until(p: impl Fn() -> bool) -> bool {
    let end = Instant::now() + WAIT;
    while Instant::now() < end {
        if p() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// A scripted controller speaking the protocol by hand (after the
/// crate's own handshake).
pub struct Fake {
    pub listener: TcpListener,
    pub stream: Option<TcpStream>,
    pub session: u64,
    pub keys: Option<SessionKeys>,
}

impl Fake {
    pub fn new() -> Fake {
        Fake {
            listener: TcpListener::bind("127.0.0.1:0").expect("bind"),
            stream: None,
            session: 0,
            keys: None,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("addr")
    }

    /// Accept the follower's connection, run the handshake and return
    /// its Hello.
    pub fn accept(&mut self) -> Hello {
        let (s, _) = self.listener.accept().expect("accept");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut r = &s;
        let mut w = &s;
        let a = handshake::accept(&mut r, &mut w, &key(), &fresh_nonce()).expect("handshake");
        self.session = a.keys.session;
        self.keys = Some(a.keys);
        self.stream = Some(s);
        a.hello
    }

    fn keys(&self) -> &SessionKeys {
        self.keys.as_ref().expect("handshake done")
    }

    pub fn read(&mut self) -> Frame {
        let k = self.keys().recv.clone();
        let s = self.stream.as_mut().expect("connected");
        read_frame(s, &k, MAX_PAYLOAD).expect("frame from follower")
    }

    /// Read frames until a Hello (skipping Acks).
    pub fn read_hello(&mut self) -> Hello {
        loop {
            let f = self.read();
            if let Ok(Message::Hello(h)) = Message::decode(f.ty, &f.payload) {
                return h;
            }
        }
    }

    /// A frame of this connection under its controller→forwarder key.
    pub fn frame(&self, m: &Message, seq: u64, gen: u64) -> Vec<u8> {
        self.raw_frame(m.ty(), seq, gen, &m.encode())
    }

    pub fn raw_frame(&self, ty: MsgType, seq: u64, gen: u64, payload: &[u8]) -> Vec<u8> {
        encode_parts(&self.keys().send, ty, self.session, seq, gen, payload)
    }

    pub fn send(&mut self, bytes: &[u8]) {
        write_all(self.stream.as_mut().expect("connected"), bytes).expect("send");
    }
}

/// A follower by hand: connect, run the handshake, send a Hello offering
/// `features`.
pub struct RawFollower {
    pub stream: TcpStream,
    pub reader: BufReader<TcpStream>,
    pub keys: SessionKeys,
    pub seq: u64,
}

impl RawFollower {
    pub fn connect(addr: SocketAddr, features: u32) -> RawFollower {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut w = &stream;
        let keys =
            handshake::connect(&mut reader, &mut w, &key(), &fresh_nonce()).expect("handshake");
        let mut f = RawFollower {
            stream,
            reader,
            keys,
            seq: 0,
        };
        let hello = Message::Hello(Hello {
            forwarder_id: format!("raw-{features}"),
            column: 0,
            last_seq: 0,
            last_generation: 0,
            features,
        });
        let b = f.frame(&hello);
        if features == 0 {
            // The original Hello layout, without the features field.
            assert_eq!(b.len(), 36 + 1 + 5 + 4 + 8 + 8 + 32);
        }
        write_all(&mut f.stream, &b).expect("hello");
        f
    }

    /// Connect and read the (one-frame) Snapshot.
    pub fn with_snapshot(addr: SocketAddr, features: u32) -> RawFollower {
        let mut f = RawFollower::connect(addr, features);
        let s = f.read();
        assert_eq!((s.ty, s.seq), (MsgType::Snapshot, 1));
        f
    }

    /// The next frame, under this connection's controller→forwarder key.
    pub fn read(&mut self) -> Frame {
        self.try_read().expect("frame from the controller")
    }

    pub fn try_read(&mut self) -> Result<Frame, nexthop_control::ReadError> {
        let f = read_frame(&mut self.reader, &self.keys.recv, MAX_PAYLOAD)?;
        assert_eq!(f.session, self.keys.session);
        Ok(f)
    }

    /// The next frame that is not a Keepalive.
    pub fn read_skipping_keepalives(&mut self) -> Frame {
        loop {
            let f = self.read();
            if f.ty != MsgType::Keepalive {
                return f;
            }
        }
    }

    /// The next numbered frame of this side, under its key.
    pub fn frame(&mut self, m: &Message) -> Vec<u8> {
        self.seq += 1;
        encode_parts(
            &self.keys.send,
            m.ty(),
            self.keys.session,
            self.seq,
            0,
            &m.encode(),
        )
    }

    pub fn send(&mut self, m: &Message) {
        let b = self.frame(m);
        write_all(&mut self.stream, &b).expect("send");
    }
}
