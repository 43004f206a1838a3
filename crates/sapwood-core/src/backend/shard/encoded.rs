//! The host's side of the device histogram encoders every GPU backend shares: checking
//! what it is asked to encode, and cutting the encoder's output into messages.

use crate::error::{Error, Result};

/// Checks the blocks of a reduce-scatter a backend encodes (`build_encoded_blocks`): `own`
/// one of them, each a range of a node's `total_bins` bins.
pub fn check_blocks(
    blocks: &[std::ops::Range<usize>],
    own: usize,
    total_bins: usize,
) -> Result<()> {
    if own >= blocks.len() {
        return Err(Error::Backend(format!(
            "own block {own} of {} blocks",
            blocks.len()
        )));
    }
    if let Some((b, r)) = blocks
        .iter()
        .enumerate()
        .find(|(_, r)| r.start > r.end || r.end > total_bins)
    {
        return Err(Error::Backend(format!(
            "block {b} is bins {}..{}, not a range within a node's {total_bins} bins",
            r.start, r.end
        )));
    }
    Ok(())
}

/// Checks that `values` holds whole messages of `len` values; returns how many.
pub fn message_count(values: &[i64], len: usize) -> Result<usize> {
    if len == 0 || !values.len().is_multiple_of(len) {
        return Err(Error::Backend(format!(
            "{} values are not whole messages of {len}",
            values.len()
        )));
    }
    Ok(values.len() / len)
}

/// Every group's byte offset in a batch's output (an exclusive scan of the group sizes the
/// measuring pass wrote) and the output's length; `None` once an offset passes 32 bits,
/// which the encoders address with.
pub fn group_offsets(sizes: impl IntoIterator<Item = u32>) -> Option<(Vec<u32>, usize)> {
    let sizes = sizes.into_iter();
    let mut offsets = Vec::with_capacity(sizes.size_hint().0);
    let mut total = 0usize;
    for size in sizes {
        offsets.push(total as u32);
        total += size as usize;
        if total > u32::MAX as usize {
            return None;
        }
    }
    Some((offsets, total))
}

/// The `count` messages of `per_message` groups each in `bytes`, the encoder's output of
/// `total` bytes whose groups start at `offsets`.
pub fn split_messages(
    bytes: &[u8],
    offsets: &[u32],
    per_message: usize,
    count: usize,
    total: usize,
) -> Vec<Vec<u8>> {
    let start = |i: usize| offsets.get(i * per_message).map_or(total, |&o| o as usize);
    (0..count)
        .map(|i| bytes[start(i)..start(i + 1)].to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_scan_sizes_and_messages_cut_at_their_first_group() {
        let (offsets, total) = group_offsets([2, 0, 3, 1]).unwrap();
        assert_eq!((offsets.as_slice(), total), (&[0, 2, 2, 5][..], 6));
        let bytes = [1, 2, 3, 4, 5, 6, 0, 0];
        // two messages of two groups each; the padding past `total` is not theirs
        let m = split_messages(&bytes, &offsets, 2, 2, total);
        assert_eq!(m, vec![vec![1, 2], vec![3, 4, 5, 6]]);
        assert!(group_offsets([u32::MAX, 1]).is_none());
        assert_eq!(message_count(&[0; 6], 3).unwrap(), 2);
        assert!(message_count(&[0; 5], 3).is_err());
        assert!(message_count(&[], 0).is_err());
    }
}
