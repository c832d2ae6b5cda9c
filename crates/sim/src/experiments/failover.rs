//! What a master's failure costs the clients of a WAN experiment (seed 001 §4.1.3, "Master migration and failure
//! recovery"): the master region's node is killed while the load runs, and every operation's outcome is kept so
//! that, per client region, the time until reads and writes succeed again and the delay of the reads caught in
//! between can be read off. Clients of the killed node's region turn to the next region's node, as a client
//! whose server stopped answering would.

use super::wan::{ms, Samples};
use std::time::Duration;

/// One operation of the measured time: its client's region, when it was sent and answered (on the simulator's
/// clock, in ns), whether it was a read, and whether it succeeded. One never answered counts as failed at the end.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    pub region: usize,
    pub sent: u64,
    pub done: u64,
    pub read: bool,
    pub ok: bool,
}

/// One client region's view of the failure.
#[derive(Clone, Debug)]
pub struct RegionFailover {
    pub region: String,
    /// From the kill to the answer of the first read (write) sent after it that succeeded; None if none did.
    pub reads_back: Option<Duration>,
    pub writes_back: Option<Duration>,
    /// Reads sent from the kill until writes were back (or until the end): how long they took, those answered.
    pub caught: Samples,
    /// Operations sent after the kill that failed or were never answered.
    pub failed: usize,
}

#[derive(Clone, Debug)]
pub struct Failover {
    /// The node killed, and how far into the measured time.
    pub node: String,
    pub after: Duration,
    pub regions: Vec<RegionFailover>,
}

impl Failover {
    /// Reads the failure's cost off `outcomes` for each of `regions`; the kill came at `at` (ns) on the
    /// simulator's clock, `after` into the measured time.
    pub fn measure(node: String, (at, after): (u64, Duration), regions: &[String], outcomes: &[Outcome]) -> Failover {
        let regions = regions.iter().enumerate().map(|(r, name)| {
            let after: Vec<&Outcome> = outcomes.iter().filter(|o| o.region == r && o.sent >= at).collect();
            let back = |read: bool| {
                let first = after.iter().filter(|o| o.read == read && o.ok).map(|o| o.done).min()?;
                Some(Duration::from_nanos(first - at))
            };
            let (reads_back, writes_back) = (back(true), back(false));
            let until = writes_back.map_or(u64::MAX, |d| at + d.as_nanos() as u64);
            let caught = after.iter().filter(|o| o.read && o.ok && o.sent <= until);
            RegionFailover {
                region: name.clone(),
                reads_back,
                writes_back,
                caught: Samples::of(caught.map(|o| Duration::from_nanos(o.done - o.sent)).collect()),
                failed: after.iter().filter(|o| !o.ok).count(),
            }
        });
        Failover { node, after, regions: regions.collect() }
    }

    /// A row per region, under a line naming the node killed.
    pub fn table(&self, system: &str) -> String {
        let secs = |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64()));
        let mut out = format!(
            "{system}: {} killed {:.1} s into the measured time\n  region  reads back  writes back  reads caught  \
             p50 ms  p99 ms  max ms  failed\n",
            self.node,
            self.after.as_secs_f64()
        );
        for r in &self.regions {
            out += &format!(
                "  {:<6} {:>11} {:>12} {:>13} {:>7.1} {:>7.1} {:>7.1} {:>7}\n",
                r.region,
                secs(r.reads_back),
                secs(r.writes_back),
                r.caught.len(),
                ms(r.caught.quantile(0.5)),
                ms(r.caught.quantile(0.99)),
                ms(r.caught.quantile(1.0)),
                r.failed
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(region: usize, sent: u64, done: u64, read: bool, ok: bool) -> Outcome {
        Outcome { region, sent, done, read, ok }
    }

    #[test]
    fn the_first_success_after_the_kill_ends_the_outage() {
        let s = 1_000_000_000;
        let outcomes = [
            op(0, 0, 10, true, true),
            op(0, 2 * s, 2 * s + 5, false, false),
            op(0, 3 * s, 5 * s, true, true),
            op(0, 4 * s, 6 * s, false, true),
            op(0, 7 * s, 7 * s + 1, true, true),
            op(1, 2 * s, 9 * s, false, false),
        ];
        let f = Failover::measure("n1".into(), (s, Duration::from_secs(1)), &["va".into(), "tk".into()], &outcomes);
        let va = &f.regions[0];
        assert_eq!(va.reads_back, Some(Duration::from_secs(4)));
        assert_eq!(va.writes_back, Some(Duration::from_secs(5)));
        assert_eq!(va.caught.len(), 1, "the read sent after writes were back is not caught");
        assert_eq!(va.caught.quantile(1.0), Duration::from_secs(2));
        assert_eq!(va.failed, 1);
        let tk = &f.regions[1];
        assert_eq!((tk.reads_back, tk.writes_back, tk.failed), (None, None, 1));
        assert!(f.table("lease").contains("never"));
    }
}
