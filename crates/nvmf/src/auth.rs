//! DH-HMAC-CHAP on one queue, controller side: the messages a host sends
//! with Authentication Send checked in order, and the answers it takes with
//! Authentication Receive (`zns_spec::auth` holds the formats and the
//! computations).
//!
//! A queue of a host the subsystem has secrets for starts unauthenticated:
//! every command but the authentication commands gets Authentication
//! Required. The exchange ends authenticated (the host's response matched,
//! and the controller proved itself when asked) or failed: a failed queue
//! gets AUTH_Failure1 on its next Receive and is then closed, and every
//! failure is logged with the host's NQN.

use zns_spec::auth::{
    self, controller_response, host_response, id, Challenge, Failure, FailureReason, Hash,
    Negotiate, Reply, Success1, DHGROUP_NULL, TYPE_COMMON, TYPE_DHCHAP,
};

use crate::subsystem::HostSecrets;

/// Where the exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Waiting for AUTH_Negotiate.
    Negotiate,
    /// The next Receive returns the challenge.
    Challenge,
    /// Waiting for the host's reply.
    Reply,
    /// The next Receive returns Success1.
    Success1,
    /// Waiting for Success2 (bidirectional) .
    Success2,
    /// The next Receive returns Failure1, then the queue closes.
    Failure1(FailureReason),
    /// Authenticated.
    Done,
    /// The host gave up (Failure2) or the Failure1 was sent: close.
    Failed,
}

/// One queue's DH-HMAC-CHAP exchange.
///
/// Thread safety: `Send`; owned by its connection.
pub(crate) struct QueueAuth {
    step: Step,
    tid: u16,
    hash: Hash,
    c1: Vec<u8>,
    s1: u32,
    c2: Option<(Vec<u8>, u32)>,
    /// The host's and the controller's keys, transformed with their NQNs.
    host_key: Vec<u8>,
    ctrl_key: Option<Vec<u8>>,
    hostnqn: String,
    subnqn: String,
}

/// What an Authentication Send or Receive did.
pub(crate) enum Outcome {
    /// Go on (Send) or send these bytes (Receive).
    Continue(Vec<u8>),
    /// The exchange failed: answer with these bytes (if any), then close.
    Close(Vec<u8>),
}

impl QueueAuth {
    /// An exchange for host `hostnqn` with `secrets`.
    pub(crate) fn new(secrets: &HostSecrets, hostnqn: &str, subnqn: &str) -> QueueAuth {
        QueueAuth {
            step: Step::Negotiate,
            tid: 0,
            hash: Hash::Sha256,
            c1: Vec::new(),
            s1: 0,
            c2: None,
            host_key: secrets.host.transformed(hostnqn),
            ctrl_key: secrets.controller.as_ref().map(|s| s.transformed(subnqn)),
            hostnqn: hostnqn.to_string(),
            subnqn: subnqn.to_string(),
        }
    }

    /// Whether the queue may run other commands.
    pub(crate) fn authenticated(&self) -> bool {
        self.step == Step::Done
    }

    /// An Authentication Send carrying `msg`.
    pub(crate) fn send(&mut self, msg: &[u8]) -> Outcome {
        let Some(kind) = auth::kind(msg) else { return self.fail(FailureReason::IncorrectPayload) };
        match (kind, self.step) {
            // A Negotiate restarts the exchange from any point but the end.
            ((TYPE_COMMON, id::NEGOTIATE), s) if s != Step::Done => self.negotiate(msg),
            ((TYPE_DHCHAP, id::REPLY), Step::Reply) => self.reply(msg),
            ((TYPE_DHCHAP, id::SUCCESS2), Step::Success2) => {
                self.step = Step::Done;
                tracing::info!(hostnqn = %self.hostnqn, "host and controller authenticated");
                Outcome::Continue(Vec::new())
            }
            ((TYPE_COMMON, id::FAILURE2), _) => {
                let reason = Failure::from_bytes(msg).map(|f| f.reason).unwrap_or(0);
                tracing::warn!(hostnqn = %self.hostnqn, reason, "the host refused the controller's response (AUTH_Failure2)");
                self.step = Step::Failed;
                Outcome::Close(Vec::new())
            }
            _ => self.fail(FailureReason::IncorrectMessage),
        }
    }

