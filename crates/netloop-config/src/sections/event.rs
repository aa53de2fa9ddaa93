//! `[[event]]`: a link going down, coming up, or changing its parameters at
//! a given time.

use std::ops::Range;

use netloop_model::spec::{Direction, LinkAction, LinkEventSpec};
use toml::de::DeTable;

use super::{params, peek_str, Loader};
use crate::reader::{record_locations, Table};
use crate::value::{self, quote};

const OWN_KEYS: &[&str] = &["at", "link", "direction", "action"];
const ACTIONS: &[&str] = &["down", "up", "set"];
const DIRECTIONS: &[&str] = &["both", "a_to_b", "b_to_a"];

pub(crate) fn read(l: &mut Loader<'_, '_>, index: usize, table: &DeTable<'_>, span: Range<usize>) {
    l.map.events.push(record_locations(l.d, &span, table));
    let what = match (peek_str(table, "link"), l.live) {
        (Some(link), true) => format!("change to link '{}'", quote(link)),
        (None, true) => "link change".to_string(),
        (Some(link), false) => format!("event #{} on link '{}'", index + 1, quote(link)),
        (None, false) => format!("event #{}", index + 1),
    };
    let mut t = Table::new(what, table, span);

    let action = t.req(l.d, "action", "one of down, up, set", |v| {
        value::choice(v, ACTIONS, "action")
    });
    // Every link parameter is a known key (for "did you mean"), but only
    // some can change at run time, and only with action "set".
    let known: Vec<&str> = OWN_KEYS.iter().chain(params::KEYS).copied().collect();
    t.check_keys(l.d, &known, |key| {
        if OWN_KEYS.contains(&key) {
            None
        } else if !params::SETTABLE.contains(&key) {
            Some(format!(
                "'{key}' cannot be changed by an event; an event can set: {}",
                params::SETTABLE.join(", ")
            ))
        } else {
            match action {
                Some(a @ ("down" | "up")) => Some(format!(
                    "'{key}' does not go with action '{a}': only action 'set' changes parameters"
                )),
                _ => None,
            }
        }
    });

    // A change given while the network runs takes effect at once.
    let at = if l.live {
        if t.has("at") {
            t.error(
                l.d,
                "at",
                "a change to a running network takes effect at once; 'at' does not apply"
                    .to_string(),
            );
        }
        Some(netloop_core::SimDuration::ZERO)
    } else {
        t.req(l.d, "at", "when it happens, e.g. \"5s\"", value::duration)
    };
    if let (Some(at), Some(end)) = (at, l.duration) {
        if at > end {
            let message = format!("{at} is after {}", l.end_of_run(end));
            t.error(l.d, "at", message);
        }
    }
    let link = t.req(
        l.d,
        "link",
        "the name of the link it changes",
        value::string,
    );
    if let Some(name) = &link {
        if !l.links.contains_key(name) {
            let message = l.link_list(name);
            t.error(l.d, "link", message);
        }
    }
    let direction = t
        .opt(l.d, "direction", |v| {
            value::choice(v, DIRECTIONS, "direction")
        })
        .map(|d| match d {
            "a_to_b" => Direction::AToB,
            "b_to_a" => Direction::BToA,
            _ => Direction::Both,
        })
        .unwrap_or(Direction::Both);

    let action = match action {
        Some("down") => Some(LinkAction::Down),
        Some("up") => Some(LinkAction::Up),
        Some(_) => {
            let p = params::read(&mut t, l.d);
            // Keys that can't be set are already reported; saying "nothing
            // to set" as well would only repeat it.
            if !params::KEYS.iter().any(|k| t.has(k)) {
                t.error_item(
                    l.d,
                    format!(
                        "action 'set' with nothing to set: give one or more of {}",
                        params::SETTABLE.join(", ")
                    ),
                );
            }
            // The spec replaces jitter as a whole (amount, distribution,
            // reordering), so the latter two mean nothing without a new
            // amount.
            if p.jitter.is_none() && !t.has("jitter") {
                for key in ["jitter_distribution", "reorder"] {
                    if t.has(key) {
                        t.error(l.d, key, format!("'{key}' needs 'jitter' in the same event: an event sets jitter as a whole"));
                    }
                }
            }
            (!p.is_empty()).then(|| LinkAction::Set(p.change()))
        }
        None => None,
    };
    if let (Some(at), Some(link), Some(action), false) = (at, link, action, t.failed) {
        l.spec.events.push(LinkEventSpec {
            at,
            link,
            direction,
            action,
        });
    }
}
