//! One established connection to a peer, with a reader and a writer thread.
//!
//! Sends are queued to the writer thread, so a ring step (send to one peer while receiving
//! from another) never waits on a full socket buffer; the reader thread queues whole frames,
//! so a receive waits on a channel with a deadline. A peer that dies closes the socket
//! (its reader sees the end at once); a peer that stops reading makes the writer's socket
//! write time out; a silent peer makes the receive time out.

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::frame::{read_frame, ReadFrame, MAX_MESSAGE};

/// How long one socket write may block before the writer checks how long the peer has
/// taken nothing.
const WRITE_SLICE: Duration = Duration::from_millis(200);

/// Messages up to this size go out in one write with their length (one packet, not two).
const JOIN_BELOW: usize = 1 << 16;

/// Why a link stopped carrying messages.
#[derive(Debug, Clone)]
pub enum LinkError {
    /// The peer closed the connection (it ended: an error, a crash, a kill).
    Closed,
    /// The socket failed (reset, a write that timed out).
    Io(String),
    /// The peer sent a frame this protocol cannot hold.
    Malformed(String),
}

/// A live connection to one peer.
pub struct Link {
    stream: TcpStream,
    to_writer: Option<Sender<Vec<u8>>>,
    from_reader: Receiver<Result<Vec<u8>, LinkError>>,
    write_error: Arc<Mutex<Option<LinkError>>>,
    writer: Option<JoinHandle<()>>,
    reader: Option<JoinHandle<()>>,
    /// The first error the reader reported (later receives repeat it).
    read_error: Option<LinkError>,
}

impl Link {
    /// Starts the threads of a connection whose handshake is done; a write blocked longer
    /// than `timeout` (a peer that stopped reading) fails the link.
    pub fn start(stream: TcpStream, timeout: Duration) -> std::io::Result<Link> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(None)?;
        // short socket timeouts let the writer measure its own stall (see
        // `write_frame_patiently`)
        stream.set_write_timeout(Some(WRITE_SLICE.min(timeout).max(Duration::from_millis(1))))?;
        let (to_writer, writer_queue) = channel::<Vec<u8>>();
        let (reader_out, from_reader) = channel();
        let write_error = Arc::new(Mutex::new(None));
        let writer = {
            let mut w = stream.try_clone()?;
            let slot = write_error.clone();
            std::thread::Builder::new()
                .name("sapwood-tcp-send".into())
                .spawn(move || {
                    for msg in writer_queue {
                        if let Err(e) = write_frame_patiently(&mut w, &msg, timeout) {
                            *slot.lock().expect("no panics while held") = Some(e);
                            return;
                        }
                    }
                })?
        };
        let reader = {
            let mut r = BufReader::with_capacity(1 << 16, stream.try_clone()?);
            std::thread::Builder::new()
                .name("sapwood-tcp-recv".into())
                .spawn(move || loop {
                    let item = match read_frame(&mut r, MAX_MESSAGE) {
                        Ok(ReadFrame::Frame(f)) => Ok(f),
                        Ok(ReadFrame::Closed) => Err(LinkError::Closed),
                        Ok(ReadFrame::TooLong(n)) => Err(LinkError::Malformed(format!(
                            "a frame of {n} bytes (more than {MAX_MESSAGE})"
                        ))),
                        Err(e) => Err(link_error(e)),
                    };
                    let stop = item.is_err();
                    if reader_out.send(item).is_err() || stop {
                        return;
                    }
                })?
        };
        Ok(Link {
            stream,
            to_writer: Some(to_writer),
            from_reader,
            write_error,
            writer: Some(writer),
            reader: Some(reader),
            read_error: None,
        })
    }

    /// Queues a message for the peer.
    pub fn send(&mut self, msg: Vec<u8>) -> Result<(), LinkError> {
        if let Some(e) = self
            .write_error
            .lock()
            .expect("no panics while held")
            .clone()
        {
            return Err(e);
        }
        let sender = self.to_writer.as_ref().expect("present until drop");
        sender.send(msg).map_err(|_| {
            self.write_error
                .lock()
                .expect("no panics while held")
                .clone()
                .unwrap_or(LinkError::Closed)
        })
    }

    /// The next message from the peer, waiting at most `timeout`; `Ok(None)` when it sent
    /// nothing in that time.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, LinkError> {
        if let Some(e) = &self.read_error {
            return Err(e.clone());
        }
        match self.from_reader.recv_timeout(timeout) {
            Ok(Ok(msg)) => Ok(Some(msg)),
            Ok(Err(e)) => {
                self.read_error = Some(e.clone());
                Err(e)
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(LinkError::Closed),
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // queued messages go out before the connection closes (a peer may still need the
        // last of them); the writer ends once its queue is empty, or at its write timeout
        drop(self.to_writer.take());
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// Writes a frame, failing once the peer has taken no byte for `timeout` (it stopped
/// reading). A blocking write with the socket's own timeout would not do: it returns each
/// time a few bytes drain, so a peer reading a trickle could hold it for ever.
fn write_frame_patiently(
    w: &mut TcpStream,
    payload: &[u8],
    timeout: Duration,
) -> Result<(), LinkError> {
    let len = (payload.len() as u64).to_le_bytes();
    if payload.len() < JOIN_BELOW {
        let joined = [&len[..], payload].concat();
        write_patiently(w, &joined, timeout)
    } else {
        write_patiently(w, &len, timeout)?;
        write_patiently(w, payload, timeout)
    }
}

fn write_patiently(w: &mut TcpStream, mut buf: &[u8], timeout: Duration) -> Result<(), LinkError> {
    let mut progress = Instant::now();
    while !buf.is_empty() {
        match w.write(buf) {
            Ok(0) => return Err(LinkError::Closed),
            Ok(n) => {
                buf = &buf[n..];
                progress = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if progress.elapsed() >= timeout {
                    return Err(LinkError::Io(format!(
                        "it took no data for {} s (comm_timeout): it stopped reading",
                        timeout.as_secs_f64()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(link_error(e)),
        }
    }
    Ok(())
}

/// A failed read or write as a link error. A peer that died shows as an end of stream to
/// a reader but as a reset or broken pipe to a writer, depending on which side of the
/// link notices first: all of them are the peer closing its connection.
fn link_error(e: std::io::Error) -> LinkError {
    use std::io::ErrorKind::*;
    match e.kind() {
        UnexpectedEof | BrokenPipe | ConnectionReset | ConnectionAborted => LinkError::Closed,
        _ => LinkError::Io(e.to_string()),
    }
}
