//! DH-HMAC-CHAP, host side: after a Connect whose response asks for it,
//! the queue authenticates with the host's secret, and with the
//! controller's secret also makes the controller prove itself
//! (bidirectional authentication).

use zns_spec::auth::{
    self, controller_response, host_response, id, AuthCommand, Challenge, Failure, FailureReason,
    Hash, Negotiate, Reply, Secret, Success1, DHGROUP_NULL, TYPE_COMMON,
};
use zns_spec::SubmissionEntry;

use super::host::{check, TcpQueuePair};
use super::{Result, TcpError};

/// The secrets a host authenticates with.
///
/// Thread safety: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAuth {
    /// The host's secret (`--dhchap-secret` of nvme-cli).
    pub host: Secret,
    /// The controller's secret, to authenticate the controller too
    /// (`--dhchap-ctrl-secret`).
    pub controller: Option<Secret>,
}

/// Most bytes a controller's authentication message takes (a challenge or
/// Success1 with a SHA-512 value, and room for a DH value).
const RECEIVE_ROOM: usize = 4096;

fn refused(why: String) -> TcpError {
    TcpError::Authentication(why)
}

impl TcpQueuePair {
    /// Authenticates the queue (after [`TcpQueuePair::fabric_connect`]
    /// reported [`TcpQueuePair::auth_required`]) as host `hostnqn` to
    /// subsystem `subnqn`.
    pub fn authenticate(&mut self, secrets: &HostAuth, hostnqn: &str, subnqn: &str) -> Result<()> {
        let tid = self.qid();
        let negotiate = Negotiate {
            tid,
            sc_c: 0,
            hashes: Hash::ALL.iter().map(|h| h.raw()).collect(),
            dh_groups: vec![DHGROUP_NULL],
        };
        self.auth_send(&negotiate.to_bytes())?;
        let msg = self.auth_receive()?;
        let c = Challenge::from_bytes(&msg).map_err(|e| refused(format!("challenge: {e}")))?;
        let hash = Hash::from_raw(c.hash)
            .ok_or_else(|| refused(format!("the controller chose unknown hash {}", c.hash)))?;
        if c.dh_group != DHGROUP_NULL || c.challenge.len() != hash.digest_len() || c.tid != tid {
            self.auth_send(&failure2(tid, FailureReason::IncorrectPayload))?;
            return Err(refused("the controller's challenge is not one this host offered".into()));
        }
        let key = secrets.host.transformed(hostnqn);
        let response = host_response(hash, &key, &c.challenge, c.seqnum, tid, hostnqn, subnqn);
        let c2 = secrets.controller.as_ref().map(|_| {
            use rand::RngCore;
            let mut rng = rand::thread_rng();
            let mut c2 = vec![0u8; hash.digest_len()];
            rng.fill_bytes(&mut c2);
            (c2, rng.next_u32().max(1))
        });
        let reply = Reply {
            tid,
            response,
            challenge: c2.as_ref().map(|(c, _)| c.clone()),
            seqnum: c2.as_ref().map_or(0, |(_, s)| *s),
            dh_value: Vec::new(),
        };
        self.auth_send(&reply.to_bytes())?;
        let msg = self.auth_receive()?;
        let s = Success1::from_bytes(&msg).map_err(|e| refused(format!("success: {e}")))?;
        let (Some(ctrl), Some((c2, s2))) = (&secrets.controller, c2) else { return Ok(()) };
        let want =
            controller_response(hash, &ctrl.transformed(subnqn), &c2, s2, tid, hostnqn, subnqn);
        if s.response.as_deref() != Some(&want[..]) {
            self.auth_send(&failure2(tid, FailureReason::Failed))?;
            return Err(refused(
                "the controller's response does not match the controller secret".into(),
            ));
        }
        self.auth_send(&auth::success2(tid))
    }

    fn auth_send(&mut self, msg: &[u8]) -> Result<()> {
        let sqe: SubmissionEntry = AuthCommand::send(msg.len() as u32).to_sqe();
        let c = self.run(sqe, Some(msg), None)?;
        check("Authentication Send", &c)
    }

    /// The controller's next message; a Failure1 becomes the error.
    fn auth_receive(&mut self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; RECEIVE_ROOM];
        let sqe = AuthCommand::receive(RECEIVE_ROOM as u32).to_sqe();
        let c = self.run(sqe, None, Some(&mut buf))?;
        check("Authentication Receive", &c)?;
        if auth::kind(&buf) == Some((TYPE_COMMON, id::FAILURE1)) {
            let f = Failure::from_bytes(&buf).map_err(|e| refused(e.to_string()))?;
            let why = match FailureReason::from_raw(f.reason) {
                Some(FailureReason::Failed) => "the secret does not match the controller's".into(),
                Some(r) => format!("{r:?}"),
                None => format!("reason {:#04x}", f.reason),
            };
            return Err(refused(format!("the controller refused: {why}")));
        }
        Ok(buf)
    }
}

fn failure2(tid: u16, reason: FailureReason) -> Vec<u8> {
    Failure { auth_id: id::FAILURE2, tid, reason: reason as u8 }.to_bytes()
}
