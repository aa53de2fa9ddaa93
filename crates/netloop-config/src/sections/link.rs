//! `[[link]]`: which two nodes a link joins, their addresses and subnet, and
//! the link parameters of each direction.

use std::ops::Range;

use netloop_model::spec::{EndpointSpec, Ipv4Cidr, Ipv6Cidr, LinkSpec};
use toml::de::{DeTable, DeValue};

use super::{check_name, params, peek_str, Kind, LinkInfo, Loader};
use crate::reader::{record_locations, Table};
use crate::value::{self, describe, quote, Cidr, Value};

const OWN_KEYS: &[&str] = &[
    "name",
    "endpoints",
    "addresses",
    "subnet",
    "addresses6",
    "subnet6",
    "interfaces",
    "a_to_b",
    "b_to_a",
];

/// An explicit interface address and who holds it, to report conflicts.
pub(crate) struct AddressOwner {
    link: String,
    node: String,
    line: usize,
}

/// The two endpoint names, if `endpoints` is an array of two strings.
fn peek_endpoints<'a>(t: &'a DeTable<'_>) -> Option<(&'a str, &'a str)> {
    match t.get("endpoints")?.get_ref() {
        DeValue::Array(a) if a.len() == 2 => {
            Some((a[0].get_ref().as_str()?, a[1].get_ref().as_str()?))
        }
        _ => None,
    }
}

pub(crate) fn read(l: &mut Loader<'_, '_>, index: usize, table: &DeTable<'_>, span: Range<usize>) {
    l.map.links.push(record_locations(l.d, &span, table));
    // The name the link is known by: given, or "<a>-<b>".
    let label = match (peek_str(table, "name"), peek_endpoints(table)) {
        (Some(name), _) => Some(name.to_string()),
        (None, Some((a, b))) => Some(format!("{a}-{b}")),
        _ => None,
    };
    let what = match &label {
        Some(name) => format!("link '{}'", quote(name)),
        None => format!("link #{}", index + 1),
    };
    let mut t = Table::new(what, table, span.clone());
    let known: Vec<&str> = OWN_KEYS.iter().chain(params::KEYS).copied().collect();
    t.check_keys(l.d, &known, |_| None);

    let name = t.opt(l.d, "name", |v| {
        let s = value::string(v)?;
        check_name(&s)?;
        Ok(s)
    });
    if name.is_none() && !t.has("name") {
        // The default name must be a valid name too; it is one whenever the
        // node names are, unless together they are too long.
        if let Some(label) = &label {
            if let Err(e) = check_name(label) {
                t.error_item(l.d, format!("the default name {e}; give the link a 'name'"));
            }
        }
    }
    let line = l.line(&span);
    if let Some(label) = &label {
        if let Some(first) = l.links.get(label) {
            let message = if t.has("name") {
                format!(
                    "duplicate link name '{label}': the first link with this name is on line {}",
                    first.line
                )
            } else {
                format!(
                    "duplicate link name '{label}' (the default, '<a>-<b>'): the link on line {} has it too; give one of them a 'name'",
                    first.line
                )
            };
            if t.has("name") {
                t.error(l.d, "name", message);
            } else {
                t.error_item(l.d, message);
            }
        } else {
            l.links.insert(label.clone(), LinkInfo { line });
            l.link_names.push(label.clone());
        }
    }

    let ends = read_endpoints(l, &mut t);
    let subnet = read_subnet::<Ipv4Cidr>(l, &mut t, "subnet");
    let addresses = read_addresses(l, &mut t, "addresses", ends.as_ref(), subnet);
    let subnet6 = read_subnet::<Ipv6Cidr>(l, &mut t, "subnet6");
    let addresses6 = read_addresses(l, &mut t, "addresses6", ends.as_ref(), subnet6);
    let interfaces = read_interfaces(l, &mut t);

    // Parameters: defaults, then the link's own, then each direction's.
    let both = l.defaults.overlaid(&params::read(&mut t, l.d));
    let mut direction = |key: &str| {
        let Some(mut sub) = t.sub_table(l.d, key, &format!("[link.{key}] with link parameters"))
        else {
            return both.clone();
        };
        sub.check_keys(l.d, params::KEYS, |_| None);
        let own = params::read(&mut sub, l.d);
        t.failed |= sub.failed;
        both.overlaid(&own)
    };
    let a_to_b = direction("a_to_b");
    let b_to_a = direction("b_to_a");

    if t.failed {
        return;
    }
    if let (Some(name), Some((a, b)), Some((addr_a, addr_b)), Some((a6, b6)), Some((if_a, if_b))) =
        (name.or(label), ends, addresses, addresses6, interfaces)
    {
        l.spec.links.push(LinkSpec {
            name,
            a: EndpointSpec {
                node: a,
                address: addr_a,
                address6: a6,
                interface: if_a,
            },
            b: EndpointSpec {
                node: b,
                address: addr_b,
                address6: b6,
                interface: if_b,
            },
            subnet,
            subnet6,
            a_to_b: a_to_b.resolve(),
            b_to_a: b_to_a.resolve(),
        });
    }
}

