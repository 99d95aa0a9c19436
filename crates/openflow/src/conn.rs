//! The backend over TCP: listen where the bridge's controller points
//! (`ovs-vsctl set-controller BR tcp:HOST:PORT`), serve one switch
//! connection at a time, and when it drops (the switch restarted, the
//! network failed) wait for the next; [`Controller::connected`] flushes
//! the switch at the start of every session.
//!
//! One thread: reads with a short timeout so the app's clock ticks
//! ([`Controller::tick`]) every `tick` even when no packet arrives, and
//! between sessions.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use nexthop_sdf::app::App;

use crate::backend::Controller;
use crate::codec::{frame_len, Message};

/// How the serving loop runs.
#[derive(Clone, Copy, Debug)]
pub struct ServeConfig {
    /// How often the app's clock ticks.
    pub tick: Duration,
    /// The app's clock starts here.
    pub epoch: Instant,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            tick: Duration::from_millis(100),
            epoch: Instant::now(),
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
    ctl.connected(&mut out);
    loop {
        if flush(ctl, &mut stream, &mut out, &mut wbuf).is_err() || stop() {
            return;
        }
        match stream.read(&mut tmp) {
            Ok(0) => return,
            Ok(n) => rbuf.extend_from_slice(&tmp[..n]),
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
