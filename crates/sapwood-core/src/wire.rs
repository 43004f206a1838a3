//! Little-endian bytes for every wire format (histogram messages, cut samples, split
//! candidates): one reader that checks every length, so a malformed message from a peer is
//! an error naming what was being read, never a panic or an out-of-bounds slice.

use crate::error::{Error, Result};

/// Appends little-endian values to a byte buffer.
pub trait PutBytes {
    /// Appends one byte.
    fn put_u8(&mut self, v: u8);
    /// Appends a u16.
    fn put_u16(&mut self, v: u16);
    /// Appends a u32.
    fn put_u32(&mut self, v: u32);
    /// Appends a u64.
    fn put_u64(&mut self, v: u64);
    /// Appends an i64.
    fn put_i64(&mut self, v: i64);
    /// Appends an f32's bits.
    fn put_f32(&mut self, v: f32);
    /// Appends an f64's bits.
    fn put_f64(&mut self, v: f64);
    /// Appends an unsigned LEB128 varint (7 bits a byte, low first).
    fn put_varint(&mut self, v: u64);
}

impl PutBytes for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_i64(&mut self, v: i64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_f32(&mut self, v: f32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_f64(&mut self, v: f64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }
}

/// Bytes a varint of `v` takes.
pub fn varint_len(v: u64) -> usize {
    ((64 - v.leading_zeros()).max(1) as usize).div_ceil(7)
}

/// Reads what [`PutBytes`] wrote; every read past the end is an error naming the message.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader over `bytes`, a `what` ("histogram message", "cut sample", ...).
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        ByteReader {
            bytes,
            pos: 0,
            what,
        }
    }

    /// The error for a malformed message: `detail` about this reader's `what`.
    pub fn malformed(&self, detail: impl std::fmt::Display) -> Error {
        Error::Collective(format!("{detail} in a {}", self.what))
    }

    fn truncated(&self) -> Error {
        Error::Collective(format!("truncated {}", self.what))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.truncated())?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    /// A u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// A u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// A u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// An i64.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// An f32 from its bits.
    pub fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }
    /// An f64 from its bits.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// An unsigned LEB128 varint of at most 64 bits.
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(self.malformed("malformed varint"))
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// Succeeds only if every byte has been read.
    pub fn finish(&self) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self.malformed("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_reads_past_the_end_are_errors() {
        let mut b = Vec::new();
        b.put_u8(7);
        b.put_u16(0xbeef);
        b.put_u32(u32::MAX - 3);
        b.put_u64(1 << 40);
        b.put_i64(i64::MIN);
        b.put_f32(-0.0);
        b.put_f64(f64::NAN);
        for v in [0u64, 127, 128, 300, u64::MAX] {
            b.put_varint(v);
        }
        let mut r = ByteReader::new(&b, "test message");
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0xbeef);
        assert_eq!(r.u32().unwrap(), u32::MAX - 3);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert_eq!(r.i64().unwrap(), i64::MIN);
        assert_eq!(r.f32().unwrap().to_bits(), (-0.0f32).to_bits());
        assert!(r.f64().unwrap().is_nan());
        for v in [0u64, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint().unwrap(), v);
            assert!(varint_len(v) >= 1);
        }
        r.finish().unwrap();
        let e = r.u8().unwrap_err().to_string();
        assert!(e.contains("truncated test message"), "{e}");
        let mut short = ByteReader::new(&b[..3], "x");
        short.u8().unwrap();
        assert!(short.u32().is_err());
        assert!(short.finish().is_err());
    }

    #[test]
    fn an_endless_varint_is_an_error() {
        let b = [0xffu8; 11];
        let e = ByteReader::new(&b, "m").varint().unwrap_err().to_string();
        assert!(e.contains("malformed varint"), "{e}");
    }
}
