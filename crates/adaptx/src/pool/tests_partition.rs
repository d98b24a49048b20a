//! Property tests of the partitioned pool against a sequential model with
//! its own (integer) arithmetic: every admission decision, every count, the
//! limit never exceeded once no shrink is pending, and a partition under its
//! reservation never refused while the limit has room.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::{Discipline, Partitions, Pool, TryFail};

/// Shares in percent: default (slot 0) takes the rest, 20.
const PCT: [u64; 4] = [20, 30, 50, 0];

#[derive(Debug, Clone)]
enum Op {
    Acquire(u8),
    Release(usize),
    SetLimit(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3).prop_map(Op::Acquire),
        4 => any::<usize>().prop_map(Op::Release),
        1 => (1usize..=16).prop_map(Op::SetLimit),
    ]
}

/// The model: counts, limit, and reservations by largest remainder in
/// units of 1/200 of a slot (ρ in halves, shares in percent).
struct Model {
    used: [u64; 3],
    limit: u64,
    rho2: u64,
    held: Vec<u8>,
}

impl Model {
    fn reserves(&self) -> [u64; 3] {
        let q: Vec<u64> = (0..3).map(|j| self.rho2 * self.limit * PCT[j]).collect();
        let slots = self.rho2 * self.limit / 2;
        let mut r: Vec<u64> = q.iter().map(|x| x / 200).collect();
        let mut left = slots - r.iter().sum::<u64>();
        let mut order = [0usize, 1, 2];
        order.sort_by_key(|&j| (std::cmp::Reverse(q[j] % 200), std::cmp::Reverse(PCT[j]), j));
        for j in order {
            if left > 0 && q[j] % 200 > 0 {
                r[j] += 1;
                left -= 1;
            }
        }
        [r[0], r[1], r[2]]
    }

    fn admits(&self, i: usize) -> bool {
        let r = self.reserves();
        let sum: u64 = self.used.iter().sum();
        let claims: u64 = (0..3).map(|j| self.used[j].max(r[j])).sum();
        sum < self.limit && (self.used[i] < r[i] || claims < self.limit)
    }
}

fn run(initial: usize, rho2: u64, ops: &[Op]) {
    let table = Partitions::new()
        .share("a", 0.3)
        .share("b", 0.5)
        .reserve(rho2 as f64 / 2.0)
        .table(100)
        .expect("valid");
    let pool = Pool::with(initial, Discipline::default(), Some(table), None);
    let mut m = Model {
        used: [0; 3],
        limit: initial as u64,
        rho2,
        held: Vec::new(),
    };
    for op in ops {
        match *op {
            Op::Acquire(slot) => {
                let i = usize::from(slot);
                let want = m.admits(i);
                let under_reserve = m.used[i] < m.reserves()[i];
                let got = pool.try_acquire_as(slot);
                assert_eq!(got.is_ok(), want, "{op:?} with {:?}", m.used);
                if got.is_err() {
                    assert_eq!(got, Err(TryFail::NoCapacity));
                    let sum: u64 = m.used.iter().sum();
                    assert!(
                        !(under_reserve && sum < m.limit),
                        "a partition under its reservation refused with room"
                    );
                } else {
                    m.used[i] += 1;
                    m.held.push(slot);
                }
            }
            Op::Release(k) if !m.held.is_empty() => {
                let slot = m.held.swap_remove(k % m.held.len());
                pool.release_from(slot);
                m.used[usize::from(slot)] -= 1;
            }
            Op::Release(_) => {}
            Op::SetLimit(l) => {
                pool.set_limit(l);
                m.limit = l as u64;
            }
        }
        let t = pool.table().expect("partitioned");
        for j in 0..3 {
            assert_eq!(t.used(j) as u64, m.used[j], "partition {j}");
        }
        let sum: u64 = m.used.iter().sum();
        assert_eq!(pool.in_flight() as u64, sum);
        assert_eq!(pool.limit() as u64, m.limit);
    }
}

proptest! {
    #![proptest_config(Config {
        cases: 1024,
        rng_seed: RngSeed::Fixed(0x00ad_a973),
        failure_persistence: None,
        ..Config::default()
    })]

    /// Admission decisions and counts equal the model's.
    #[test]
    fn partition_pool_matches_sequential_model(
        initial in 1usize..=16,
        rho2 in 0u64..=2,
        ops in prop::collection::vec(op(), 1..128),
    ) {
        run(initial, rho2, &ops);
    }
}
