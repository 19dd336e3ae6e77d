//! `GET /notifications`: the push notifications of a region directory
//! ([`dta_store::notify`]) as a server-sent-events stream (one `event: notice` per notice,
//! its `id` the notice's `seq`, its data the JSON `dta watch` prints; an `event: missed` when
//! the subscriber fell a whole ring behind). Subscribers are bounded ([`MAX_SUBSCRIBERS`]; one
//! more gets 503); each reads the ring on a blocking thread and stops when its client goes.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};
use tokio::sync::{mpsc, Semaphore};

/// Concurrent `/notifications` streams.
pub const MAX_SUBSCRIBERS: usize = 16;
/// Notices queued per stream between the ring reader and the connection; a slower client
/// makes the reader wait (and, a whole ring behind, miss notices, counted).
const QUEUE: usize = 1024;
/// How long one wait on the ring lasts before the reader checks that its client is still there.
const POLL: Duration = Duration::from_millis(100);

#[derive(Clone)]
struct Notify {
    dir: PathBuf,
    slots: Arc<Semaphore>,
}

/// The `/notifications` route over region directory `dir`.
pub fn router(dir: PathBuf) -> Router {
    Router::new()
        .route("/notifications", get(notifications))
        .with_state(Notify {
            dir,
            slots: Arc::new(Semaphore::new(MAX_SUBSCRIBERS)),
        })
}

async fn notifications(State(n): State<Notify>) -> Response {
    let Ok(permit) = n.slots.clone().try_acquire_owned() else {
        return dta_http::error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_SUBSCRIBERS} notification streams are open; try again later"),
        );
    };
    let ring = match NotifyRing::open_or_create(&n.dir, DEFAULT_CAPACITY) {
        Ok(r) => r,
        Err(e) => return dta_http::error_response(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let (tx, rx) = mpsc::channel::<Event>(QUEUE);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let mut cursor = ring.subscribe();
        let mut missed = 0;
        while !tx.is_closed() {
            let Some(notice) = ring.next(&mut cursor, POLL) else {
                continue;
            };
            if cursor.missed() > missed {
                let ev = Event::default()
                    .event("missed")
                    .data((cursor.missed() - missed).to_string());
                missed = cursor.missed();
                if tx.blocking_send(ev).is_err() {
                    break;
                }
            }
            let ev = Event::default()
                .event("notice")
                .id(notice.seq.to_string())
                .json_data(&notice)
                .unwrap_or_else(|e| Event::default().event("error").data(e.to_string()));
            if tx.blocking_send(ev).is_err() {
                break;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|ev| (Ok::<_, Infallible>(ev), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_store::notify::Announce;
    use std::io::{Read, Write};

    /// A client of the stream gets every notice announced after it connected, once, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_stream_carries_every_notice_once() {
        let dir = tempfile::tempdir().unwrap();
        let ring = NotifyRing::open_or_create(dir.path(), 64).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(dir.path().to_path_buf());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let got = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            // Bounds each read (the headers, then the notices until the deadline below).
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"GET /notifications HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            let mut got = String::new();
            let mut buf = [0u8; 4096];
            // The headers first: the stream is subscribed once they are sent.
            while !got.contains("\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                got.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            std::thread::sleep(Duration::from_millis(200));
            for k in 0..20u32 {
                ring.announce(&Announce {
                    store: "kw",
                    primitive: 1,
                    key: &k.to_be_bytes(),
                    list: 0,
                    reports: 1,
                });
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while got.matches("event: notice").count() < 20 && std::time::Instant::now() < deadline
            {
                if let Ok(n) = s.read(&mut buf) {
                    got.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
            got
        })
        .await
        .unwrap();
        assert!(got.contains("text/event-stream"), "{got}");
        let ids: Vec<u64> = got
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .map(|v| v.trim().parse().unwrap())
            .collect();
        assert_eq!(ids, (0..20).collect::<Vec<_>>(), "{got}");
        assert!(got.contains("\"store\":\"kw\""), "{got}");
    }
}
