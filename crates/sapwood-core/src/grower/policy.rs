//! Which nodes expand next (XGBoost's `Driver`): a whole level at a time (depth-wise) or the
//! best node first (loss-guided). The driver sees split candidates only; it never touches a
//! histogram or a worker.

use crate::params::GrowPolicy;
use crate::split::SplitCandidate;
use crate::tree::NodeId;

/// A node that can split, with its best candidate.
#[derive(Debug, Clone)]
pub struct Expandable {
    /// The node.
    pub id: NodeId,
    /// Its depth (the root is 0).
    pub depth: usize,
    /// Its best split.
    pub best: SplitCandidate,
}

/// The queue of expandable nodes under a growth policy and a leaf budget.
#[derive(Debug)]
pub struct Driver {
    policy: GrowPolicy,
    /// 0 for none
    max_leaves: usize,
    leaves: usize,
    queue: Vec<Expandable>,
}

impl Driver {
    /// A driver for a tree that is one leaf (the root).
    pub fn new(policy: GrowPolicy, max_leaves: usize) -> Self {
        Driver {
            policy,
            max_leaves,
            leaves: 1,
            queue: Vec::new(),
        }
    }

    /// Queues nodes that can split.
    pub fn push(&mut self, nodes: impl IntoIterator<Item = Expandable>) {
        self.queue.extend(nodes);
    }

    /// Takes every queued node out (to refresh their candidates; push them back).
    pub fn take_queued(&mut self) -> Vec<Expandable> {
        std::mem::take(&mut self.queue)
    }

    /// The nodes to split next, in ascending id order (the order children are numbered in);
    /// empty when the tree is finished. Each split adds one leaf.
    pub fn pop_batch(&mut self) -> Vec<Expandable> {
        let batch = match self.policy {
            GrowPolicy::Depthwise => self.next_level(),
            GrowPolicy::Lossguide => self.best_node(),
        };
        self.leaves += batch.len();
        batch
    }

    fn room(&self) -> usize {
        if self.max_leaves == 0 {
            usize::MAX
        } else {
            self.max_leaves.saturating_sub(self.leaves)
        }
    }

    /// The whole level; past the leaf budget, its largest gains (ties to the smaller id).
    fn next_level(&mut self) -> Vec<Expandable> {
        let mut level = std::mem::take(&mut self.queue);
        let room = self.room();
        if level.len() > room {
            level.sort_by(|a, b| b.best.gain.total_cmp(&a.best.gain).then(a.id.cmp(&b.id)));
            level.truncate(room);
        }
        level.sort_by_key(|e| e.id);
        level
    }

    /// The node of largest gain (ties to the smaller id), while leaves are left.
    fn best_node(&mut self) -> Vec<Expandable> {
        if self.room() == 0 {
            return Vec::new();
        }
        let best = self
            .queue
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| a.best.gain.total_cmp(&b.best.gain).then(b.id.cmp(&a.id)))
            .map(|(i, _)| i);
        best.map(|i| vec![self.queue.swap_remove(i)])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::SplitRule;

    fn node(id: u32, gain: f64) -> Expandable {
        Expandable {
            id: NodeId(id),
            depth: 1,
            best: SplitCandidate {
                feature: 0,
                rule: SplitRule::Numeric { bin: 1 },
                default_left: false,
                gain,
                left: [0, 0],
                right: [0, 1],
            },
        }
    }

    fn ids(b: &[Expandable]) -> Vec<u32> {
        b.iter().map(|e| e.id.0).collect()
    }

    #[test]
    fn depthwise_takes_the_level_and_cuts_it_by_gain_at_the_leaf_budget() {
        let mut d = Driver::new(GrowPolicy::Depthwise, 0);
        d.push([node(2, 1.0), node(1, 3.0)]);
        assert_eq!(ids(&d.pop_batch()), [1, 2]);
        assert!(d.pop_batch().is_empty());

        let mut d = Driver::new(GrowPolicy::Depthwise, 4);
        d.push([node(1, 1.0), node(2, 5.0), node(3, 5.0), node(4, 9.0)]);
        // 3 leaves of room: gains 9, 5, 5 (ties to the smaller id), returned by id
        assert_eq!(ids(&d.pop_batch()), [2, 3, 4]);
        d.push([node(9, 1.0)]);
        assert!(d.pop_batch().is_empty(), "the budget is spent");
    }

    #[test]
    fn lossguide_takes_the_best_node_first_until_the_budget() {
        let mut d = Driver::new(GrowPolicy::Lossguide, 3);
        d.push([node(1, 2.0), node(2, 7.0), node(3, 7.0)]);
        assert_eq!(ids(&d.pop_batch()), [2]);
        assert_eq!(ids(&d.pop_batch()), [3]);
        assert!(d.pop_batch().is_empty());
    }
}
