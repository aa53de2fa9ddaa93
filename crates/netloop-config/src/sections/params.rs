//! Link parameters — rate, delay, jitter, loss, queue, … — as written in
//! `[defaults.link]`, a `[[link]]`, its `[link.a_to_b]`/`[link.b_to_a]`
//! tables, and an `[[event]]` with `action = "set"`.
//!
//! Each place gives some of the parameters; [`Params`] holds what one place
//! gave, and layers are resolved key by key: `DirectionSpec::default()`, then
//! `[defaults.link]`, then the link, then the direction. A queue's `packets`,
//! `bytes` and `discipline` are separate keys in that sense, so a link can
//! change only the byte limit and keep the default packet limit.

use std::ops::Range;

use netloop_core::{Bytes, DataRate, SimDuration};
use netloop_model::spec::{
    CodelSpec, DirectionSpec, FqCodelSpec, JitterDistribution, JitterSpec, LinkChange, LossSpec,
    QueueDiscipline, RedSpec,
};
use netloop_model::trace::TraceSpec;
use toml::de::{DeTable, DeValue};

use super::Loader;
use crate::reader::{Diag, Table};
use crate::value;

/// Every link parameter key.
pub(crate) const KEYS: &[&str] = &[
    "rate",
    "trace",
    "delay",
    "jitter",
    "jitter_distribution",
    "reorder",
    "loss",
    "corrupt",
    "duplicate",
    "mtu",
    "overhead",
    "queue",
];

/// The keys an event can change (what `LinkChange` holds).
pub(crate) const SETTABLE: &[&str] = &[
    "rate",
    "delay",
    "jitter",
    "jitter_distribution",
    "reorder",
    "loss",
    "corrupt",
    "duplicate",
];

const DISTRIBUTIONS: &[&str] = &["uniform", "normal", "pareto"];
const LOSS_MODELS: &[&str] = &["none", "bernoulli", "gilbert-elliott"];
const GE_KEYS: &[&str] = &["model", "p", "r", "loss_good", "loss_bad"];
const QUEUE_KEYS: &[&str] = &[
    "packets",
    "bytes",
    "discipline",
    "min_threshold",
    "max_threshold",
    "max_p",
    "weight",
    "gentle",
    "target",
    "interval",
    "flows",
    "quantum",
    "ecn",
];
const DISCIPLINES: &[&str] = &["drop-tail", "red", "codel", "fq-codel"];
/// Each discipline's own parameters (beside the limits every queue has).
const DISCIPLINE_KEYS: &[(&str, &[&str])] = &[
    ("drop-tail", &[]),
    (
        "red",
        &[
            "min_threshold",
            "max_threshold",
            "max_p",
            "weight",
            "gentle",
            "ecn",
        ],
    ),
    ("codel", &["target", "interval", "ecn"]),
    (
        "fq-codel",
        &["flows", "quantum", "target", "interval", "ecn"],
    ),
];

/// The link parameters given in one place; `None` is "not given here".
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Params {
    pub(crate) rate: Option<Option<DataRate>>,
    /// With `rate`, the direction's capacity: a layer that gives either
    /// replaces both of the layers below.
    pub(crate) trace: Option<TraceSpec>,
    pub(crate) delay: Option<SimDuration>,
    /// `Some(None)` is an explicit "none" (or zero): no jitter.
    pub(crate) jitter: Option<Option<SimDuration>>,
    pub(crate) jitter_distribution: Option<JitterDistribution>,
    pub(crate) reorder: Option<bool>,
    pub(crate) loss: Option<LossSpec>,
    pub(crate) corrupt: Option<f64>,
    pub(crate) duplicate: Option<f64>,
    pub(crate) mtu: Option<u32>,
    pub(crate) overhead: Option<u32>,
    pub(crate) queue_packets: Option<Option<u32>>,
    pub(crate) queue_bytes: Option<Option<Bytes>>,
    pub(crate) queue_discipline: Option<QueueDiscipline>,
}

