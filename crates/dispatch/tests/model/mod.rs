//! An independent model of the pool, written from the rules rather than from the code.

use std::time::Duration;

use imagegate_dispatch::{
    AccountId, AccountSpec, CooldownPolicy, GroupId, LimitScope, Outcome, SizeClass, UnixMillis,
};

mod ops;
pub use ops::{Op, op, specs};

/// What the model expects from an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Any of these account indexes is a correct pick.
    Grant(Vec<usize>),
    Busy,
    Cooling(UnixMillis),
    Unavailable,
}

/// Index of a lease in the model.
pub type ModelLease = usize;

/// Expected snapshot values of one account.
#[derive(Debug)]
pub struct View {
    pub in_flight: (u32, u32),
    pub usable: bool,
    pub cooldowns: Vec<(LimitScope, UnixMillis)>,
}

/// The cooldowns of one scope: the latest end of its rate limits (a success keeps them) and of its
/// failures (403s, the breaker; a success ends them). The account cools until the later.
#[derive(Debug, Default, Clone, Copy)]
struct Cool {
    limit: Option<UnixMillis>,
    failure: Option<UnixMillis>,
}

#[derive(Debug, Default, Clone)]
struct Account {
    large: u32,
    standard: u32,
    broken: bool,
    all: Cool,
    images: Cool,
    /// The cooldown for every request that ends last, and whether it is the circuit breaker's: a
    /// cooldown replaces it only by ending later (or once it ended); a success leaves only a rate
    /// limit still in force. Once a breaker's end has passed it is half-open: one request at a time.
    last_all: Option<(UnixMillis, bool)>,
    rate_limits: u32,
    forbiddens: u32,
    transients: u32,
}

#[derive(Debug)]
struct LeaseRecord {
    account: usize,
    large: bool,
    expires: UnixMillis,
    alive: bool,
}

pub struct Model {
    specs: Vec<AccountSpec>,
    accounts: Vec<Account>,
    leases: Vec<LeaseRecord>,
    policy: CooldownPolicy,
    ttl: Duration,
}

fn active_until(cool: Cool, now: UnixMillis) -> Option<UnixMillis> {
    [cool.limit, cool.failure]
        .into_iter()
        .flatten()
        .filter(|until| *until > now)
        .max()
}

/// Moves the end in `slot` to `until` if that is later.
fn extend(slot: &mut Option<UnixMillis>, until: UnixMillis) {
    *slot = Some(slot.map_or(until, |old| old.max(until)));
}

/// Makes a cooldown for every request ending at `until` (the breaker's or not) the last one when
/// it ends later than the last one still in force.
fn cool_all(account: &mut Account, until: UnixMillis, breaker: bool, now: UnixMillis) {
    if account.last_all.is_none_or(|(end, _)| end <= now || until > end) {
        account.last_all = Some((until, breaker));
    }
}

impl Model {
    pub fn new(specs: Vec<AccountSpec>, policy: CooldownPolicy, ttl: Duration) -> Self {
        let accounts = vec![Account::default(); specs.len()];
        Self {
            specs,
            accounts,
            leases: Vec::new(),
            policy,
            ttl,
        }
    }

    pub fn index_of(&self, id: &AccountId) -> usize {
        self.specs.iter().position(|s| &s.id == id).unwrap()
    }

    pub fn purge(&mut self, now: UnixMillis) {
        for lease in 0..self.leases.len() {
            if self.leases[lease].alive && self.leases[lease].expires <= now {
                self.release(lease);
            }
        }
    }

    fn limit(&self, index: usize, class: SizeClass) -> u32 {
        let limits = self.specs[index].limits;
        if class == SizeClass::Large {
            limits.large
        } else {
            limits.standard
        }
    }

    fn used(&self, index: usize, class: SizeClass) -> u32 {
        let account = &self.accounts[index];
        if class == SizeClass::Large {
            account.large
        } else {
            account.standard
        }
    }

    fn blocked_until(&self, index: usize, image: bool, now: UnixMillis) -> Option<UnixMillis> {
        let account = &self.accounts[index];
        let images = if image {
            active_until(account.images, now)
        } else {
            None
        };
        active_until(account.all, now).max(images)
    }

