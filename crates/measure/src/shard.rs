//! Client shards: one workload split over N independent processes (on one
//! machine or many) whose results merge exactly. Shard `i/N` takes
//!
//! - every N-th connection of the active set and every N-th idle connection,
//!   starting at position `i-1`, so the union of the shards is the single
//!   run's connection set and the single run's active set;
//! - every N-th send of the single run's fixed schedule, starting at send
//!   `i-1`, so the union of the shards' sends is the single run's schedule
//!   and the request counts add up exactly (Poisson shards draw rate/N each:
//!   a superposition of Poisson processes is Poisson).

use crate::active::choose_active;
use crate::ratio::ActiveRatio;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (1-based, as written on the command line: `2/5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, 1..=count.
    pub index: u32,
    /// How many shards in all.
    pub count: u32,
}

impl Shard {
    /// The whole run: shard 1 of 1.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`.
    ///
    /// # Errors
    ///
    /// Unless `1 <= index <= count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 || index == 0 || index > count {
            return Err(ShardError::OutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    /// True for 1/1.
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// 0-based position of this shard.
    pub fn offset(&self) -> usize {
        (self.index - 1) as usize
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why a shard is not valid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    /// Not of the form `i/N`.
    #[error("shard {0:?} is not of the form i/N (e.g. 2/5)")]
    Syntax(String),
    /// `i` outside `1..=N`.
    #[error("shard {index}/{count}: i must be between 1 and N (and N at least 1)")]
    OutOfRange {
        /// The `i` given.
        index: u32,
        /// The `N` given.
        count: u32,
    },
    /// The shard would carry no traffic.
    #[error(
        "shard {shard} would have no active connection: the run has {active} active \
         connections, so it can be split over at most {active} shards"
    )]
    NoActive {
        /// The shard.
        shard: Shard,
        /// Active connections of the whole run.
        active: usize,
    },
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(syntax)?;
        let i: u32 = i.trim().parse().map_err(|_| syntax())?;
        let n: u32 = n.trim().parse().map_err(|_| syntax())?;
        Shard::new(i, n)
    }
}

/// The connections of one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSlice {
    /// Indices, in the whole run's numbering, of this shard's connections,
    /// ascending; the shard opens this many.
    pub global: Vec<usize>,
    /// Positions in `global` of the active connections, ascending.
    pub active_local: Vec<usize>,
}

impl ShardSlice {
    /// The slice of `shard` of a run of `connections` connections whose
    /// active set is the seeded [`choose_active`]`(connections, ratio, seed)`.
    /// For [`Shard::WHOLE`] it is every connection and exactly that set.
    ///
    /// # Errors
    ///
    /// [`ShardError::NoActive`] when the shard would get no active
    /// connection although the run has some.
    pub fn of(
        connections: usize,
        ratio: ActiveRatio,
        seed: u64,
        shard: Shard,
    ) -> Result<ShardSlice, ShardError> {
        let active = choose_active(connections, ratio, seed);
        let mut is_active = vec![false; connections];
        for &a in &active {
            is_active[a] = true;
        }
        let (n, at) = (shard.count as usize, shard.offset());
        let mine_active: Vec<usize> = active.iter().copied().skip(at).step_by(n).collect();
        if mine_active.is_empty() && !active.is_empty() {
            return Err(ShardError::NoActive {
                shard,
                active: active.len(),
            });
        }
        let idle = (0..connections).filter(|&c| !is_active[c]);
        let mut global: Vec<usize> = idle.skip(at).step_by(n).collect();
        global.extend(&mine_active);
        global.sort_unstable();
        let active_local = global
            .iter()
            .enumerate()
            .filter(|(_, g)| is_active[**g])
            .map(|(l, _)| l)
            .collect();
        Ok(ShardSlice {
            global,
            active_local,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("2/5".parse(), Ok(Shard { index: 2, count: 5 }));
        assert_eq!(" 1 / 1 ".parse(), Ok(Shard::WHOLE));
        assert!(matches!(
            "0/5".parse::<Shard>(),
            Err(ShardError::OutOfRange { .. })
        ));
        assert!(matches!(
            "6/5".parse::<Shard>(),
            Err(ShardError::OutOfRange { .. })
        ));
        assert!(matches!("2".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert!(matches!("a/b".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert_eq!(Shard::new(2, 5).unwrap().to_string(), "2/5");
    }

    #[test]
    fn whole_run_is_every_connection_and_the_chosen_active_set() {
        let r: ActiveRatio = "1/16".parse().unwrap();
        let s = ShardSlice::of(1000, r, 7, Shard::WHOLE).unwrap();
        assert_eq!(s.global, (0..1000).collect::<Vec<_>>());
        assert_eq!(s.active_local, choose_active(1000, r, 7));
    }

    #[test]
    fn refuses_more_shards_than_active_connections() {
        let r: ActiveRatio = "1/16".parse().unwrap(); // 2 active of 20
        assert!(ShardSlice::of(20, r, 1, Shard::new(2, 2).unwrap()).is_ok());
        assert_eq!(
            ShardSlice::of(20, r, 1, Shard::new(3, 3).unwrap()),
            Err(ShardError::NoActive {
                shard: Shard::new(3, 3).unwrap(),
                active: 2
            })
        );
    }

    proptest! {
        #[test]
        fn shards_partition_connections_and_active_set(
            n in 1usize..3000, k in 1u32..8, num in 1u32..16, seed in any::<u64>()
        ) {
            let ratio = ActiveRatio::new(f64::from(num) / 16.0).unwrap();
            let active = choose_active(n, ratio, seed);
            prop_assume!(active.len() >= k as usize);
            let mut all = Vec::new();
            let mut all_active = Vec::new();
            for i in 1..=k {
                let s = ShardSlice::of(n, ratio, seed, Shard::new(i, k).unwrap()).unwrap();
                prop_assert!(!s.active_local.is_empty());
                all_active.extend(s.active_local.iter().map(|&l| s.global[l]));
                all.extend(s.global);
            }
            all.sort_unstable();
            all_active.sort_unstable();
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
            prop_assert_eq!(all_active, active);
        }
    }
}
