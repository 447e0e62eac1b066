//! The OpenFlow listener on garbage: random bytes, truncated headers, lying lengths, wrong
//! versions and floods of undecodable messages from several peers never stop the listener; a
//! real switch connects and is served afterwards.
#![allow(clippy::unwrap_used)]

use actix::prelude::*;
use bytes::Bytes;
use ofctrl::{Listener, SwitchEvent, SwitchHandle, SwitchOptions};
use ofproto::Message;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use testbed::{Ovs, OvsOptions};
use tokio::sync::mpsc;

struct Collector(mpsc::UnboundedSender<SwitchEvent>);

impl Actor for Collector {
    type Context = Context<Self>;
}

impl Handler<SwitchEvent> for Collector {
    type Result = ();
    fn handle(&mut self, event: SwitchEvent, _: &mut Context<Self>) {
        let _ = self.0.send(event);
    }
}

async fn next_connected(rx: &mut mpsc::UnboundedReceiver<SwitchEvent>) -> SwitchHandle {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(SwitchEvent::Connected(h))) => return h,
            Ok(Some(_)) => continue,
            _ => panic!("no switch connected within 20 s"),
        }
    }
}

/// Send `bytes` on a fresh connection, then read for a moment (the controller's HELLO, maybe an
/// error) and close.
fn send_garbage(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let _ = s.write_all(bytes);
    let mut out = vec![0u8; 4096];
    let n = s.read(&mut out).unwrap_or(0);
    out.truncate(n);
    out
}

#[actix_rt::test]
async fn garbage_on_the_openflow_listener_never_stops_it() {
    testbed::require!(Ovs);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let events = Collector(tx).start().recipient();
    let options = SwitchOptions {
        handshake_timeout: Duration::from_secs(2),
        ..SwitchOptions::default()
    };
    let listener = Listener::tcp(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        options,
        vec![events],
    )
    .await
    .unwrap();
    let port = listener.port().unwrap();

    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut noise = || {
        (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>()
    };
    // A HELLO, then many messages of an unknown type with valid headers (undecodable, skipped).
    let mut flood = vec![0x04, 0x00, 0x00, 0x08, 0, 0, 0, 1];
    for xid in 0..2000u32 {
        flood.extend([0x04, 0xee, 0x00, 0x0c]);
        flood.extend(xid.to_be_bytes());
        flood.extend([0xde, 0xad, 0xbe, 0xef]);
    }
    let cases: Vec<Vec<u8>> = vec![
        noise(),
        noise(),
        vec![0x04, 0x00, 0x00],                         // truncated header
        vec![0x04, 0x00, 0xff, 0xff, 0, 0, 0, 1, 0, 0], // length says 65535, 2 bytes follow
        vec![0x04, 0x00, 0x00, 0x04, 0, 0, 0, 1],       // length shorter than a header
        vec![0x01, 0x00, 0x00, 0x08, 0, 0, 0, 1],       // OpenFlow 1.0 HELLO
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        flood,
    ];
    for case in &cases {
        let reply = send_garbage(port, case);
        // Whatever happens, what the controller says first is its OpenFlow 1.3 HELLO.
        if !reply.is_empty() {
            assert_eq!(reply[..2], [0x04, 0x00], "{reply:02x?}");
        }
    }

    // The listener still serves a real switch.
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.vsctl(&[
        "set",
        "bridge",
        "br0",
        "fail_mode=secure",
        "protocols=OpenFlow13",
        "--",
        "--id=@c",
        "create",
        "controller",
        &format!("target=\"tcp:127.0.0.1:{port}\""),
        "max_backoff=1000",
        "--",
        "set",
        "bridge",
        "br0",
        "controller=@c",
    ])
    .unwrap();
    let switch = next_connected(&mut rx).await;
    let echo = switch
        .request(Message::EchoRequest(Bytes::from_static(b"ok")))
        .await
        .unwrap();
    assert_eq!(echo, vec![Message::EchoReply(Bytes::from_static(b"ok"))]);
}