    /// An Authentication Receive of up to `room` bytes.
    pub(crate) fn receive(&mut self, room: usize) -> Outcome {
        let (bytes, next) = match self.step {
            Step::Challenge => (self.challenge(), Step::Reply),
            Step::Success1 => {
                let response = self.c2.as_ref().zip(self.ctrl_key.as_ref()).map(|((c2, s2), k)| {
                    controller_response(
                        self.hash,
                        k,
                        c2,
                        *s2,
                        self.tid,
                        &self.hostnqn,
                        &self.subnqn,
                    )
                });
                let next = if response.is_some() { Step::Success2 } else { Step::Done };
                let m =
                    Success1 { tid: self.tid, hash_len: self.hash.digest_len() as u8, response };
                (m.to_bytes(), next)
            }
            Step::Failure1(reason) => {
                let m = Failure { auth_id: id::FAILURE1, tid: self.tid, reason: reason as u8 };
                self.step = Step::Failed;
                return Outcome::Close(m.to_bytes());
            }
            _ => {
                let m = Failure {
                    auth_id: id::FAILURE1,
                    tid: self.tid,
                    reason: FailureReason::IncorrectMessage as u8,
                };
                tracing::warn!(hostnqn = %self.hostnqn, step = ?self.step, "Authentication Receive out of turn");
                self.step = Step::Failed;
                return Outcome::Close(m.to_bytes());
            }
        };
        if bytes.len() > room {
            return self.fail(FailureReason::IncorrectPayload);
        }
        self.step = next;
        if next == Step::Done {
            tracing::info!(hostnqn = %self.hostnqn, "host authenticated");
        }
        Outcome::Continue(bytes)
    }

    fn negotiate(&mut self, msg: &[u8]) -> Outcome {
        let Ok(n) = Negotiate::from_bytes(msg) else {
            return self.fail(FailureReason::IncorrectPayload);
        };
        self.tid = n.tid;
        if n.sc_c != 0 {
            return self.fail(FailureReason::ConcatMismatch);
        }
        let offered = |h: &Hash| n.hashes.contains(&h.raw());
        let Some(hash) = Hash::ALL.into_iter().find(offered) else {
            return self.fail(FailureReason::HashUnusable);
        };
        if !n.dh_groups.contains(&DHGROUP_NULL) {
            return self.fail(FailureReason::DhGroupUnusable);
        }
        self.hash = hash;
        self.c2 = None;
        self.step = Step::Challenge;
        Outcome::Continue(Vec::new())
    }

    fn challenge(&mut self) -> Vec<u8> {
        use rand::RngCore;
        let mut rng = rand::thread_rng();
        self.c1 = vec![0u8; self.hash.digest_len()];
        rng.fill_bytes(&mut self.c1);
        // Never 0: a sequence number of 0 means "none".
        self.s1 = rng.next_u32().max(1);
        Challenge {
            tid: self.tid,
            hash: self.hash.raw(),
            dh_group: DHGROUP_NULL,
            seqnum: self.s1,
            challenge: self.c1.clone(),
            dh_value: Vec::new(),
        }
        .to_bytes()
    }

    fn reply(&mut self, msg: &[u8]) -> Outcome {
        let Ok(r) = Reply::from_bytes(msg) else {
            return self.fail(FailureReason::IncorrectPayload);
        };
        if r.tid != self.tid || r.response.len() != self.hash.digest_len() || !r.dh_value.is_empty()
        {
            return self.fail(FailureReason::IncorrectPayload);
        }
        let want = host_response(
            self.hash,
            &self.host_key,
            &self.c1,
            self.s1,
            self.tid,
            &self.hostnqn,
            &self.subnqn,
        );
        if !constant_time_eq(&want, &r.response) {
            tracing::warn!(hostnqn = %self.hostnqn, "DH-HMAC-CHAP: the host's response does not match its secret");
            return self.fail(FailureReason::Failed);
        }
        if let Some(c2) = r.challenge {
            if self.ctrl_key.is_none() {
                tracing::warn!(hostnqn = %self.hostnqn, "the host asks the controller to authenticate, and no controller secret is set for it");
                return self.fail(FailureReason::Failed);
            }
            self.c2 = Some((c2, r.seqnum));
        }
        self.step = Step::Success1;
        Outcome::Continue(Vec::new())
    }

    /// The exchange failed for `reason`: the next Receive tells the host.
    fn fail(&mut self, reason: FailureReason) -> Outcome {
        tracing::warn!(hostnqn = %self.hostnqn, ?reason, "DH-HMAC-CHAP authentication failed");
        self.step = Step::Failure1(reason);
        Outcome::Continue(Vec::new())
    }
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}
