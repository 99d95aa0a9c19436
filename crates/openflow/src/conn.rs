//! The backend over TCP: listen where the bridge's controller points
//! (`ovs-vsctl set-controller BR tcp:HOST:PORT`), serve one switch
//! connection at a time, and when it drops (the switch restarted, the
//! network failed) wait for the next; [`Controller::connected`] flushes
//! the switch at the start of every session.
//!
//! One thread: reads with a short timeout so the app's clock ticks
//! ([`Controller::tick`]) every `tick` even when no packet arrives, and
//! between sessions. A session with nothing received for 5 s is sent an
//! echo request; after 15 s of silence it is dropped.
//!
//! With [`ServeConfig::log_revocations`], every revocation the switch
//! confirms is one line on stderr, `nexthop sdf: revocation
//! removed_unix_ns=N states=S confirmed_us=U` ([`crate::Revocation`]):
//! when the backend found the app's `removed()` calls on the realtime
//! clock (to compare with packet capture timestamps), how many state ids,
//! and how long until the barrier reply confirmed the deletes.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use nexthop_sdf::app::App;

use crate::backend::Controller;
use crate::codec::{frame_len, Body, Message};

/// A session quiet this long gets an echo request; quiet three times as
/// long, it is dropped (and the switch flushed when it comes back).
const PROBE_AFTER: Duration = Duration::from_secs(5);

/// How the serving loop runs.
#[derive(Clone, Copy, Debug)]
pub struct ServeConfig {
    /// How often the app's clock ticks.
    pub tick: Duration,
    /// The app's clock starts here.
    pub epoch: Instant,
    /// Print a line on stderr for every confirmed revocation (module
    /// docs).
    pub log_revocations: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            tick: Duration::from_millis(100),
            epoch: Instant::now(),
            log_revocations: false,
        }
    }
}

