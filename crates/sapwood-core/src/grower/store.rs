//! The histogram store: the histogram of every node that may still split, with a pool of
//! buffers reused from node to node and from tree to tree.
//!
//! Histograms are built only for the smaller child of a split; the store derives the other
//! as parent − child in the parent's own buffer, so a split costs one copy and no new
//! allocation once the pool is warm.

use rayon::prelude::*;

use crate::hist::{sub, HistBin};
use crate::tree::NodeId;

/// Bins per parallel task when storing children.
const STORE_CHUNK: usize = 2_048;

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

    /// [`HistStore::split`] for several parents at once, in parallel: `built` holds the
    /// histogram of each split's `built_child`, one after another, in the order of `splits`
    /// (parent, built child, other child).
    pub fn split_many(&mut self, splits: &[(NodeId, NodeId, NodeId)], built: &[HistBin]) {
        let width = self.width;
        let mut work = Vec::with_capacity(splits.len());
        for (&(parent, _, _), b) in splits.iter().zip(built.chunks_exact(width.max(1))) {
            let hist = self
                .nodes
                .get_mut(parent.index())
                .and_then(Option::take)
                .expect("a split node has a stored histogram");
            let copy = self.pool.pop().unwrap_or_default();
            work.push((hist, copy, b));
        }
        // a lone split (loss-guided growth) is cut by bins, so both threads share it
        work.par_iter_mut().for_each(|(hist, copy, b)| {
            copy.resize(width, [0, 0]);
            hist.par_chunks_mut(STORE_CHUNK)
                .zip(copy.par_chunks_mut(STORE_CHUNK))
                .zip(b.par_chunks(STORE_CHUNK))
                .for_each(|((hist, copy), b)| {
                    for (s, &x) in hist.iter_mut().zip(b) {
                        *s = sub(*s, x);
                    }
                    copy.copy_from_slice(b);
                });
        });
        for (&(_, built_child, other_child), (hist, copy, _)) in splits.iter().zip(work) {
            self.insert(other_child, hist);
            self.insert(built_child, copy);
        }
    }

    /// [`HistStore::split_many`] with the batch the children were built in, which the store
    /// takes back: a batch of one histogram (loss-guided growth splits one node at a time)
    /// becomes that child's buffer as it is, instead of being copied into another, and a
    /// pooled buffer becomes the next batch. A larger batch is copied from and kept.
    pub fn split_batch(&mut self, splits: &[(NodeId, NodeId, NodeId)], batch: Vec<HistBin>) {
        let width = self.width;
        if let [(parent, built_child, other_child)] = *splits {
            // only a batch no larger than a node's buffer is handed over: a level's big one
            // stays the batch rather than growing again from a small buffer next level
            if batch.len() == width && batch.capacity() < 2 * width.max(1) {
                let mut hist = self
                    .nodes
                    .get_mut(parent.index())
                    .and_then(Option::take)
                    .expect("a split node has a stored histogram");
                hist.par_chunks_mut(STORE_CHUNK)
                    .zip(batch.par_chunks(STORE_CHUNK))
                    .for_each(|(hist, b)| {
                        for (s, &x) in hist.iter_mut().zip(b) {
                            *s = sub(*s, x);
                        }
                    });
                self.insert(other_child, hist);
                self.insert(built_child, batch);
                self.batch = self.pool.pop().unwrap_or_default();
                return;
            }
        }
        self.split_many(splits, &batch);
        self.return_batch(batch);
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
    fn a_batch_of_one_becomes_the_built_childs_buffer_and_larger_ones_are_copied() {
        let parent = |v: i64| vec![[10 * v, 20 * v], [5, 6], [0, 1]];
        let built = |v: i64| vec![[v, 2 * v], [1, 1], [0, 1]];
        let mut s = HistStore::new();
        s.reset(3);
        s.insert(NodeId(0), parent(1));
        let batch = s.take_batch(1);
        assert_eq!(batch.len(), 3);
        let mut batch = batch;
        batch.copy_from_slice(&built(1));
        let at = batch.as_ptr();
        s.split_batch(&[(NodeId(0), NodeId(1), NodeId(2))], batch);
        assert_eq!(s.get(NodeId(1)), built(1).as_slice());
        assert_eq!(s.get(NodeId(1)).as_ptr(), at, "handed over, not copied");
        assert_eq!(s.get(NodeId(2)), [[9, 18], [4, 5], [0, 0]]);
        // two at once: copied, the batch kept
        s.insert(NodeId(3), parent(2));
        let mut batch = s.take_batch(2);
        batch[..3].copy_from_slice(&built(1));
        batch[3..].copy_from_slice(&built(2));
        s.split_batch(
            &[
                (NodeId(2), NodeId(4), NodeId(5)),
                (NodeId(3), NodeId(6), NodeId(7)),
            ],
            batch,
        );
        assert_eq!(s.get(NodeId(4)), built(1).as_slice());
        assert_eq!(s.get(NodeId(5)), [[8, 16], [3, 4], [0, -1]]);
        assert_eq!(s.get(NodeId(6)), built(2).as_slice());
        assert_eq!(s.get(NodeId(7)), [[18, 36], [4, 5], [0, 0]]);
        assert_eq!(
            s.take_batch(1).capacity(),
            6,
            "the larger batch stays the batch"
        );
    }

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

    #[test]
    fn splitting_many_parents_equals_splitting_each() {
        let parents: Vec<Vec<HistBin>> = (0..5)
            .map(|p| (0..4).map(|b| [100 * p + 10 * b, 7 * p + b]).collect())
            .collect();
        let built: Vec<HistBin> = (0..5)
            .flat_map(|p| (0..4).map(move |b| [3 * p + b, p]))
            .collect();
        let splits: Vec<(NodeId, NodeId, NodeId)> = (0..5u32)
            .map(|p| (NodeId(p), NodeId(10 + 2 * p), NodeId(11 + 2 * p)))
            .collect();
        let (mut one, mut many) = (HistStore::new(), HistStore::new());
        for s in [&mut one, &mut many] {
            s.reset(4);
            for (p, h) in parents.iter().enumerate() {
                s.insert(NodeId(p as u32), h.clone());
            }
        }
        for (i, &(p, b, o)) in splits.iter().enumerate() {
            one.split(p, b, o, &built[4 * i..4 * i + 4]);
        }
        many.split_many(&splits, &built);
        for &(_, b, o) in &splits {
            assert_eq!(one.get(b), many.get(b));
            assert_eq!(one.get(o), many.get(o));
        }
        // parent 1: built child 12, the other 13 = parent - built
        assert_eq!(many.get(NodeId(12)), &[[3, 1], [4, 1], [5, 1], [6, 1]]);
        assert_eq!(
            many.get(NodeId(13)),
            &[[97, 6], [106, 7], [115, 8], [124, 9]]
        );
    }
}
