//! Which rows each node owns: the in-bag rows of a shard are kept grouped by node, and node
//! n owns the span `start .. start + len` of that row array. Splitting a node partitions its
//! span in place, left rows first.

use crate::backend::NodeSplit;
use crate::error::{Error, Result};
use crate::tree::NodeId;

/// A node's rows: `len` entries of the row array from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Span {
    /// First entry.
    pub start: u32,
    /// Entries.
    pub len: u32,
}

impl Span {
    /// The entries as a range of the row array.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// The span of every node of the current tree.
#[derive(Debug, Clone, Default)]
pub struct NodeSpans {
    spans: Vec<Span>,
}

impl NodeSpans {
    /// No tree yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a tree whose root owns the first `rows` entries.
    pub fn reset(&mut self, rows: u32) {
        self.spans.clear();
        self.spans.push(Span {
            start: 0,
            len: rows,
        });
    }

    /// The span of `node`.
    pub fn get(&self, node: NodeId) -> Result<Span> {
        self.spans
            .get(node.index())
            .copied()
            .ok_or_else(|| Error::Backend(format!("unknown node {}", node.0)))
    }

    /// The spans of `nodes`, in order.
    pub fn of(&self, nodes: &[NodeId]) -> Result<Vec<Span>> {
        nodes.iter().map(|&n| self.get(n)).collect()
    }

    /// The spans of the nodes `splits` partition, checked: every node is known, every
    /// feature below `n_features`, and no two splits share rows.
    pub fn for_splits(&self, splits: &[NodeSplit], n_features: usize) -> Result<Vec<Span>> {
        let mut spans = Vec::with_capacity(splits.len());
        for s in splits {
            if s.feature >= n_features {
                return Err(Error::Backend(format!("split on feature {}", s.feature)));
            }
            spans.push(self.get(s.node)?);
        }
        let mut sorted = spans.clone();
        sorted.sort_unstable();
        if sorted
            .windows(2)
            .any(|w| w[0].start + w[0].len > w[1].start)
        {
            return Err(Error::Backend("two splits share rows".into()));
        }
        Ok(spans)
    }

    /// Records the children of each split from the rows it sent (left, right); returns
    /// those counts. A partition that lost or invented rows is an error.
    pub fn record(
        &mut self,
        splits: &[NodeSplit],
        spans: &[Span],
        moved: &[[u32; 2]],
    ) -> Result<Vec<[u64; 2]>> {
        let mut out = Vec::with_capacity(splits.len());
        for ((s, span), &[l, r]) in splits.iter().zip(spans).zip(moved) {
            if l as u64 + r as u64 != span.len as u64 {
                return Err(Error::Backend(format!(
                    "the partition of node {} moved {} of its {} rows",
                    s.node.0,
                    l as u64 + r as u64,
                    span.len
                )));
            }
            let need = s.left.index().max(s.right.index()) + 1;
            if self.spans.len() < need {
                self.spans.resize(need, Span::default());
            }
            self.spans[s.left.index()] = Span {
                start: span.start,
                len: l,
            };
            self.spans[s.right.index()] = Span {
                start: span.start + l,
                len: r,
            };
            out.push([l as u64, r as u64]);
        }
        Ok(out)
    }

    /// The node that owns each row entry, for every node that is a leaf of `is_leaf`; other
    /// entries are `u32::MAX`.
    pub fn leaf_of_entries(&self, len: usize, is_leaf: impl Fn(usize) -> bool) -> Vec<u32> {
        let mut out = vec![u32::MAX; len];
        for (id, span) in self.spans.iter().enumerate() {
            if is_leaf(id) {
                out[span.range()].fill(id as u32);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::SplitRule;

    fn split(node: u32, left: u32) -> NodeSplit {
        NodeSplit {
            node: NodeId(node),
            left: NodeId(left),
            right: NodeId(left + 1),
            feature: 0,
            rule: SplitRule::Numeric { bin: 1 },
            default_left: false,
        }
    }

    #[test]
    fn splits_carve_their_parents_span_and_bad_batches_are_errors() {
        let mut s = NodeSpans::new();
        s.reset(10);
        let batch = [split(0, 1)];
        let spans = s.for_splits(&batch, 3).unwrap();
        assert_eq!(s.record(&batch, &spans, &[[4, 6]]).unwrap(), vec![[4, 6]]);
        assert_eq!(s.get(NodeId(1)).unwrap(), Span { start: 0, len: 4 });
        assert_eq!(s.get(NodeId(2)).unwrap(), Span { start: 4, len: 6 });
        let e = s.for_splits(&[split(1, 3), split(1, 5)], 3).unwrap_err();
        assert!(e.to_string().contains("share rows"), "{e}");
        assert!(s.for_splits(&[split(9, 3)], 3).is_err());
        let mut bad = split(1, 3);
        bad.feature = 3;
        assert!(s.for_splits(&[bad], 3).is_err());
        let spans = s.for_splits(&[split(2, 3)], 3).unwrap();
        let e = s.record(&[split(2, 3)], &spans, &[[1, 1]]).unwrap_err();
        assert!(e.to_string().contains("moved 2 of its 6"), "{e}");
    }
}
