//! Length-prefixed frames on a byte stream, and the handshake a worker presents.

use std::io::{self, Read, Write};

/// First bytes of every handshake: a stray client (an HTTP probe, a port scanner) fails
/// here instead of being read as a worker.
pub const MAGIC: &[u8; 8] = b"SAPWOOD\0";

/// Version of the wire protocol; workers of different versions refuse each other.
pub const PROTOCOL: u32 = 1;

/// The largest handshake frame accepted (a hello is a few dozen bytes).
pub const MAX_HANDSHAKE: u64 = 4096;

/// The largest message frame accepted: far above any histogram, low enough that a corrupt
/// length is not an allocation of exabytes.
pub const MAX_MESSAGE: u64 = 1 << 40;

/// Writes one frame: its length (u64, little-endian), then its bytes.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    w.write_all(&(payload.len() as u64).to_le_bytes())?;
    w.write_all(payload)?;
    w.flush()
}

/// What reading a frame gave.
#[derive(Debug)]
pub enum ReadFrame {
    /// A whole frame.
    Frame(Vec<u8>),
    /// The stream ended cleanly between frames.
    Closed,
    /// The length prefix exceeds the limit: the peer does not speak this protocol.
    TooLong(u64),
}

/// Reads one frame of at most `limit` bytes.
pub fn read_frame(r: &mut impl Read, limit: u64) -> io::Result<ReadFrame> {
    let mut len = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(ReadFrame::Closed),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let n = u64::from_le_bytes(len);
    if n > limit {
        return Ok(ReadFrame::TooLong(n));
    }
    // grown as bytes arrive, so a corrupt length within the limit costs memory only for
    // the bytes really sent (and then a timeout), never one huge allocation up front
    let mut buf = Vec::with_capacity(n.min(1 << 26) as usize);
    r.take(n).read_to_end(&mut buf)?;
    if (buf.len() as u64) < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(ReadFrame::Frame(buf))
}

/// A worker introducing itself to the coordinator or to a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The sender's rank.
    pub rank: u32,
    /// Workers in the sender's job.
    pub world: u32,
    /// The job's shared secret.
    pub token: String,
    /// Port of the sender's listener for peer links (0 for a hello to a peer).
    pub port: u16,
}

impl Hello {
    /// The hello's bytes: magic, protocol, rank, world, port, token.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(PROTOCOL.to_le_bytes());
        b.extend(self.rank.to_le_bytes());
        b.extend(self.world.to_le_bytes());
        b.extend(self.port.to_le_bytes());
        b.extend(self.token.as_bytes());
        b
    }

    /// Parses a hello, or says why it is not one.
    pub fn decode(b: &[u8]) -> Result<Hello, String> {
        if b.len() < 22 || &b[..8] != MAGIC {
            return Err("not a Sapwood worker (no protocol header)".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if version != PROTOCOL {
            return Err(format!(
                "protocol version {version}, this worker speaks {PROTOCOL} (mixed Sapwood versions)"
            ));
        }
        let token = std::str::from_utf8(&b[22..])
            .map_err(|_| "a token that is not UTF-8".to_string())?
            .to_string();
        Ok(Hello {
            rank: u32_at(12),
            world: u32_at(16),
            port: u16::from_le_bytes([b[20], b[21]]),
            token,
        })
    }
}

/// The answer to a hello: accepted (with a payload: the address table for the
/// coordinator's answer) or refused with the reason.
pub fn encode_answer(accepted: Result<&[u8], &str>) -> Vec<u8> {
    match accepted {
        Ok(payload) => [&[1u8][..], payload].concat(),
        Err(reason) => [&[0u8][..], reason.as_bytes()].concat(),
    }
}

/// Reads an answer: the payload when accepted, the reason when refused.
pub fn decode_answer(b: &[u8]) -> Result<Result<Vec<u8>, String>, String> {
    match b.split_first() {
        Some((1, rest)) => Ok(Ok(rest.to_vec())),
        Some((0, rest)) => Ok(Err(String::from_utf8_lossy(rest).into_owned())),
        _ => Err("a malformed answer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_other_versions_are_named() {
        let h = Hello {
            rank: 3,
            world: 4,
            token: "abc".into(),
            port: 4242,
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h.clone()));
        let mut old = h.encode();
        old[8] = 9;
        assert!(Hello::decode(&old)
            .unwrap_err()
            .contains("protocol version 9"));
        assert!(Hello::decode(b"GET / HTTP/1.1\r\n\r\n....")
            .unwrap_err()
            .contains("not a Sapwood worker"));
    }

    #[test]
    fn frames_round_trip_and_oversized_lengths_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        write_frame(&mut buf, b"").unwrap();
        let mut r = &buf[..];
        assert!(matches!(read_frame(&mut r, 10).unwrap(), ReadFrame::Frame(f) if f == b"hello"));
        assert!(matches!(read_frame(&mut r, 10).unwrap(), ReadFrame::Frame(f) if f.is_empty()));
        assert!(matches!(read_frame(&mut r, 10).unwrap(), ReadFrame::Closed));
        let huge = u64::MAX.to_le_bytes();
        assert!(matches!(
            read_frame(&mut &huge[..], 10).unwrap(),
            ReadFrame::TooLong(_)
        ));
        let cut = [5u8, 0, 0];
        assert!(read_frame(&mut &cut[..], 10).is_err());
        // a corrupt length under the limit: an end-of-stream error, not a 512 GiB buffer
        let mut lying = (1u64 << 39).to_le_bytes().to_vec();
        lying.extend(b"abc");
        let err = read_frame(&mut &lying[..], MAX_MESSAGE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
