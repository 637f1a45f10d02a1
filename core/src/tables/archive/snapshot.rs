//! PostgreSQL snapshots (`pg_snapshot`) as the live consumer uses them: what it has applied is
//! "every event whose inserting transaction this snapshot sees", and a round applies the events of
//! the transactions one snapshot sees and an earlier one did not ([`newly_visible`]).
//!
//! Pure: parsing, visibility and the xid ranges a round reads. The database only hands out the
//! snapshots (`pg_current_snapshot()`) and stores them.

use std::fmt;

/// A snapshot: every transaction below `xmin` has ended; `xip` (sorted) were running when it was
/// taken; `xmax` and above had not started. A transaction is visible when it had ended by then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub xmin: u64,
    pub xmax: u64,
    /// In progress when the snapshot was taken, sorted, each in `[xmin, xmax)`.
    pub xip: Vec<u64>,
}

/// A text that is not a `pg_snapshot`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected pg_snapshot value {0:?}")]
pub struct BadSnapshot(pub String);

impl Snapshot {
    /// A snapshot that sees no transaction at all (xid 1 is the first one PostgreSQL knows).
    pub fn nothing() -> Snapshot {
        Snapshot::below(1)
    }

    /// A snapshot that sees exactly the transactions below `xid`.
    pub fn below(xid: u64) -> Snapshot {
        let xid = xid.max(1);
        Snapshot {
            xmin: xid,
            xmax: xid,
            xip: Vec::new(),
        }
    }

    /// Whether the transaction `xid` had ended when the snapshot was taken (its rows, if it
    /// committed, are visible to it).
    pub fn visible(&self, xid: u64) -> bool {
        xid < self.xmin || (xid < self.xmax && self.xip.binary_search(&xid).is_err())
    }

    /// Parses `pg_snapshot`'s text form, `xmin:xmax:xip,xip,…`.
    pub fn parse(text: &str) -> Result<Snapshot, BadSnapshot> {
        let bad = || BadSnapshot(text.to_string());
        let mut parts = text.splitn(3, ':');
        let number = |p: Option<&str>| p.and_then(|p| p.parse::<u64>().ok()).ok_or_else(bad);
        let (xmin, xmax) = (number(parts.next())?, number(parts.next())?);
        let list = parts.next().ok_or_else(bad)?;
        let mut xip = list
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<_>, _>>()?;
        xip.sort_unstable();
        xip.dedup();
        if xmin > xmax || xip.iter().any(|x| *x < xmin || *x >= xmax) {
            return Err(bad());
        }
        Ok(Snapshot { xmin, xmax, xip })
    }
}

impl fmt::Display for Snapshot {
    /// `pg_snapshot`'s text form, which PostgreSQL reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:", self.xmin, self.xmax)?;
        for (i, x) in self.xip.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

/// The transactions `to` sees and `from` did not, as sorted, disjoint half-open xid ranges
/// `[lo, hi)`: those running at `from` that have ended by `to`, then those that started after
/// `from` and had ended by `to`. `to` must be taken after `from` (what `from` sees, `to` sees).
pub fn newly_visible(from: &Snapshot, to: &Snapshot) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = from
        .xip
        .iter()
        .filter(|x| to.visible(**x))
        .map(|x| (*x, x + 1))
        .collect();
    // [from.xmax, to.xmax) without the transactions `to` saw running.
    let mut lo = from.xmax;
    for &running in to.xip.iter().filter(|x| **x >= from.xmax) {
        if running > lo {
            ranges.push((lo, running));
        }
        lo = running + 1;
    }
    if to.xmax > lo {
        ranges.push((lo, to.xmax));
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn snap(text: &str) -> Snapshot {
        Snapshot::parse(text).unwrap()
    }

    #[test]
    fn the_text_form_reads_back_as_itself() {
        for text in ["10:20:", "10:20:12,15", "1:1:"] {
            assert_eq!(snap(text).to_string(), text);
        }
        assert!(Snapshot::parse("20:10:").is_err());
        assert!(Snapshot::parse("10:20:25").is_err());
        assert!(Snapshot::parse("10:20").is_err());
        assert!(Snapshot::parse("x:20:").is_err());
    }

    #[test]
    fn a_round_reads_what_ended_since_and_what_began_and_ended_since() {
        // At `from`, 12 and 15 ran; at `to`, 15 still runs, and so do 22 and 25.
        let (from, to) = (snap("10:20:12,15"), snap("15:30:15,22,25"));

        assert_eq!(
            newly_visible(&from, &to),
            vec![(12, 13), (20, 22), (23, 25), (26, 30)]
        );
        assert_eq!(newly_visible(&to, &to), Vec::<(u64, u64)>::new());
    }

    /// A pair of snapshots, the second taken after the first: every transaction the first saw
    /// ended is still ended, some that ran have ended, new ones began.
    fn pair() -> impl Strategy<Value = (Snapshot, Snapshot)> {
        (1u64..50, 0u64..30, 0u64..30, any::<u64>(), any::<u64>()).prop_map(
            |(xmin, width, growth, running_a, running_b)| {
                let xmax = xmin + width;
                let a_xip: Vec<u64> = (xmin..xmax)
                    .filter(|x| running_a >> (x % 64) & 1 == 1)
                    .collect();
                let xmax2 = xmax + growth;
                // Still running at the second: some of the first's, and some new ones.
                let b_xip: Vec<u64> = a_xip
                    .iter()
                    .copied()
                    .chain(xmax..xmax2)
                    .filter(|x| running_b >> (x % 64) & 1 == 1)
                    .collect();
                let xmin2 = b_xip.first().copied().unwrap_or(xmax2);
                let a = Snapshot {
                    xmin: a_xip.first().copied().unwrap_or(xmax),
                    xmax,
                    xip: a_xip,
                };
                let b = Snapshot {
                    xmin: xmin2,
                    xmax: xmax2,
                    xip: b_xip,
                };
                (a, b)
            },
        )
    }

    proptest! {
        #[test]
        fn the_ranges_hold_exactly_the_transactions_newly_visible((a, b) in pair()) {
            let ranges = newly_visible(&a, &b);
            for w in ranges.windows(2) {
                prop_assert!(w[0].1 <= w[1].0, "sorted and disjoint: {:?}", ranges);
            }
            for xid in 0..b.xmax + 5 {
                let inside = ranges.iter().any(|(lo, hi)| (*lo..*hi).contains(&xid));
                prop_assert_eq!(inside, b.visible(xid) && !a.visible(xid), "xid {}", xid);
            }
        }
    }
}