/// `endpoints = ["a", "b"]`: two distinct, declared nodes.
fn read_endpoints(l: &mut Loader<'_, '_>, t: &mut Table<'_, '_>) -> Option<(String, String)> {
    if !t.has("endpoints") {
        t.error_item(l.d, "missing required field 'endpoints' (the two nodes it joins, e.g. endpoints = [\"h1\", \"r1\"])");
        return None;
    }
    let v = t.get("endpoints")?;
    let items = two_items(
        l,
        t,
        "endpoints",
        v,
        "two node names, e.g. [\"h1\", \"r1\"]",
    )?;
    let mut names = Vec::new();
    for item in items {
        match item.get_ref() {
            DeValue::String(s) => {
                if l.node(s).is_none() {
                    let message = format!("endpoint {}", l.node_list(s));
                    t.error_at(l.d, &item.span(), Some("endpoints"), message);
                }
                names.push(s.to_string());
            }
            other => {
                let message = format!("expected a node name, found {}", describe(other));
                t.error_at(l.d, &item.span(), Some("endpoints"), message);
            }
        }
    }
    let [a, b] = <[String; 2]>::try_from(names).ok()?;
    if a == b {
        t.error(
            l.d,
            "endpoints",
            format!("a link from '{a}' to itself: the two endpoints must be different nodes"),
        );
        return None;
    }
    Some((a, b))
}

/// `interfaces = ["h1-eth0", "auto"]`: the names of the link's interfaces
/// at each endpoint (the name inside a namespace host, in results and
/// captures), as Linux allows them; "auto" (or leaving it out) keeps
/// `eth<port>`. Whether two ports of a node share a name is checked when the
/// network is built, where every port's name is known.
fn read_interfaces(
    l: &mut Loader<'_, '_>,
    t: &mut Table<'_, '_>,
) -> Option<(Option<String>, Option<String>)> {
    let Some(v) = t.get("interfaces") else {
        return Some((None, None));
    };
    let items = two_items(
        l,
        t,
        "interfaces",
        v,
        "two interface names (one per endpoint), e.g. [\"h1-eth0\", \"auto\"]",
    )?;
    let mut out = Vec::new();
    for item in items {
        let name = match item.get_ref() {
            DeValue::String(s) if *s == "auto" => Ok(None),
            _ => super::node::interface_name(item).map(Some),
        };
        match name {
            Ok(n) => out.push(n),
            Err(message) => t.error_at(l.d, &item.span(), Some("interfaces"), message),
        }
    }
    let [a, b] = <[Option<String>; 2]>::try_from(out).ok()?;
    Some((a, b))
}

/// The two elements of an array that must have exactly two.
fn two_items<'a, 'i>(
    l: &mut Loader<'_, '_>,
    t: &mut Table<'_, '_>,
    key: &str,
    v: &'a Value<'i>,
    expected: &str,
) -> Option<&'a [Value<'i>]> {
    match v.get_ref() {
        DeValue::Array(a) if a.len() == 2 => Some(a),
        DeValue::Array(a) => {
            let found = match a.len() {
                0 => "an empty array".to_string(),
                1 => "only one".to_string(),
                n => format!("{n}"),
            };
            t.error(
                l.d,
                key,
                format!("expected exactly {expected}, found {found}"),
            );
            None
        }
        other => {
            t.error(
                l.d,
                key,
                format!("expected {expected}, found {}", describe(other)),
            );
            None
        }
    }
}

/// `subnet` (IPv4) or `subnet6` (IPv6): a network prefix with room for the
/// two ends of the link.
fn read_subnet<C: Cidr>(l: &mut Loader<'_, '_>, t: &mut Table<'_, '_>, key: &str) -> Option<C> {
    let subnet = t.opt(l.d, key, value::network::<C>)?;
    if subnet.prefix() > C::LONGEST {
        t.error(
            l.d,
            key,
            format!(
                "'{subnet}' has no room for two addresses: expected a prefix of /{} or shorter",
                C::LONGEST
            ),
        );
    }
    Some(subnet)
}

