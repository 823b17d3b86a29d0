//! Weighted shortest paths (Memgraph's `*WSHORTEST` / `*ALLSHORTEST` with a weight
//! lambda that differs between steps): Dijkstra's search from the start node over the
//! steps the path predicates admit, each step weighed by the lambda over its
//! relationship and the node it reaches.
//!
//! With a hop bound (`*WSHORTEST 15 (...)`), the lightest path within 15 hops may be
//! heavier than the lightest path of all, so a node can be settled more than once: the
//! search's states are (node, hops), and a state is dropped when the node was settled
//! already at no more hops and a lighter (for one path: no heavier) weight. Without a
//! bound a state is a node. Ties are broken by hops, so of two paths of one weight the
//! shorter is found first.

use super::expand::{step_lambda, Step};
use super::*;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One state of the search: a node reached in `hops` steps at weight `w`, with the
/// step that reaches it at that weight (`parent`: the previous state, the relationship;
/// for `*ALLSHORTEST` the other steps of the same weight are in the search's `more`).
struct State {
    node: u64,
    hops: u32,
    w: f64,
    /// The exact sum while every weight so far is an integer.
    wi: Option<i64>,
    settled: bool,
    parent: Option<(u32, RelRef)>,
}

/// The state of each (node, hops) key: a hash map while the search is small; without a
/// hop bound (a state a node), a dense array over the node ids once it is not (a
/// search that settles much of a large graph probes it once a relationship).
enum StateIndex {
    Map(HashMap<(u64, u32), u32>),
    Dense(Vec<u32>),
}

impl StateIndex {
    fn get(&self, key: (u64, u32)) -> Option<u32> {
        match self {
            StateIndex::Map(m) => m.get(&key).copied(),
            StateIndex::Dense(v) => v.get(key.0 as usize).copied().filter(|&i| i != u32::MAX),
        }
    }

