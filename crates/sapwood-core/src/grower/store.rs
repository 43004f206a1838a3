//! The histogram store: the histogram of every node that may still split, with buffers
//! reused from node to node and from tree to tree.
//!
//! Histograms are built only for the smaller child of a split; the store derives the other
//! as parent − child in the parent's own buffer. A level's children are built into one
//! batch (the backends and the exchange between workers take a level at once), and each
//! built child keeps its histogram where it was built, in the batch: no copy, and no second
//! buffer for it. A batch is reused once none of its histograms is held.
//!
//! A built child may come with the bits of the bins its rows occupy ([`crate::occupancy`]);
//! its sibling's rows are among the parent's, so the sibling takes the parent's bits (where
//! the parent has them), and the subtraction goes over the built child's occupied bins only:
//! elsewhere the child is [0, 0] and the parent's bin is already the sibling's. A batch
//! whose every histogram was released with its bits is zeroed at those bits alone, and
//! goes back known to be zero: the next level's build need not clear it whole.

use rayon::prelude::*;

use crate::hist::{sub, HistBin};
use crate::occupancy;
use crate::tree::NodeId;

/// Bins per parallel task when storing children.
const STORE_CHUNK: usize = 2_048;

/// Where a node's histogram lives.
#[derive(Debug)]
enum Slot {
    /// a buffer of its own
    Own(Vec<HistBin>),
    /// histogram `index` of batch `batch`
    Batch { batch: usize, index: usize },
}

/// A batch whose histograms some nodes hold.
#[derive(Debug, Default)]
struct Batch {
    buf: Vec<HistBin>,
    /// histograms of the batch that nodes still hold
    live: usize,
    /// whether a released histogram was left as it was (its node had no bits)
    dirty: bool,
}

/// Node histograms of one worker, kept by node id.
#[derive(Debug, Default)]
pub struct HistStore {
    /// bins per node
    width: usize,
    /// by node index: the histogram of a node that may still split
    nodes: Vec<Option<Slot>>,
    /// node buffers no node holds now
    pool: Vec<Vec<HistBin>>,
    /// batches nodes hold histograms in, by index (an empty one is unused)
    batches: Vec<Batch>,
    /// batch buffers no node holds now
    free: Vec<Vec<HistBin>>,
    /// by index of `free`: whether the buffer is all zeros
    zeroed: Vec<bool>,
    /// indices of `batches` no node holds a piece of
    vacant: Vec<usize>,
    /// by node index: the bits of the bins the node's rows may occupy, where known
    occupied: Vec<Option<Vec<u64>>>,
    /// bit buffers no node holds now
    bit_pool: Vec<Vec<u64>>,
}