impl Params {
    /// Whether no parameter is given.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Params::default()
    }

    /// `self` with every parameter that `top` gives replaced by `top`'s.
    pub(crate) fn overlaid(&self, top: &Params) -> Params {
        fn pick<T: Clone>(low: &Option<T>, high: &Option<T>) -> Option<T> {
            high.clone().or_else(|| low.clone())
        }
        // The capacity is one setting given by `rate` or `trace`: a trace
        // above replaces a rate below, and the other way round.
        let (rate, trace) = if top.rate.is_some() || top.trace.is_some() {
            (top.rate, top.trace.clone())
        } else {
            (self.rate, self.trace.clone())
        };
        Params {
            rate,
            trace,
            delay: pick(&self.delay, &top.delay),
            jitter: pick(&self.jitter, &top.jitter),
            jitter_distribution: pick(&self.jitter_distribution, &top.jitter_distribution),
            reorder: pick(&self.reorder, &top.reorder),
            loss: pick(&self.loss, &top.loss),
            corrupt: pick(&self.corrupt, &top.corrupt),
            duplicate: pick(&self.duplicate, &top.duplicate),
            mtu: pick(&self.mtu, &top.mtu),
            overhead: pick(&self.overhead, &top.overhead),
            queue_packets: pick(&self.queue_packets, &top.queue_packets),
            queue_bytes: pick(&self.queue_bytes, &top.queue_bytes),
            queue_discipline: pick(&self.queue_discipline, &top.queue_discipline),
        }
    }

    /// The direction these parameters describe, starting from the spec's
    /// defaults.
    pub(crate) fn resolve(&self) -> DirectionSpec {
        let mut d = DirectionSpec::default();
        if let Some(rate) = self.rate {
            d.rate = rate;
        }
        d.trace = self.trace.clone();
        if let Some(delay) = self.delay {
            d.delay = delay;
        }
        if let Some(Some(amount)) = self.jitter {
            d.jitter = Some(self.jitter_spec(amount));
        }
        if let Some(loss) = &self.loss {
            d.loss = loss.clone();
        }
        if let Some(p) = self.corrupt {
            d.corrupt = p;
        }
        if let Some(p) = self.duplicate {
            d.duplicate = p;
        }
        if let Some(mtu) = self.mtu {
            d.mtu = mtu;
        }
        if let Some(overhead) = self.overhead {
            d.overhead = overhead;
        }
        if let Some(packets) = self.queue_packets {
            d.queue.packets = packets;
        }
        if let Some(bytes) = self.queue_bytes {
            d.queue.bytes = bytes;
        }
        if let Some(discipline) = self.queue_discipline {
            d.queue.discipline = discipline;
        }
        d
    }

    /// What an event with these parameters changes. A new jitter replaces
    /// the whole jitter setting, so its distribution and reordering are the
    /// ones given alongside it (or the usual defaults), not the link's.
    pub(crate) fn change(&self) -> LinkChange {
        LinkChange {
            rate: self.rate,
            delay: self.delay,
            jitter: self
                .jitter
                .map(|j| j.map(|amount| self.jitter_spec(amount))),
            loss: self.loss.clone(),
            corrupt: self.corrupt,
            duplicate: self.duplicate,
        }
    }

    fn jitter_spec(&self, amount: SimDuration) -> JitterSpec {
        JitterSpec {
            amount,
            distribution: self
                .jitter_distribution
                .unwrap_or(JitterDistribution::Uniform),
            reorder: self.reorder.unwrap_or(false),
        }
    }
}

/// Reads the link parameters present in `t` (the caller has already
/// rejected keys that don't belong there). Invalid values are reported and
/// left out.
pub(crate) fn read(t: &mut Table<'_, '_>, d: &mut Diag<'_>) -> Params {
    let mut p = Params {
        rate: t.opt(d, "rate", value::rate_or_unlimited),
        delay: t.opt(d, "delay", value::duration),
        jitter: t.opt(d, "jitter", |v| {
            if value::is_word(v, "none") {
                return Ok(None);
            }
            let j = value::duration(v).map_err(|e| format!("{e}, or 'none'"))?;
            // Zero jitter is no jitter; keeping the two the same avoids a
            // model that draws random numbers to add nothing.
            Ok((j != SimDuration::ZERO).then_some(j))
        }),
        jitter_distribution: t.opt(d, "jitter_distribution", |v| {
            value::choice(v, DISTRIBUTIONS, "jitter distribution").map(|s| match s {
                "normal" => JitterDistribution::Normal,
                "pareto" => JitterDistribution::Pareto,
                _ => JitterDistribution::Uniform,
            })
        }),
        reorder: t.opt(d, "reorder", value::boolean),
        loss: None,
        corrupt: t.opt(d, "corrupt", value::percent_like),
        duplicate: t.opt(d, "duplicate", value::percent_like),
        mtu: t.opt(d, "mtu", |v| value::u32_in(v, 68, 65535, "an MTU in bytes")),
        overhead: t.opt(d, "overhead", |v| {
            value::u32_in(v, 0, 65535, "a number of bytes")
        }),
        ..Params::default()
    };
    p.loss = read_loss(t, d);
    read_queue(t, d, &mut p);
    let gave_rate = t.has("rate");
    p.trace = super::trace::read(t, d);
    if gave_rate && t.has("trace") {
        t.error(
            d,
            "trace",
            "a direction's capacity is its `rate` or its `trace`, not both",
        );
        p.trace = None;
    }
    p
}