    /// Records `key`'s state; `dense_at` is the node-id bound when a dense array may
    /// replace the map (no hop bound), 0 otherwise.
    fn insert(&mut self, key: (u64, u32), state: u32, dense_at: u64) {
        match self {
            StateIndex::Map(m) => {
                m.insert(key, state);
                if dense_at > 0 && m.len() as u64 > dense_at / 32 {
                    let mut v = vec![u32::MAX; dense_at as usize];
                    for (&(n, _), &i) in m.iter() {
                        v[n as usize] = i;
                    }
                    *self = StateIndex::Dense(v);
                }
            }
            StateIndex::Dense(v) => {
                let n = key.0 as usize;
                if n >= v.len() {
                    v.resize(n + 1, u32::MAX);
                }
                v[n] = state;
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            StateIndex::Map(m) => m.len() * 24,
            StateIndex::Dense(v) => v.len() * 4,
        }
    }
}

/// A heap entry: the least weight first, then the fewest hops.
#[derive(PartialEq)]
struct Entry {
    w: f64,
    hops: u32,
    state: u32,
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        o.w.total_cmp(&self.w)
            .then(o.hops.cmp(&self.hops))
            .then(o.state.cmp(&self.state))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A step's weight as the lambda gave it: a number that is not negative.
fn step_weight(v: &Value) -> Result<(f64, Option<i64>), QueryError> {
    let (f, i) = match *v {
        Value::Int(i) => (i as f64, Some(i)),
        Value::Float(f) => (f, None),
        ref other => {
            return Err(QueryError::ty(format!(
                "a weight lambda must give a number for every step, it gave {}",
                other.type_name()
            )))
        }
    };
    if f.is_nan() || f < 0.0 {
        return Err(QueryError::ty(format!(
            "a weight lambda must give weights that are not negative, it gave {f}"
        )));
    }
    Ok((f, i))
}

impl ShortestPath {
    /// The lightest paths from `s` (to `t` when bound, else to every node reached,
    /// each once): rows of the input row with [target,] path, total weight.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn weighted(
        &self,
        cx: &Cx,
        weight: &CExpr,
        grant: &mut Grant,
        b: &Batch,
        row: usize,
        s: u64,
        t: Option<u64>,
        out: &mut Batch,
    ) -> Result<(), QueryError> {
        if !self.node_meets(cx, s)? {
            return Ok(());
        }
        if let Some(t) = t {
            if !self.node_meets(cx, t)? {
                return Ok(());
            }
        }
        let bounded = self.max != u32::MAX;
        let mut states: Vec<State> = vec![State {
            node: s,
            hops: 0,
            w: 0.0,
            wi: Some(0),
            settled: false,
            parent: None,
        }];
        let dense_at = if bounded { 0 } else { cx.env.g.n_nodes() };
        let mut index = StateIndex::Map(HashMap::new());
        index.insert((s, 0), 0, dense_at);
        // Per node, the (weight, hops) of the states settled so far, lightest first.
        let mut settled: HashMap<u64, Vec<(f64, u32)>> = HashMap::new();
        // Per node, the states that answer for it (the lightest; all of them for ALL).
        let mut answers: Vec<(u64, Vec<u32>)> = Vec::new();
        let mut answer_of: HashMap<u64, usize> = HashMap::new();
        let mut heap = BinaryHeap::from([Entry {
            w: 0.0,
            hops: 0,
            state: 0,
        }]);
        // ALLSHORTEST: the steps that reach a state at its weight besides its parent.
        let mut more: HashMap<u32, Vec<(u32, RelRef)>> = HashMap::new();
        let mut verdicts = super::expand::Verdicts::new(cx.env.g.n_nodes());
        let mut nbrs = Vec::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut done_weight: Option<f64> = None;
        while let Some(Entry { w, hops, state }) = heap.pop() {
            let st = &states[state as usize];
            if st.settled || st.w < w || (st.w == w && st.hops < hops) {
                continue; // stale entry
            }
            if done_weight.is_some_and(|d| w > d) {
                break;
            }
            let node = st.node;
            if bounded {
                // A node settles again only at fewer hops than before and a weight no
                // path through it had yet (the same weight, for ALLSHORTEST).
                let prior = settled.entry(node).or_default();
                let dominated = prior
                    .iter()
                    .any(|&(pw, ph)| ph <= hops && (pw < w || (!self.all && pw <= w)));
                if dominated {
                    continue;
                }
                prior.push((w, hops));
            }
            states[state as usize].settled = true;
            if !bounded {
                answers.push((node, vec![state])); // a node settles once
            } else {
                match answer_of.get(&node) {
                    None => {
                        answer_of.insert(node, answers.len());
                        answers.push((node, vec![state]));
                    }
                    Some(&k) if self.all && states[answers[k].1[0] as usize].w == w => {
                        answers[k].1.push(state)
                    }
                    Some(_) => {}
                }
            }
            if t == Some(node) && done_weight.is_none() {
                if !self.all {
                    break;
                }
                done_weight = Some(w);
            }
            if hops >= self.max {
                continue;
            }
            cx.check_cancel()?;
            // The steps from this node that the predicates admit, and their weights.
            nbrs.clear();
            cx.env.g.step_rels(&self.types, self.dir, node, &mut nbrs)?;
            steps.clear();
            steps.extend(nbrs.iter().map(|&(v, r)| (node, v, r, false)));
            self.admit(cx, &mut steps, &mut verdicts, false)?;
            let weights = step_lambda(cx, weight, &steps, false)?;
            let (base_w, base_wi) = (states[state as usize].w, states[state as usize].wi);
            for (&(_, v, r, _), sw) in steps.iter().zip(&weights) {
                let (f, i) = step_weight(sw)?;
                let (nw, nwi) = (
                    base_w + f,
                    base_wi.zip(i).and_then(|(a, b)| a.checked_add(b)),
                );
                let nh = hops + 1;
                let key = (v, if bounded { nh } else { 0 });
                match index.get(key) {
                    None => {
                        index.insert(key, states.len() as u32, dense_at);
                        heap.push(Entry {
                            w: nw,
                            hops: nh,
                            state: states.len() as u32,
                        });
                        states.push(State {
                            node: v,
                            hops: nh,
                            w: nw,
                            wi: nwi,
                            settled: false,
                            parent: Some((state, r)),
                        });
                    }
                    Some(k) => {
                        let o = &mut states[k as usize];
                        if o.settled {
                            continue;
                        }
                        let better = nw < o.w || (nw == o.w && nh < o.hops);
                        if better {
                            (o.w, o.wi, o.hops) = (nw, nwi, nh);
                            o.parent = Some((state, r));
                            more.remove(&k);
                            heap.push(Entry {
                                w: nw,
                                hops: nh,
                                state: k,
                            });
                        } else if self.all && nw == o.w {
                            more.entry(k).or_default().push((state, r));
                        }
                    }
                }
            }
            account(
                grant,
                (states.len() * 96 + index.bytes() + heap.len() * 24) as u64,
                "WeightedShortestPath",
            )?;
        }
        for (node, ends) in answers {
            if t.is_some_and(|t| t != node) || (node == s && self.min > 0) {
                continue;
            }
            if t.is_none() {
                let mut ok = true;
                for &l in &self.labels {
                    ok &= cx.env.g.has_label(node, l)?;
                }
                if !ok {
                    continue;
                }
            }
            for end in ends {
                let total = match states[end as usize].wi {
                    Some(i) => Value::Int(i),
                    None => Value::Float(states[end as usize].w),
                };
                for p in self.weighted_paths(&states, &more, end) {
                    if rel_used_any(&p.rels, b, row, &self.uniq) {
                        continue;
                    }
                    let mut extra = Vec::with_capacity(3);
                    if t.is_none() {
                        extra.push(Value::Node(node));
                    }
                    extra.push(Value::Path(Arc::new(p)));
                    extra.push(total.clone());
                    out.push_row_from(b, row, &extra);
                }
            }
        }
        Ok(())
    }

    /// The paths to state `end` through its parents (one, or all for `*ALLSHORTEST`),
    /// without those that take a relationship twice (a bounded search's zero-weight
    /// cycles could).
    fn weighted_paths(
        &self,
        states: &[State],
        more: &HashMap<u32, Vec<(u32, RelRef)>>,
        end: u32,
    ) -> Vec<PathVal> {
        let mut out = Vec::new();
        let mut work = vec![(end, vec![states[end as usize].node], Vec::new())];
        while let Some((at, nodes, rels)) = work.pop() {
            let Some(first) = states[at as usize].parent else {
                let mut p = PathVal { nodes, rels };
                p.nodes.reverse();
                p.rels.reverse();
                let mut u = p.rels.clone();
                u.sort_by_key(|r| (r.ty, r.eid));
                u.dedup();
                if u.len() == p.rels.len() {
                    out.push(p);
                    if !self.all {
                        break;
                    }
                }
                continue;
            };
            let others = more.get(&at).map_or(&[][..], |v| &v[..]);
            for &(prev, r) in std::iter::once(&first).chain(others) {
                let mut n2 = nodes.clone();
                let mut r2: Vec<RelRef> = rels.clone();
                n2.push(states[prev as usize].node);
                r2.push(r);
                work.push((prev, n2, r2));
            }
        }
        out
    }
}