impl HistStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a tree whose histograms have `width` bins: every node's buffer returns to the
    /// pool, every batch to the free ones.
    pub fn reset(&mut self, width: usize) {
        let nodes = std::mem::take(&mut self.nodes);
        let mut bits = std::mem::take(&mut self.occupied);
        bits.resize_with(nodes.len().max(bits.len()), || None);
        for (slot, bits) in nodes.into_iter().zip(&bits) {
            if let Some(slot) = slot {
                self.recycle(slot, bits.as_deref());
            }
        }
        self.bit_pool.extend(bits.into_iter().flatten());
        if width != self.width {
            self.pool.clear();
            self.free.clear();
            self.zeroed.clear();
            self.bit_pool.clear();
        }
        self.width = width;
    }

    /// Bins per node.
    pub fn width(&self) -> usize {
        self.width
    }

    /// A buffer of at least `nodes` histograms one after another, for a backend to
    /// overwrite: the smallest free batch that holds them, else the largest grown. A
    /// buffer keeps the length it grew to (shortening it would have its tail zeroed again
    /// when it next grows).
    pub fn take_batch(&mut self, nodes: usize) -> Vec<HistBin> {
        self.take_batch_zeroed(nodes).0
    }

    /// [`HistStore::take_batch`], and whether the buffer holds only zeros.
    pub fn take_batch_zeroed(&mut self, nodes: usize) -> (Vec<HistBin>, bool) {
        let len = nodes * self.width;
        if len == 0 {
            return (Vec::new(), true);
        }
        let fits = (0..self.free.len())
            .filter(|&i| self.free[i].capacity() >= len)
            .min_by_key(|&i| self.free[i].capacity());
        let largest = (0..self.free.len()).max_by_key(|&i| self.free[i].capacity());
        let (mut b, zeroed) = match fits.or(largest) {
            Some(i) => (self.free.swap_remove(i), self.zeroed.swap_remove(i)),
            None => (Vec::new(), true),
        };
        if b.len() < len {
            // grown to the length asked, not the doubling a push would leave
            b.reserve_exact(len - b.len());
            b.resize(len, [0, 0]);
        }
        (b, zeroed)
    }

    /// Returns a batch buffer whose histograms no node holds.
    pub fn return_batch(&mut self, batch: Vec<HistBin>) {
        self.return_batch_zeroed(batch, false);
    }

    /// Returns a batch buffer, all zeros if `zeroed`.
    fn return_batch_zeroed(&mut self, batch: Vec<HistBin>, zeroed: bool) {
        if batch.capacity() > 0 {
            self.free.push(batch);
            self.zeroed.push(zeroed);
        }
    }

    /// Keeps `hist` as `node`'s histogram.
    pub fn insert(&mut self, node: NodeId, hist: Vec<HistBin>) {
        debug_assert_eq!(hist.len(), self.width);
        self.put(node, Slot::Own(hist));
    }

    fn put(&mut self, node: NodeId, slot: Slot) {
        let i = node.index();
        if self.nodes.len() <= i {
            self.nodes.resize_with(i + 1, || None);
        }
        if let Some(old) = self.nodes[i].replace(slot) {
            self.recycle(old, None);
        }
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
        match self.nodes.get(node.index()).and_then(Option::as_ref) {
            Some(Slot::Own(v)) => v,
            Some(&Slot::Batch { batch, index }) => {
                &self.batches[batch].buf[index * self.width..(index + 1) * self.width]
            }
            None => panic!("the grower asks only for stored histograms"),
        }
    }

    /// Drops `node`'s histogram (a leaf): its buffer returns to the pool, or its batch to
    /// the free ones once no node holds any of its histograms.
    pub fn release(&mut self, node: NodeId) {
        let bits = self.occupied.get_mut(node.index()).and_then(Option::take);
        if let Some(slot) = self.nodes.get_mut(node.index()).and_then(Option::take) {
            self.recycle(slot, bits.as_deref());
        }
        self.bit_pool.extend(bits);
    }

    /// The bits of the bins `node`'s rows may occupy, where the store has them.
    pub fn occupied(&self, node: NodeId) -> Option<&[u64]> {
        self.occupied.get(node.index()).and_then(Option::as_deref)
    }

    /// Sets or clears the bits of `node`.
    fn put_bits(&mut self, node: NodeId, bits: Option<Vec<u64>>) {
        let i = node.index();
        if self.occupied.len() <= i {
            if bits.is_none() {
                return;
            }
            self.occupied.resize_with(i + 1, || None);
        }
        if let Some(old) = std::mem::replace(&mut self.occupied[i], bits) {
            self.bit_pool.push(old);
        }
    }

    /// Takes the histogram of `parent`, which the grower stored before splitting it.
    fn take_parent(&mut self, parent: NodeId) -> Slot {
        self.nodes
            .get_mut(parent.index())
            .and_then(Option::take)
            .expect("a split node has a stored histogram")
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
        let mut slot = self.take_parent(parent);
        let w = self.width;
        let hist = match &mut slot {
            Slot::Own(v) => v.as_mut_slice(),
            Slot::Batch { batch, index } => {
                &mut self.batches[*batch].buf[*index * w..(*index + 1) * w]
            }
        };
        for (s, &b) in hist.iter_mut().zip(built) {
            *s = sub(*s, b);
        }
        self.put(other_child, slot);
        self.insert_copy(built_child, built);
        self.put_bits(parent, None);
    }

    /// Replaces the histograms of several parents by their children's, in parallel:
    /// `batch` (from [`HistStore::take_batch`]) holds the histogram of each split's built
    /// child, one after another in the order of `splits` (parent, built child, other
    /// child). Each built child keeps its histogram in the batch; each other child gets
    /// parent − built in the parent's buffer. `occupied`, where given, holds the bits of
    /// the bins each built child's rows occupy ([`occupancy::words_for`] words a child, in
    /// the same order), and `batch` past the built histograms is zeros.
    pub fn split_batch(
        &mut self,
        splits: &[(NodeId, NodeId, NodeId)],
        batch: Vec<HistBin>,
        occupied: Option<&[u64]>,
    ) {
        let w = self.width;
        let words = occupancy::words_for(w);
        assert!(
            occupied.is_none_or(|b| b.len() >= splits.len() * words),
            "bits for every built histogram"
        );
        assert!(
            batch.len() >= splits.len() * w,
            "a built histogram for every split"
        );
        if splits.is_empty() {
            self.return_batch(batch);
            return;
        }
        let mut parents: Vec<Slot> = splits.iter().map(|s| self.take_parent(s.0)).collect();
        {
            // each parent's buffer: its own, or its piece of an earlier batch (only the
            // batches some parent holds a piece of are cut: loss-guided growth keeps a batch
            // for every leaf)
            let mut held: Vec<usize> = parents
                .iter()
                .filter_map(|p| match p {
                    Slot::Batch { batch, .. } => Some(*batch),
                    Slot::Own(_) => None,
                })
                .collect();
            held.sort_unstable();
            held.dedup();
            let mut pieces: Vec<Vec<Option<&mut [HistBin]>>> = Vec::with_capacity(held.len());
            let (mut rest, mut passed): (&mut [Batch], usize) = (&mut self.batches, 0);
            for &b in &held {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(b - passed);
                let (this, tail) = tail.split_at_mut(1);
                pieces.push(this[0].buf.chunks_mut(w.max(1)).map(Some).collect());
                rest = tail;
                passed = b + 1;
            }
            let targets: Vec<&mut [HistBin]> = parents
                .iter_mut()
                .map(|p| match p {
                    Slot::Own(v) => v.as_mut_slice(),
                    Slot::Batch { batch, index } => {
                        let at = held.binary_search(batch).expect("a held batch was cut");
                        pieces[at][*index]
                            .take()
                            .expect("each histogram of a batch is held by one node")
                    }
                })
                .collect();
            // a lone split (loss-guided growth) is cut by bins, so both threads share it
            let pairs = targets.into_par_iter().zip(batch.par_chunks(w.max(1)));
            match occupied {
                None => pairs.for_each(|(hist, built)| {
                    hist.par_chunks_mut(STORE_CHUNK)
                        .zip(built.par_chunks(STORE_CHUNK))
                        .for_each(|(hist, built)| {
                            for (s, &x) in hist.iter_mut().zip(built) {
                                *s = sub(*s, x);
                            }
                        });
                }),
                Some(bits) => {
                    pairs
                        .zip(bits.par_chunks(words.max(1)))
                        .for_each(|((hist, built), bits)| {
                            hist.par_chunks_mut(STORE_CHUNK)
                                .zip(built.par_chunks(STORE_CHUNK))
                                .zip(bits.par_chunks(STORE_CHUNK / 64))
                                .for_each(|((hist, built), bits)| {
                                    occupancy::each_set(bits, 0, hist.len(), |b| {
                                        hist[b] = sub(hist[b], built[b])
                                    });
                                });
                        })
                }
            }
        }
        // the other child's rows are among the parent's: it keeps the parent's bits
        let inherited: Vec<Option<Vec<u64>>> = splits
            .iter()
            .map(|s| self.occupied.get_mut(s.0.index()).and_then(Option::take))
            .collect();
        let k = match self.vacant.pop() {
            Some(k) => k,
            None => {
                self.batches.push(Batch::default());
                self.batches.len() - 1
            }
        };
        // without bits every piece is left dirty when released
        let dirty = occupied.is_none();
        self.batches[k] = Batch {
            buf: batch,
            live: splits.len(),
            dirty,
        };
        for (index, ((&(_, built, other), slot), bits)) in
            splits.iter().zip(parents).zip(inherited).enumerate()
        {
            self.put(other, slot);
            self.put(built, Slot::Batch { batch: k, index });
            self.put_bits(other, bits);
            let own = occupied.map(|all| {
                let mut v = self.bit_pool.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(&all[index * words..(index + 1) * words]);
                v
            });
            self.put_bits(built, own);
        }
    }

    /// Takes back a histogram no node holds now; `bits`, where its node had them, say
    /// where it may be other than zero, and a piece of a batch is zeroed there.
    fn recycle(&mut self, slot: Slot, bits: Option<&[u64]>) {
        match slot {
            Slot::Own(buf) => {
                if buf.capacity() >= self.width {
                    self.pool.push(buf);
                }
            }
            Slot::Batch { batch, index } => {
                let w = self.width;
                let b = &mut self.batches[batch];
                match bits {
                    Some(bits) if !b.dirty => {
                        let piece = &mut b.buf[index * w..(index + 1) * w];
                        occupancy::each_set(bits, 0, w, |i| piece[i] = [0, 0]);
                    }
                    _ => b.dirty = true,
                }
                b.live -= 1;
                if b.live == 0 {
                    let buf = std::mem::take(&mut b.buf);
                    let zeroed = !b.dirty;
                    self.return_batch_zeroed(buf, zeroed);
                    self.vacant.push(batch);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_children_keep_their_histograms_in_the_batch_until_every_one_is_released() {
        let parent = |v: i64| vec![[10 * v, 20 * v], [5, 6], [0, 1]];
        let built = |v: i64| vec![[v, 2 * v], [1, 1], [0, 1]];
        let mut s = HistStore::new();
        s.reset(3);
        s.insert(NodeId(0), parent(1));
        let mut batch = s.take_batch(1);
        assert_eq!(batch.len(), 3);
        batch.copy_from_slice(&built(1));
        let at = batch.as_ptr();
        s.split_batch(&[(NodeId(0), NodeId(1), NodeId(2))], batch, None);
        assert_eq!(s.get(NodeId(1)), built(1).as_slice());
        assert_eq!(s.get(NodeId(1)).as_ptr(), at, "kept where it was built");
        assert_eq!(s.get(NodeId(2)), [[9, 18], [4, 5], [0, 0]]);
        // two at once, one parent in the first batch: both built children stay in theirs
        s.insert(NodeId(3), parent(2));
        let mut batch = s.take_batch(2);
        batch[..3].copy_from_slice(&built(1));
        batch[3..].copy_from_slice(&built(2));
        let second = batch.as_ptr();
        s.split_batch(
            &[
                (NodeId(2), NodeId(4), NodeId(5)),
                (NodeId(3), NodeId(6), NodeId(7)),
            ],
            batch,
            None,
        );
        assert_eq!(s.get(NodeId(4)), built(1).as_slice());
        assert_eq!(s.get(NodeId(4)).as_ptr(), second);
        assert_eq!(s.get(NodeId(5)), [[8, 16], [3, 4], [0, -1]]);
        assert_eq!(s.get(NodeId(6)), built(2).as_slice());
        assert_eq!(s.get(NodeId(6)).as_ptr(), second.wrapping_add(3));
        assert_eq!(s.get(NodeId(7)), [[18, 36], [4, 5], [0, 0]]);
        // the second batch is free only once nodes 4 and 6 are both released
        assert!(s.free.is_empty());
        s.release(NodeId(4));
        assert!(s.free.is_empty(), "node 6 still holds a histogram of it");
        assert_eq!(s.get(NodeId(6)), built(2).as_slice());
        s.release(NodeId(6));
        assert_eq!(s.free.len(), 1);
        let again = s.take_batch(2);
        assert_eq!(again.as_ptr(), second, "reused");
        s.return_batch(again);
        // a new tree frees the first batch too (node 1 held it), and the smallest free
        // batch that fits is taken
        s.reset(3);
        assert_eq!(s.free.len(), 2);
        let one = s.take_batch(1);
        assert_eq!(one.as_ptr(), at);
        s.return_batch(one);
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
        many.split_batch(&splits, built.clone(), None);
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

    #[test]
    fn parents_held_in_one_batch_split_as_each_alone() {
        // level 1: nodes 1 and 2 from one batch of the root's and node 9's splits; level 2
        // splits both, each parent a piece of that batch
        let width = 5;
        let hist = |seed: i64| -> Vec<HistBin> {
            (0..width as i64)
                .map(|b| [seed * 31 + b * 7, seed + b])
                .collect()
        };
        let (mut one, mut many) = (HistStore::new(), HistStore::new());
        for s in [&mut one, &mut many] {
            s.reset(width);
            s.insert(NodeId(0), hist(100));
            s.insert(NodeId(9), hist(200));
        }
        let level1 = [
            (NodeId(0), NodeId(1), NodeId(3)),
            (NodeId(9), NodeId(2), NodeId(4)),
        ];
        let built1: Vec<HistBin> = [hist(5), hist(6)].concat();
        for (i, &(p, b, o)) in level1.iter().enumerate() {
            one.split(p, b, o, &built1[i * width..(i + 1) * width]);
        }
        let mut batch = many.take_batch(2);
        batch.copy_from_slice(&built1);
        many.split_batch(&level1, batch, None);
        let level2 = [
            (NodeId(2), NodeId(5), NodeId(6)),
            (NodeId(1), NodeId(7), NodeId(8)),
        ];
        let built2: Vec<HistBin> = [hist(1), hist(2)].concat();
        for (i, &(p, b, o)) in level2.iter().enumerate() {
            one.split(p, b, o, &built2[i * width..(i + 1) * width]);
        }
        let mut batch = many.take_batch(2);
        batch.copy_from_slice(&built2);
        many.split_batch(&level2, batch, None);
        for n in [3, 4, 5, 6, 7, 8] {
            assert_eq!(one.get(NodeId(n)), many.get(NodeId(n)), "node {n}");
        }
        // node 6 = node 2 (built at level 1: hist(6)) - hist(1), in node 2's piece of the
        // first batch
        let want: Vec<HistBin> = (0..width).map(|b| sub(hist(6)[b], hist(1)[b])).collect();
        assert_eq!(many.get(NodeId(6)), want.as_slice());
        // nodes 6 and 8 hold the first batch's pieces (passed on from their parents), 5 and
        // 7 the second's: freeing 5 and 7 frees the second batch only
        let first = many.get(NodeId(8)).as_ptr();
        let second = many.get(NodeId(5)).as_ptr();
        many.release(NodeId(5));
        many.release(NodeId(7));
        assert_eq!(many.free.len(), 1);
        assert_eq!(many.free[0].as_ptr(), second);
        // a third batch takes the second's buffer and place while the first is held
        let mut batch = many.take_batch(1);
        assert_eq!(batch.as_ptr(), second);
        assert_eq!(
            batch.len(),
            2 * width,
            "a buffer keeps the length it grew to"
        );
        batch[..width].copy_from_slice(&hist(3));
        many.split_batch(&[(NodeId(4), NodeId(10), NodeId(11))], batch, None);
        assert_eq!(many.get(NodeId(10)), hist(3).as_slice());
        assert_eq!(
            many.get(NodeId(6)),
            want.as_slice(),
            "the first batch untouched"
        );
        assert_eq!(many.get(NodeId(8)).as_ptr(), first);
        many.release(NodeId(6));
        assert_eq!(many.free.len(), 0, "node 8 still holds the first batch");
        many.release(NodeId(8));
        assert_eq!(many.free.len(), 1);
        assert_eq!(many.free[0].as_ptr(), first);
    }
    #[test]
    fn occupied_bins_alone_are_subtracted_and_the_other_child_keeps_the_parents_bits() {
        // 130 bins: the bits span three words, and the subtraction several chunks
        let w = 2 * STORE_CHUNK + 130;
        let words = occupancy::words_for(w);
        let mut next = crate::test_rng::lcg(11);
        let mut s = HistStore::new();
        s.reset(w);
        // the parent holds rows in every third bin; the built child in some of those
        let parent: Vec<HistBin> = (0..w)
            .map(|b| {
                if b % 3 == 0 {
                    [(b as i64) - 40, 9]
                } else {
                    [0, 0]
                }
            })
            .collect();
        let mut child = vec![[0i64, 0]; w];
        let mut bits = vec![0u64; words];
        for b in (0..w).step_by(3) {
            if (next() >> 40).is_multiple_of(2) {
                child[b] = [(next() >> 60) as i64 - 8, (next() >> 61) as i64];
                occupancy::set(&mut bits, b);
            }
        }
        // a bit set over a bin of no rows changes nothing
        occupancy::set(&mut bits, 1);
        s.insert(NodeId(0), parent.clone());
        let mut batch = s.take_batch(1);
        batch.copy_from_slice(&child);
        s.split_batch(&[(NodeId(0), NodeId(1), NodeId(2))], batch, Some(&bits));
        let want: Vec<HistBin> = parent
            .iter()
            .zip(&child)
            .map(|(&p, &c)| sub(p, c))
            .collect();
        assert_eq!(s.get(NodeId(2)), want.as_slice());
        assert_eq!(s.occupied(NodeId(1)), Some(bits.as_slice()));
        assert_eq!(s.occupied(NodeId(2)), None, "the parent had no bits");
        // a level further down: node 2's children, the other one inheriting node 2's bits
        // (none) and node 1's (set) going to its own other child
        let mut batch = s.take_batch(2);
        batch.fill([0, 0]);
        batch[3] = [1, 1];
        batch[w + 3] = [2, 1];
        let mut level = vec![0u64; 2 * words];
        occupancy::set(&mut level, 3);
        occupancy::set(&mut level[words..], 3);
        s.split_batch(
            &[
                (NodeId(1), NodeId(3), NodeId(4)),
                (NodeId(2), NodeId(5), NodeId(6)),
            ],
            batch,
            Some(&level),
        );
        assert_eq!(s.occupied(NodeId(4)), Some(bits.as_slice()));
        assert_eq!(s.occupied(NodeId(6)), None);
        assert_eq!(s.occupied(NodeId(3)), Some(&level[..words]));
        assert_eq!(s.get(NodeId(4))[3], sub(child[3], [1, 1]));
        assert_eq!(s.get(NodeId(6))[3], sub(want[3], [2, 1]));
        assert_eq!(
            s.occupied(NodeId(1)),
            None,
            "a split parent's bits go to its child"
        );
        s.release(NodeId(4));
        assert_eq!(s.occupied(NodeId(4)), None);
        assert_eq!(s.bit_pool.len(), 1, "released bits are pooled");
    }
    #[test]
    fn a_batch_released_with_bits_comes_back_zeroed_and_one_without_does_not() {
        let w = 200;
        let words = occupancy::words_for(w);
        let mut s = HistStore::new();
        s.reset(w);
        s.insert(NodeId(0), vec![[3, 3]; w]);
        s.insert(NodeId(1), vec![[5, 5]; w]);
        let (mut batch, zeroed) = s.take_batch_zeroed(2);
        assert!(zeroed, "a new buffer is zeros");
        let mut bits = vec![0u64; 2 * words];
        for (i, b) in [(0usize, 7usize), (0, 150), (1, 7), (1, 199)] {
            batch[i * w + b] = [1, 1];
            occupancy::set(&mut bits[i * words..], b);
        }
        s.split_batch(
            &[
                (NodeId(0), NodeId(2), NodeId(3)),
                (NodeId(1), NodeId(4), NodeId(5)),
            ],
            batch,
            Some(&bits),
        );
        s.release(NodeId(2));
        assert!(s.free.is_empty());
        s.release(NodeId(4));
        assert_eq!(s.zeroed, [true]);
        let (again, zeroed) = s.take_batch_zeroed(2);
        assert!(zeroed);
        assert!(again.iter().all(|&b| b == [0, 0]), "zeroed at the bits");
        // a piece released without bits (a parent had none) leaves the batch as it was
        let mut again = again;
        again[w + 3] = [2, 2];
        s.split_batch(
            &[
                (NodeId(3), NodeId(6), NodeId(7)),
                (NodeId(5), NodeId(8), NodeId(9)),
            ],
            again,
            None,
        );
        s.release(NodeId(6));
        s.release(NodeId(8));
        let (_, zeroed) = s.take_batch_zeroed(2);
        assert!(!zeroed);
        // a new tree returns what nodes hold, zeroed where their bits allow
        s.reset(w);
        assert!(s.nodes.is_empty() && s.occupied.is_empty());
    }
}