/// Serve switches connecting to `listener` until `stop()` says so.
/// Errors of a session end that session (counted by the controller), not
/// the loop; an error of the listener itself is returned.
pub fn serve<A: App>(
    ctl: &mut Controller<A>,
    listener: &TcpListener,
    cfg: ServeConfig,
    stop: &dyn Fn() -> bool,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    ctl.log_revocations(cfg.log_revocations);
    let mut last_tick = Instant::now();
    let mut sink = Vec::new();
    while !stop() {
        match listener.accept() {
            Ok((stream, _)) => {
                session(ctl, stream, cfg, stop, &mut last_tick);
                ctl.disconnected();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
        if last_tick.elapsed() >= cfg.tick {
            last_tick = Instant::now();
            // No switch: the app's state still expires; the next session
            // flushes whatever the revocations would have deleted.
            ctl.tick(cfg.epoch.elapsed(), &mut sink);
            sink.clear();
        }
    }
    Ok(())
}

fn session<A: App>(
    ctl: &mut Controller<A>,
    mut stream: TcpStream,
    cfg: ServeConfig,
    stop: &dyn Fn() -> bool,
    last_tick: &mut Instant,
) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_nodelay(true).is_err()
        || stream
            .set_read_timeout(Some(Duration::from_millis(10)))
            .is_err()
    {
        return;
    }
    let mut out = Vec::new();
    let mut wbuf = Vec::new();
    let mut rbuf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut tmp = vec![0u8; 1 << 16];
    let mut last_rx = Instant::now();
    let mut probed = false;
    ctl.connected(&mut out);
    loop {
        if flush(ctl, &mut stream, &mut out, &mut wbuf).is_err() || stop() {
            return;
        }
        // A switch that went away without closing the connection: probe
        // it after a quiet while, give up when the probe goes unanswered.
        let quiet = last_rx.elapsed();
        if quiet >= PROBE_AFTER * 3 {
            return;
        }
        if quiet >= PROBE_AFTER && !probed {
            out.push(Message::new(0, Body::EchoRequest(Vec::new())));
            probed = true;
            continue;
        }
        match stream.read(&mut tmp) {
            Ok(0) => return,
            Ok(n) => {
                rbuf.extend_from_slice(&tmp[..n]);
                last_rx = Instant::now();
                probed = false;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
        let mut at = 0;
        loop {
            let len = match frame_len(&rbuf[at..]) {
                Ok(Some(len)) if rbuf.len() - at >= len => len,
                Ok(_) => break,
                Err(_) => {
                    // The stream cannot be framed any more: drop the
                    // connection; the switch reconnects and is flushed.
                    ctl.note_decode_error();
                    return;
                }
            };
            match Message::decode(&rbuf[at..at + len]) {
                Ok(m) => ctl.handle(m, cfg.epoch.elapsed(), &mut out),
                Err(_) => ctl.note_decode_error(),
            }
            at += len;
        }
        rbuf.drain(..at);
        for r in ctl.take_revocations() {
            eprintln!("nexthop sdf: {}", r.line());
        }
        if last_tick.elapsed() >= cfg.tick {
            *last_tick = Instant::now();
            ctl.tick(cfg.epoch.elapsed(), &mut out);
        }
    }
}

fn flush<A: App>(
    ctl: &mut Controller<A>,
    stream: &mut TcpStream,
    out: &mut Vec<Message>,
    wbuf: &mut Vec<u8>,
) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    wbuf.clear();
    for m in out.drain(..) {
        if m.encode_into(wbuf).is_err() {
            ctl.note_encode_error();
        }
    }
    stream.write_all(wbuf)
}

/// A blocking OpenFlow channel over any stream, for tools, tests and
/// benchmarks that speak to a switch directly: send messages, receive
/// them one at a time (echo requests are answered on the way), wait for
/// a barrier's reply.
#[derive(Debug)]
pub struct Channel<S> {
    stream: S,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    next_xid: u32,
}

impl<S: Read + Write> Channel<S> {
    /// A channel over `stream` (give it a read timeout: [`Self::recv`]
    /// fails with the stream's timeout error).
    pub fn new(stream: S) -> Channel<S> {
        Channel {
            stream,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            next_xid: 1,
        }
    }

    /// A fresh transaction id.
    pub fn xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    /// Queue `body` under a fresh xid (sent by [`Self::flush`]); the xid.
    pub fn queue(&mut self, body: Body) -> io::Result<u32> {
        let xid = self.xid();
        Message::new(xid, body)
            .encode_into(&mut self.wbuf)
            .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
        Ok(xid)
    }

    /// Send what was queued.
    pub fn flush(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.wbuf)?;
        self.wbuf.clear();
        Ok(())
    }

    /// Send `body` now; its xid.
    pub fn send(&mut self, body: Body) -> io::Result<u32> {
        let xid = self.queue(body)?;
        self.flush()?;
        Ok(xid)
    }

    /// The next message other than an echo request (those are answered).
    pub fn recv(&mut self) -> io::Result<Message> {
        let mut tmp = [0u8; 1 << 14];
        loop {
            if let Some(len) = frame_len(&self.rbuf)
                .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?
                .filter(|&l| self.rbuf.len() >= l)
            {
                let m = Message::decode(&self.rbuf[..len])
                    .map_err(|e| io::Error::new(ErrorKind::InvalidData, e));
                self.rbuf.drain(..len);
                let m = m?;
                if let Body::EchoRequest(d) = m.body {
                    Message::new(m.xid, Body::EchoReply(d))
                        .encode_into(&mut self.wbuf)
                        .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
                    self.flush()?;
                    continue;
                }
                return Ok(m);
            }
            let n = self.stream.read(&mut tmp)?;
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            self.rbuf.extend_from_slice(&tmp[..n]);
        }
    }

    /// Send a barrier and wait for its reply; the messages that came
    /// before it (errors, flow-removed notices, ...).
    pub fn barrier(&mut self) -> io::Result<Vec<Message>> {
        let xid = self.send(Body::BarrierRequest)?;
        let mut before = Vec::new();
        loop {
            let m = self.recv()?;
            if m.xid == xid && m.body == Body::BarrierReply {
                return Ok(before);
            }
            before.push(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that reads from a fixed buffer and records writes.
    struct Pipe {
        input: std::io::Cursor<Vec<u8>>,
        written: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_channel_answers_echo_and_returns_what_came_before_the_barrier() {
        let mut input = Vec::new();
        for m in [
            Message::new(40, Body::EchoRequest(vec![7])),
            Message::new(
                2,
                Body::Error {
                    typ: 4,
                    code: 9,
                    data: vec![],
                },
            ),
            Message::new(1, Body::BarrierReply),
        ] {
            m.encode_into(&mut input).unwrap();
        }
        let mut ch = Channel::new(Pipe {
            input: std::io::Cursor::new(input),
            written: Vec::new(),
        });
        let before = ch.barrier().unwrap();
        assert_eq!(before.len(), 1);
        assert!(matches!(before[0].body, Body::Error { code: 9, .. }));
        let w = &ch.stream.written;
        let barrier = Message::new(1, Body::BarrierRequest).encode().unwrap();
        let echo = Message::new(40, Body::EchoReply(vec![7])).encode().unwrap();
        assert_eq!(w[..barrier.len()], barrier[..]);
        assert_eq!(w[barrier.len()..], echo[..]);
        // The stream ends: an error, not a hang or a panic.
        assert!(ch.recv().is_err());
    }
}
