//! The histogram store: the histogram of every node that may still split, with a pool of
//! buffers reused from node to node and from tree to tree.
//!
//! Histograms are built only for the smaller child of a split; the store derives the other
//! as parent − child in the parent's own buffer, so a split costs one copy and no new
//! allocation once the pool is warm.

use crate::hist::{sub, HistBin};
use crate::tree::NodeId;

/// Node histograms of one worker, kept by node id.
#[derive(Debug, Default)]
pub struct HistStore {
    /// bins per node
    width: usize,
    /// by node index: the histogram of a node that may still split
    nodes: Vec<Option<Vec<HistBin>>>,
    /// node buffers no node holds now
    pool: Vec<Vec<HistBin>>,
    /// the buffer a batch is built into
    batch: Vec<HistBin>,
}

impl HistStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a tree whose histograms have `width` bins: every node's buffer returns to the
    /// pool.
    pub fn reset(&mut self, width: usize) {
        if width != self.width {
            self.pool.clear();
        }
        self.width = width;
        let held: Vec<Vec<HistBin>> = self.nodes.drain(..).flatten().collect();
        for buf in held {
            self.recycle(buf);
        }
    }

    /// Bins per node.
    pub fn width(&self) -> usize {
        self.width
    }

    /// A buffer of `nodes` histograms one after another, for a backend to overwrite.
    pub fn take_batch(&mut self, nodes: usize) -> Vec<HistBin> {
        let mut b = std::mem::take(&mut self.batch);
        b.resize(nodes * self.width, [0, 0]);
        b
    }

    /// Returns the batch buffer once its histograms are stored.
    pub fn return_batch(&mut self, batch: Vec<HistBin>) {
        self.batch = batch;
    }

    /// Keeps `hist` as `node`'s histogram.
    pub fn insert(&mut self, node: NodeId, hist: Vec<HistBin>) {
        debug_assert_eq!(hist.len(), self.width);
        let i = node.index();
        if self.nodes.len() <= i {
            self.nodes.resize_with(i + 1, || None);
        }
        self.nodes[i] = Some(hist);
    }

    /// A copy of `hist` as `node`'s histogram, in a pooled buffer.
    pub fn insert_copy(&mut self, node: NodeId, hist: &[HistBin]) {
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(hist);
        self.insert(node, buf);
    }

    /// The histogram of `node`.
    ///
    /// # Panics
    /// If the node has none: the grower only asks for nodes it stored.
    pub fn get(&self, node: NodeId) -> &[HistBin] {
        self.nodes
            .get(node.index())
            .and_then(|h| h.as_deref())
            .expect("the grower asks only for stored histograms")
    }

    /// Drops `node`'s histogram (a leaf): its buffer returns to the pool.
    pub fn release(&mut self, node: NodeId) {
        if let Some(buf) = self.nodes.get_mut(node.index()).and_then(Option::take) {
            self.recycle(buf);
        }
    }

    /// Replaces the histogram of `parent` by those of its children: `built` is the
    /// histogram of `built_child`, and `other_child` gets parent − built in the parent's
    /// buffer.
    pub fn split(
        &mut self,
        parent: NodeId,
        built_child: NodeId,
        other_child: NodeId,
        built: &[HistBin],
    ) {
        let mut hist = self
            .nodes
            .get_mut(parent.index())
            .and_then(Option::take)
            .expect("a split node has a stored histogram");
        for (s, &b) in hist.iter_mut().zip(built) {
            *s = sub(*s, b);
        }
        self.insert(other_child, hist);
        self.insert_copy(built_child, built);
    }

    fn recycle(&mut self, buf: Vec<HistBin>) {
        if buf.capacity() >= self.width {
            self.pool.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_stores_the_built_child_and_parent_minus_child() {
        let mut s = HistStore::new();
        s.reset(3);
        s.insert(NodeId(0), vec![[10, 20], [5, 6], [0, 1]]);
        s.split(NodeId(0), NodeId(2), NodeId(1), &[[4, 5], [1, 1], [0, 0]]);
        assert_eq!(s.get(NodeId(2)), &[[4, 5], [1, 1], [0, 0]]);
        assert_eq!(s.get(NodeId(1)), &[[6, 15], [4, 5], [0, 1]]);
        s.release(NodeId(1));
        s.release(NodeId(2));
        assert_eq!(s.pool.len(), 2, "released buffers are pooled");
        s.insert_copy(NodeId(7), &[[1, 1], [2, 2], [3, 3]]);
        assert_eq!(s.pool.len(), 1, "a pooled buffer is reused");
        s.reset(3);
        assert_eq!(s.pool.len(), 2, "a new tree returns every buffer");
    }
}