/// `addresses = ["198.18.0.1/24", "auto"]` (or `addresses6` with IPv6
/// ones): one entry per endpoint, each an address with prefix length, an
/// address alone (taking the subnet's length), or "auto". Returns the two
/// addresses (`None` = automatic).
#[allow(clippy::type_complexity)]
fn read_addresses<C: Cidr>(
    l: &mut Loader<'_, '_>,
    t: &mut Table<'_, '_>,
    key: &'static str,
    ends: Option<&(String, String)>,
    subnet: Option<C>,
) -> Option<(Option<C>, Option<C>)> {
    let Some(v) = t.get(key) else {
        return Some((None, None));
    };
    let items = two_items(
        l,
        t,
        key,
        v,
        &format!(
            "two addresses (one per endpoint), e.g. [\"{}\", \"auto\"]",
            C::EXAMPLE
        ),
    )?;
    let mut out: Vec<Option<C>> = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let node = ends.map(|(a, b)| if i == 0 { a.as_str() } else { b.as_str() });
        match read_address(l, item, node, subnet) {
            Ok(addr) => out.push(addr),
            Err(message) => {
                t.error_at(l.d, &item.span(), Some(key), message);
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    let (a, b) = (out[0], out[1]);
    if let (Some(x), Some(y)) = (a, b) {
        if x.addr() == y.addr() {
            t.error(
                l.d,
                key,
                format!("both endpoints have the address {}", x.addr()),
            );
            return None;
        }
        if x.network() != y.network() || x.prefix() != y.prefix() {
            let (na, nb) = ends
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .unwrap_or(("a", "b"));
            t.error(
                l.d,
                key,
                format!("endpoints '{na}' ({x}) and '{nb}' ({y}) are on different subnets: a link is one subnet"),
            );
            return None;
        }
    }
    // Conflicts with addresses of other links.
    let link = t.what.clone();
    for (i, addr) in [a, b].into_iter().enumerate() {
        let Some(addr) = addr else { continue };
        let node = ends
            .map(|(a, b)| if i == 0 { a.clone() } else { b.clone() })
            .unwrap_or_default();
        let ip: std::net::IpAddr = addr.addr().into();
        if let Some(first) = l.addresses.get(&ip) {
            let message = format!(
                "address conflict: {} is already the address of '{}' on {} (line {})",
                addr.addr(),
                first.node,
                first.link,
                first.line
            );
            t.error_at(l.d, &items[i].span(), Some(key), message);
            ok = false;
        } else {
            let line = l.line(&items[i].span());
            l.addresses.insert(
                ip,
                AddressOwner {
                    link: link.clone(),
                    node,
                    line,
                },
            );
        }
    }
    ok.then_some((a, b))
}

/// One entry of `addresses` or `addresses6`, for the endpoint `node`.
fn read_address<C: Cidr>(
    l: &Loader<'_, '_>,
    item: &Value<'_>,
    node: Option<&str>,
    subnet: Option<C>,
) -> Result<Option<C>, String> {
    if value::is_word(item, "auto") {
        return Ok(None);
    }
    let text = value::string(item)
        .map_err(|e| format!("{e} (an address like '{}', or 'auto')", C::EXAMPLE))?;
    let addr = if text.contains('/') {
        value::cidr::<C>(item)?
    } else if let Some(subnet) = subnet {
        // A bare address takes its length from the link's subnet.
        let addr: C::Addr = text.trim().parse().map_err(|_| {
            format!(
                "'{}' is not an {} address (expected e.g. '{}' or 'auto')",
                quote(&text),
                C::FAMILY,
                C::EXAMPLE
            )
        })?;
        C::of(addr, subnet.prefix())
    } else {
        let len = C::EXAMPLE.rsplit('/').next().unwrap_or("24");
        return Err(format!(
            "'{}' has no prefix length: write it as '{}/{len}' (or the right length), or give the link a '{}'",
            quote(&text),
            quote(text.trim()),
            if C::FAMILY == "IPv4" { "subnet" } else { "subnet6" }
        ));
    };
    if let Some(name) = node {
        if l.node(name).and_then(|n| n.kind) == Some(Kind::Switch) {
            return Err(format!(
                "'{name}' is a switch, which has no IP address: use \"auto\" for it (or leave the addresses out)"
            ));
        }
    }
    if let Some(why) = addr.not_a_host() {
        return Err(why);
    }
    if let Some(subnet) = subnet {
        if !subnet.contains(addr.addr()) || addr.prefix() != subnet.prefix() {
            return Err(format!("'{addr}' is not in the link's subnet {subnet}"));
        }
    }
    Ok(Some(addr))
}