/// `loss`: a probability, a percentage, `"none"`, or a table with a model.
fn read_loss(t: &mut Table<'_, '_>, d: &mut Diag<'_>) -> Option<LossSpec> {
    let v = t.get("loss")?;
    let DeValue::Table(table) = v.get_ref() else {
        if value::is_word(v, "none") {
            return Some(LossSpec::None);
        }
        let p = t.opt(d, "loss", |v| {
            value::percent_like(v).map_err(|e| {
                format!(
                    "{e}, or a table like {{ model = \"gilbert-elliott\", p = 0.01, r = 0.25 }}"
                )
            })
        })?;
        return Some(bernoulli(p));
    };
    let mut m = t.child("loss", table, v.span());
    m.check_keys(d, GE_KEYS, |_| None);
    let model = m.req(d, "model", "one of none, bernoulli, gilbert-elliott", |v| {
        value::choice(v, LOSS_MODELS, "loss model")
    });
    let loss = match model {
        Some("none") => {
            for key in ["p", "r", "loss_good", "loss_bad"] {
                if m.has(key) {
                    m.error(
                        d,
                        key,
                        format!("'{key}' does not apply to loss model 'none'"),
                    );
                }
            }
            Some(LossSpec::None)
        }
        Some("bernoulli") => {
            for key in ["r", "loss_good", "loss_bad"] {
                if m.has(key) {
                    m.error(
                        d,
                        key,
                        format!("'{key}' applies only to loss model 'gilbert-elliott'"),
                    );
                }
            }
            m.req(d, "p", "the loss probability", value::probability)
                .map(bernoulli)
        }
        Some(_) => {
            let p = m.req(
                d,
                "p",
                "the probability of going from the good to the bad state",
                value::probability,
            );
            let r = m.req(
                d,
                "r",
                "the probability of going from the bad to the good state",
                value::probability,
            );
            let loss_good = m.opt(d, "loss_good", value::probability);
            let loss_bad = m.opt(d, "loss_bad", value::probability);
            match (p, r) {
                (Some(p), Some(r)) => Some(LossSpec::GilbertElliott {
                    p,
                    r,
                    loss_good: loss_good.unwrap_or(0.0),
                    loss_bad: loss_bad.unwrap_or(1.0),
                }),
                _ => None,
            }
        }
        None => None,
    };
    t.failed |= m.failed;
    if m.failed {
        None
    } else {
        loss
    }
}

/// A zero loss probability is no loss model at all.
fn bernoulli(p: f64) -> LossSpec {
    if p == 0.0 {
        LossSpec::None
    } else {
        LossSpec::Bernoulli { p }
    }
}

/// `queue = { packets, bytes, discipline }`.
fn read_queue(t: &mut Table<'_, '_>, d: &mut Diag<'_>, p: &mut Params) {
    let Some(mut q) = t.sub_table(d, "queue", "{ packets = 1000, bytes = \"64kB\" }") else {
        return;
    };
    q.check_keys(d, QUEUE_KEYS, |_| None);
    p.queue_packets = q.opt(d, "packets", |v| {
        if value::is_word(v, "unlimited") {
            return Ok(None);
        }
        value::u32_in(v, 1, u32::MAX, "a number of packets")
            .map(Some)
            .map_err(|e| format!("{e}, or 'unlimited'"))
    });
    p.queue_bytes = q.opt(d, "bytes", |v| match value::size_or_unlimited(v)? {
        Some(b) if b.get() == 0 => Err(
            "a queue of 0 bytes holds nothing: expected a positive size, or 'unlimited'"
                .to_string(),
        ),
        b => Ok(b),
    });
    p.queue_discipline = read_discipline(&mut q, d);
    t.failed |= q.failed;
}