    pub fn acquire(&mut self, group: &GroupId, class: SizeClass, image: bool, now: UnixMillis) -> Verdict {
        self.purge(now);
        let usable: Vec<usize> = (0..self.specs.len())
            .filter(|&i| {
                let spec = &self.specs[i];
                spec.active
                    && spec.groups.contains(group)
                    && self.limit(i, class) > 0
                    && !self.accounts[i].broken
            })
            .collect();
        let unblocked: Vec<usize> = usable
            .iter()
            .copied()
            .filter(|&i| self.blocked_until(i, image, now).is_none())
            .collect();
        let half_open = |i: usize| {
            self.accounts[i]
                .last_all
                .is_some_and(|(end, breaker)| breaker && end <= now)
        };
        let idle = |i: usize| self.accounts[i].large + self.accounts[i].standard == 0;
        let eligible: Vec<usize> = unblocked
            .iter()
            .copied()
            .filter(|&i| self.used(i, class) < self.limit(i, class) && (idle(i) || !half_open(i)))
            .collect();
        if eligible.is_empty() {
            if !unblocked.is_empty() {
                return Verdict::Busy;
            }
            return match usable
                .iter()
                .filter_map(|&i| self.blocked_until(i, image, now))
                .min()
            {
                Some(earliest) => Verdict::Cooling(earliest),
                None => Verdict::Unavailable,
            };
        }
        let rank = |i: usize| (self.specs[i].tier.rank(), self.specs[i].priority);
        let best_rank = eligible.iter().map(|&i| rank(i)).max().unwrap();
        let band: Vec<usize> = eligible.into_iter().filter(|&i| rank(i) == best_rank).collect();
        // Load: share of the class limit in use (exact fraction), then total requests in flight.
        let load = |i: usize| {
            let share = f64::from(self.used(i, class)) / f64::from(self.limit(i, class));
            (share, self.accounts[i].large + self.accounts[i].standard)
        };
        let least = band
            .iter()
            .map(|&i| load(i))
            .min_by(|a, b| a.partial_cmp(b).unwrap())
            .unwrap();
        Verdict::Grant(band.into_iter().filter(|&i| load(i) == least).collect())
    }

    pub fn grant(&mut self, index: usize, class: SizeClass, now: UnixMillis) -> ModelLease {
        let large = class == SizeClass::Large;
        let account = &mut self.accounts[index];
        if large {
            account.large += 1;
        } else {
            account.standard += 1;
        }
        assert!(
            self.used(index, class) <= self.limit(index, class),
            "model granted over the limit"
        );
        self.leases.push(LeaseRecord {
            account: index,
            large,
            expires: now.plus(self.ttl),
            alive: true,
        });
        self.leases.len() - 1
    }

    pub fn release(&mut self, lease: ModelLease) {
        let record = &mut self.leases[lease];
        if record.alive {
            record.alive = false;
            let account = &mut self.accounts[record.account];
            if record.large {
                account.large -= 1;
            } else {
                account.standard -= 1;
            }
        }
    }

    pub fn renew(&mut self, lease: ModelLease, now: UnixMillis) -> Option<UnixMillis> {
        self.purge(now);
        let record = &mut self.leases[lease];
        record.alive.then(|| {
            record.expires = now.plus(self.ttl);
            record.expires
        })
    }

    pub fn record(&mut self, index: usize, outcome: &Outcome, now: UnixMillis) {
        let policy = &self.policy;
        let account = &mut self.accounts[index];
        match outcome {
            Outcome::Success => {
                account.rate_limits = 0;
                account.forbiddens = 0;
                account.transients = 0;
                account.all.failure = None;
                account.images.failure = None;
                account.last_all = account.all.limit.filter(|end| *end > now).map(|end| (end, false));
            }
            Outcome::RateLimited { reset_at, scope } => {
                account.rate_limits += 1;
                let until = match reset_at {
                    Some(reset) => (*reset).max(now.plus(policy.min_reset_cooldown)),
                    None => {
                        let mut backoff = policy.rate_limit_base;
                        for _ in 1..account.rate_limits {
                            backoff = (backoff * 2).min(policy.rate_limit_cap);
                        }
                        now.plus(backoff.min(policy.rate_limit_cap))
                    }
                };
                if *scope == LimitScope::All {
                    cool_all(account, until, false, now);
                }
                let slot = if *scope == LimitScope::All {
                    &mut account.all
                } else {
                    &mut account.images
                };
                extend(&mut slot.limit, until);
            }
            Outcome::AuthFailed { .. } => account.broken = true,
            Outcome::Forbidden { json_body: false, .. } | Outcome::Invalid => {}
            Outcome::Forbidden { json_body: true, .. } => {
                account.forbiddens += 1;
                if account.forbiddens >= policy.forbidden_disable_after {
                    account.broken = true;
                } else {
                    extend(&mut account.all.failure, now.plus(policy.forbidden_cooldown));
                    cool_all(account, now.plus(policy.forbidden_cooldown), false, now);
                }
            }
            Outcome::Transient { .. } => {
                account.transients += 1;
                if account.transients >= policy.breaker_after {
                    extend(&mut account.all.failure, now.plus(policy.breaker_cooldown));
                    cool_all(account, now.plus(policy.breaker_cooldown), true, now);
                }
            }
        }
    }

    pub fn clear(&mut self, index: usize) {
        let account = &mut self.accounts[index];
        *account = Account {
            large: account.large,
            standard: account.standard,
            ..Account::default()
        };
    }

    pub fn set_active(&mut self, index: usize, active: bool) {
        self.specs[index].active = active;
    }

    pub fn view(&self, index: usize, now: UnixMillis) -> View {
        let account = &self.accounts[index];
        let mut cooldowns = Vec::new();
        if let Some(until) = active_until(account.all, now) {
            cooldowns.push((LimitScope::All, until));
        }
        if let Some(until) = active_until(account.images, now) {
            cooldowns.push((LimitScope::ImagesOnly, until));
        }
        View {
            in_flight: (account.large, account.standard),
            usable: !account.broken,
            cooldowns,
        }
    }
}
