//! A protobuf wire-format writer, just enough for ONNX's messages (written by hand to keep
//! the engine free of a protobuf dependency).
//!
//! Fields are written in the order they are appended; the ONNX writer appends them in
//! ascending field number, the order protobuf's own serialisers use, so a file read and
//! re-serialised by the `onnx` package comes back byte for byte. Repeated scalars are written
//! unpacked (one tag per element), as proto2 (ONNX's syntax) writes fields not declared
//! `[packed = true]`.

/// Wire type of varint-encoded scalars (int32, int64, enums, bool).
const VARINT: u8 = 0;
/// Wire type of length-delimited fields (strings, bytes, embedded messages).
const LEN: u8 = 2;
/// Wire type of 32-bit fixed-width scalars (float).
const FIXED32: u8 = 5;

/// Appends `v` as a base-128 varint: seven bits per byte, least significant first, the high
/// bit set on every byte but the last.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One protobuf message under construction.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    buf: Vec<u8>,
}

impl Message {
    /// An empty message.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The encoded bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn tag(&mut self, field: u32, wire: u8) {
        put_varint(&mut self.buf, (u64::from(field) << 3) | u64::from(wire));
    }

    /// An int64 (or int32/enum) field: negative values take ten bytes, as protobuf's
    /// two's-complement varint rule says (int64 is not zigzag-encoded).
    pub(crate) fn int64(&mut self, field: u32, v: i64) -> &mut Self {
        self.tag(field, VARINT);
        put_varint(&mut self.buf, v as u64);
        self
    }

    /// A float field: four little-endian IEEE 754 bytes, so every f32 (infinities included)
    /// is carried exactly.
    pub(crate) fn float(&mut self, field: u32, v: f32) -> &mut Self {
        self.tag(field, FIXED32);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A bytes field.
    pub(crate) fn bytes(&mut self, field: u32, v: &[u8]) -> &mut Self {
        self.tag(field, LEN);
        put_varint(&mut self.buf, v.len() as u64);
        self.buf.extend_from_slice(v);
        self
    }

    /// A string field (UTF-8 bytes).
    pub(crate) fn string(&mut self, field: u32, v: &str) -> &mut Self {
        self.bytes(field, v.as_bytes())
    }

    /// An embedded message field.
    pub(crate) fn message(&mut self, field: u32, m: &Message) -> &mut Self {
        self.bytes(field, &m.buf)
    }

    /// A repeated int64 field, one tag per element.
    pub(crate) fn int64s(&mut self, field: u32, v: &[i64]) -> &mut Self {
        for &x in v {
            self.int64(field, x);
        }
        self
    }

    /// A repeated float field, one tag per element.
    pub(crate) fn floats(&mut self, field: u32, v: &[f32]) -> &mut Self {
        for &x in v {
            self.float(field, x);
        }
        self
    }

    /// A repeated string field.
    pub(crate) fn strings<S: AsRef<str>>(&mut self, field: u32, v: &[S]) -> &mut Self {
        for s in v {
            self.string(field, s.as_ref());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal reader of the same wire format, written from the encoding rules, so the
    /// tests check bytes against hand-computed values *and* that they decode back.
    fn read_varint(b: &[u8], at: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    #[test]
    fn varints_match_hand_computed_bytes() {
        for (v, want) in [
            (0u64, &[0x00u8][..]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (150, &[0x96, 0x01]),
            (300, &[0xac, 0x02]),
            (16_384, &[0x80, 0x80, 0x01]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, want, "{v}");
            let mut at = 0;
            assert_eq!(read_varint(&out, &mut at), v);
            assert_eq!(at, out.len());
        }
    }

    #[test]
    fn scalar_fields_match_hand_computed_bytes() {
        // field 1 varint 150: the protobuf documentation's own example, 08 96 01
        let mut m = Message::new();
        m.int64(1, 150);
        assert_eq!(m.clone().into_bytes(), [0x08, 0x96, 0x01]);
        // int64 -1 is ten bytes of two's complement, not zigzag
        let mut m = Message::new();
        m.int64(3, -1);
        let b = m.into_bytes();
        assert_eq!(b.len(), 11);
        assert_eq!(b[0], 3 << 3);
        let mut at = 1;
        assert_eq!(read_varint(&b, &mut at) as i64, -1);
        // float 1.0 in field 2: tag (2 << 3) | 5, then 00 00 80 3f
        let mut m = Message::new();
        m.float(2, 1.0).float(2, f32::NEG_INFINITY);
        assert_eq!(
            m.into_bytes(),
            [0x15, 0x00, 0x00, 0x80, 0x3f, 0x15, 0x00, 0x00, 0x80, 0xff]
        );
        // a large field number (AttributeProto.type is 20) takes a two-byte tag
        let mut m = Message::new();
        m.int64(20, 7);
        assert_eq!(m.into_bytes(), [0xa0, 0x01, 0x07]);
    }

    #[test]
    fn length_delimited_fields_nest_and_round_trip() {
        // field 2 string "testing": the documentation's example, 12 07 74 65 73 74 69 6e 67
        let mut m = Message::new();
        m.string(2, "testing");
        assert_eq!(
            m.clone().into_bytes(),
            [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']
        );
        // an embedded message: field 3 holding the message above, 1a 09 12 07 ...
        let mut outer = Message::new();
        outer.message(3, &m);
        let b = outer.into_bytes();
        assert_eq!(b[..2], [0x1a, 0x09]);
        assert_eq!(b[2..], m.into_bytes()[..]);
        // a 200-byte payload has a two-byte length and survives a read back
        let payload = "é".repeat(100);
        let mut m = Message::new();
        m.string(1, &payload)
            .strings(4, &["a", ""])
            .int64s(8, &[1, 2]);
        let b = m.into_bytes();
        assert_eq!(b[..3], [0x0a, 0xc8, 0x01]);
        let mut at = 3;
        assert_eq!(&b[at..at + 200], payload.as_bytes());
        at += 200;
        assert_eq!(
            b[at..],
            [0x22, 0x01, b'a', 0x22, 0x00, 0x40, 0x01, 0x40, 0x02]
        );
    }
}