/// `discipline` and its parameters, which go together: a parameter is
/// given in the table that names its discipline (so that a layer below
/// cannot leave CoDel's `target` on a link that a layer above made RED).
fn read_discipline(q: &mut Table<'_, '_>, d: &mut Diag<'_>) -> Option<QueueDiscipline> {
    let given = q.has("discipline");
    let name = q.opt(d, "discipline", |v| {
        value::choice(v, DISCIPLINES, "queue discipline")
    });
    if given && name.is_none() {
        return None; // already reported
    }
    let own: &[&str] = name
        .and_then(|n| DISCIPLINE_KEYS.iter().find(|(k, _)| *k == n))
        .map_or(&[], |(_, keys)| keys);
    for (key, _) in q.keys() {
        let of: Vec<&str> = DISCIPLINE_KEYS
            .iter()
            .filter(|(_, keys)| keys.contains(&key))
            .map(|(n, _)| *n)
            .collect();
        if !of.is_empty() && !own.contains(&key) {
            let first = of[0];
            let of = of.join(", ");
            let message = match name {
                Some(n) => format!("'{key}' is a parameter of {of}, not of {n}"),
                None => format!(
                    "'{key}' is a parameter of {of}: give the discipline in this table too (discipline = \"{}\")",
                    first
                ),
            };
            q.error(d, key, message);
        }
    }
    let duration = |q: &mut Table<'_, '_>, d: &mut Diag<'_>, key: &str, default: SimDuration| {
        q.opt(d, key, value::positive_duration).unwrap_or(default)
    };
    match name? {
        "drop-tail" => Some(QueueDiscipline::DropTail),
        "red" => {
            let r = RedSpec::default();
            let spec = RedSpec {
                min_threshold: q
                    .opt(d, "min_threshold", |v| {
                        value::number_in(v, 0.0, 1e9, "an average queue length in packets, ≥ 0")
                    })
                    .unwrap_or(r.min_threshold),
                max_threshold: q
                    .opt(d, "max_threshold", |v| {
                        value::number_in(
                            v,
                            f64::MIN_POSITIVE,
                            1e9,
                            "an average queue length in packets, > 0",
                        )
                    })
                    .unwrap_or(r.max_threshold),
                max_p: q.opt(d, "max_p", value::probability).unwrap_or(r.max_p),
                weight: q
                    .opt(d, "weight", |v| {
                        value::number_in(
                            v,
                            f64::MIN_POSITIVE,
                            1.0,
                            "a weight in (0, 1], e.g. 0.002",
                        )
                    })
                    .unwrap_or(r.weight),
                gentle: q.opt(d, "gentle", value::boolean).unwrap_or(r.gentle),
                ecn: q.opt(d, "ecn", value::boolean).unwrap_or(r.ecn),
            };
            if spec.min_threshold >= spec.max_threshold {
                q.error(
                    d,
                    "max_threshold",
                    format!(
                        "max_threshold ({}) must be above min_threshold ({})",
                        spec.max_threshold, spec.min_threshold
                    ),
                );
                return None;
            }
            Some(QueueDiscipline::Red(spec))
        }
        "codel" => {
            let c = CodelSpec::default();
            Some(QueueDiscipline::Codel(CodelSpec {
                target: duration(q, d, "target", c.target),
                interval: duration(q, d, "interval", c.interval),
                ecn: q.opt(d, "ecn", value::boolean).unwrap_or(c.ecn),
            }))
        }
        "fq-codel" => {
            let f = FqCodelSpec::default();
            Some(QueueDiscipline::FqCodel(FqCodelSpec {
                flows: q
                    .opt(d, "flows", |v| {
                        value::u32_in(v, 1, 65_536, "a number of flow queues")
                    })
                    .unwrap_or(f.flows),
                quantum: q
                    .opt(d, "quantum", |v| {
                        value::u32_in(v, 64, 1 << 20, "a quantum in bytes")
                    })
                    .unwrap_or(f.quantum),
                target: duration(q, d, "target", f.target),
                interval: duration(q, d, "interval", f.interval),
                ecn: q.opt(d, "ecn", value::boolean).unwrap_or(f.ecn),
            }))
        }
        _ => None,
    }
}

/// `[defaults]`, which holds only `[defaults.link]`.
pub(crate) fn read_defaults(l: &mut Loader<'_, '_>, table: &DeTable<'_>, span: Range<usize>) {
    let mut t = Table::new("defaults".to_string(), table, span);
    t.check_keys(l.d, &["link"], |_| None);
    let Some(sub) = t.sub_table(l.d, "link", "[defaults.link]") else {
        return;
    };
    // Named as a table of its own: its fields are `rate`, not `link.rate`.
    let mut link = Table::new("defaults.link".to_string(), sub.table, sub.span);
    link.check_keys(l.d, KEYS, |_| None);
    l.defaults = read(&mut link, l.d);
}
