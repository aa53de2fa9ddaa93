//! Whether a real host's program is ready: a server has its socket, seen in
//! the kernel's socket tables of the host's network namespace
//! (`/proc/PID/net/{tcp,tcp6,udp,udp6}` of a process in it). A topology's
//! `ready = "tcp:5201"` holds the run's clock until then, so that what the
//! model sends at its first instants finds the server there.

use std::path::Path;

use netloop_model::spec::{ReadyProtocol, ReadySpec};

use crate::error::{Error, Result};

/// Whether the network namespace of process `pid` has a socket as `ready`
/// asks (either family, any address).
pub fn has_socket(pid: i32, ready: &ReadySpec) -> Result<bool> {
    let (tables, listen) = match ready.protocol {
        ReadyProtocol::Tcp => (["tcp", "tcp6"], true),
        ReadyProtocol::Udp => (["udp", "udp6"], false),
    };
    for t in tables {
        let path = format!("/proc/{pid}/net/{t}");
        match std::fs::read_to_string(&path) {
            Ok(text) if in_table(&text, ready.port, listen) => return Ok(true),
            Ok(_) => {}
            // A kernel without IPv6 has no tcp6/udp6 table.
            Err(_) if t.ends_with('6') && !Path::new(&path).exists() => {}
            Err(e) => return Err(Error::os(format!("reading {path}"), e)),
        }
    }
    Ok(false)
}

/// TCP's LISTEN state in the tables (include/net/tcp_states.h).
const TCP_LISTEN: &str = "0A";

/// Whether a socket table (the text of `/proc/net/tcp` or kin: a heading,
/// then `sl local_address rem_address st ...` per socket, addresses as
/// `HEXADDR:HEXPORT`) has a socket on local `port`, in the LISTEN state if
/// `listen`.
fn in_table(text: &str, port: u16, listen: bool) -> bool {
    text.lines().skip(1).any(|line| {
        let mut f = line.split_whitespace();
        let (Some(_), Some(local), Some(_), Some(state)) = (f.next(), f.next(), f.next(), f.next())
        else {
            return false;
        };
        let local_port = local
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
        local_port == Some(port) && (!listen || state == TCP_LISTEN)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // As Linux 6.x prints them (columns after `st` cut).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue
   0: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000
   1: 0212A8C6:9C40 0112A8C6:1389 01 00000000:00000000 00:00000000 00000000
";
    const UDP6: &str =
        "  sl  local_address                         remote_address                        st
  12: 00000000000000000000000000000000:1388 00000000000000000000000000000000:0000 07
";

    #[test]
    fn a_listening_tcp_socket_is_found_by_its_port_and_state() {
        assert!(in_table(TCP, 5201, true));
        // Port 40000 is only a connection's local end: not listening.
        assert!(!in_table(TCP, 40000, true));
        assert!(in_table(TCP, 40000, false));
        assert!(!in_table(TCP, 5000, true));
    }

    #[test]
    fn a_bound_udp_socket_of_either_family_is_found() {
        assert!(in_table(UDP6, 5000, false));
        assert!(!in_table(UDP6, 5001, false));
        // The heading alone, or nonsense, has no socket.
        assert!(!in_table(UDP6.lines().next().unwrap(), 5000, false));
        assert!(!in_table("x\ngarbage line\n", 5000, false));
    }
}
