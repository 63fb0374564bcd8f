//! What a caller may make the agent do: a token bucket per caller, charged one token per request and one more per
//! millisecond of the agent's CPU its handler took (measured on the handler's thread). A caller whose bucket is
//! empty is answered 429 at once, with how long until it may ask again, and the handler does not run.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::caller::Caller;

/// A budget: what a caller may spend at once, and how fast it comes back.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    /// Tokens a caller starts with and may save up (requests in a burst).
    pub burst: f64,
    /// Tokens given back per second (requests per second, sustained).
    pub per_second: f64,
}

/// The agent's CPU time one token buys: a caller of [`Rate::per_second`] 10 costs the agent at most 10 ms of
/// CPU a second in its handlers (1 % of a CPU), however it spreads it over requests.
pub const CPU_PER_TOKEN: Duration = Duration::from_millis(1);

/// Callers tracked at once; past it, the buckets that are full again are forgotten, and a new caller when none
/// is (thousands of addresses in debt at once) is refused for a second.
const MAX_CALLERS: usize = 4096;

/// One caller's bucket.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// The tokens at `now`, refilled since last seen.
    fn refill(&mut self, rate: Rate, now: Instant) {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() * rate.per_second;
        self.tokens = (self.tokens + gained).min(rate.burst);
        self.at = now;
    }
}

/// The buckets of one door's callers.
pub struct Budgets {
    rate: Rate,
    buckets: Mutex<HashMap<Caller, Bucket>>,
}

impl Budgets {
    /// Buckets of `rate`, every caller's full at first.
    pub fn new(rate: Rate) -> Self {
        Self { rate, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes a request's token from `caller`'s bucket at `now`: `Ok`, or how long until it has one (the request
    /// is refused and costs nothing).
    pub fn take(&self, caller: Caller, now: Instant) -> Result<(), Duration> {
        let key = key(caller);
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_CALLERS && !buckets.contains_key(&key) {
            let rate = self.rate;
            buckets.retain(|_, b| {
                b.refill(rate, now);
                b.tokens < rate.burst
            });
            if buckets.len() >= MAX_CALLERS {
                return Err(Duration::from_secs(1));
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket { tokens: self.rate.burst, at: now });
        bucket.refill(self.rate, now);
        if bucket.tokens < 1.0 {
            return Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate.per_second));
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    /// Charges `caller` for `cpu` of the agent's CPU its request took (it may go into debt: its next requests
    /// wait until it is paid).
    pub fn charge(&self, caller: Caller, cpu: Duration) {
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bucket) = buckets.get_mut(&key(caller)) {
            bucket.tokens -= cpu.as_secs_f64() / CPU_PER_TOKEN.as_secs_f64();
        }
    }
}

/// The bucket a caller is counted in: an IPv6 peer by its /64 (one host may hold every address of one).
fn key(caller: Caller) -> Caller {
    match caller {
        Caller::Remote { ip: IpAddr::V6(v6) } if v6.to_ipv4_mapped().is_none() => {
            let mask = u128::MAX << 64;
            Caller::Remote { ip: IpAddr::V6((u128::from(v6) & mask).into()) }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Budgets, Rate};
    use crate::doors::caller::Caller;

    const RATE: Rate = Rate { burst: 20.0, per_second: 10.0 };

    /// A burst is served, then one request per refill; each caller has a bucket of its own.
    #[test]
    fn a_burst_then_the_rate_and_each_caller_apart() {
        let budgets = Budgets::new(RATE);
        let (a, b) = (Caller::Local { uid: 1000 }, Caller::Local { uid: 1001 });
        let t0 = Instant::now();
        for i in 0..20 {
            assert_eq!(budgets.take(a, t0), Ok(()), "request {i} of the burst");
        }
        let wait = budgets.take(a, t0).unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100), "{wait:?}");
        assert_eq!(budgets.take(b, t0), Ok(()), "another caller has its own bucket");
        let later = t0 + Duration::from_millis(100);
        assert_eq!(budgets.take(a, later), Ok(()), "one token back after 100 ms");
        assert!(budgets.take(a, later).is_err());
        // Saved up to the burst only.
        let much_later = t0 + Duration::from_hours(1);
        assert_eq!((0..25).filter(|_| budgets.take(a, much_later).is_ok()).count(), 20);
    }

    /// CPU a handler took is charged: 50 ms of it is 50 tokens, paid back at the rate before the next request.
    #[test]
    fn cpu_taken_is_charged_and_paid_back_at_the_rate() {
        let budgets = Budgets::new(RATE);
        let a = Caller::Local { uid: 1000 };
        let t0 = Instant::now();
        budgets.take(a, t0).unwrap();
        budgets.charge(a, Duration::from_millis(50));
        let wait = budgets.take(a, t0).unwrap_err();
        // 19 - 50 = -31 tokens: 3.2 s until one.
        assert!((wait.as_secs_f64() - 3.2).abs() < 1e-6, "{wait:?}");
        assert!(budgets.take(a, t0 + Duration::from_secs(3)).is_err());
        assert!(budgets.take(a, t0 + Duration::from_millis(3200)).is_ok());
    }

    /// The addresses of one IPv6 /64 share a bucket; IPv4 addresses each have their own.
    #[test]
    fn an_ipv6_slash_64_is_one_caller() {
        let budgets = Budgets::new(Rate { burst: 1.0, per_second: 1.0 });
        let t0 = Instant::now();
        let six = |s: &str| Caller::Remote { ip: s.parse().unwrap() };
        assert!(budgets.take(six("2001:db8::1"), t0).is_ok());
        assert!(budgets.take(six("2001:db8::2:3"), t0).is_err());
        assert!(budgets.take(six("2001:db8:0:1::1"), t0).is_ok());
        assert!(budgets.take(six("10.0.0.1"), t0).is_ok());
        assert!(budgets.take(six("10.0.0.2"), t0).is_ok());
    }
}
