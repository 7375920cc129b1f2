//! Running a command: its data (in the capsule, or asked for by R2T),
//! then the Fabrics, admin or I/O command itself, and its response.

use std::sync::Arc;

use zns_spec::fabrics::{
    self, connect_status, ConnectCommand, ConnectData, FabricsType, PropertyGet, PropertySet,
};
use zns_spec::sgl::{SglDescriptor, SglKind};
use zns_spec::{Status, StatusCode, SubmissionEntry};

use super::{Capsule, Connection, Queue, HELD};
use crate::admin::{self, AsyncEvents, Done};
use crate::auth::{self as dhchap, QueueAuth};
use crate::controller::{JoinError, Role};
use crate::error::Result;
use crate::inflight;
use crate::io::{self, IoContext};
use crate::subsystem::QUEUE_ENTRIES;

/// Most data one command may move to the controller on an admin queue.
const ADMIN_MAX_DATA: usize = 64 * 1024;

/// What to do after a command.
pub(super) enum Next {
    Continue,
    /// The host disconnected (Fabrics Disconnect): close after the reply.
    Close,
}

/// Where a command's data stands after its descriptor was looked at.
enum Gathered {
    /// Here (or none moves to the controller): the room the host offers
    /// for data to it.
    Ready(usize),
    /// Asked for by R2T: the command runs when it has come.
    Requested,
    /// The descriptor is bad: the status to answer.
    Refused(Status),
}

impl Connection {
    /// Runs one command, or starts it: a write whose data the host must
    /// send after an R2T runs when the data has come (`run_with_data`).
    pub(super) fn command(&mut self, capsule: Capsule) -> Result<()> {
        let sqe = capsule.sqe;
        if let Some(q) = &mut self.queue {
            q.sqhd = (q.sqhd + 1) % q.entries;
            if std::mem::take(&mut self.touch_due) {
                q.ctrl.touch();
            }
        }
        if capsule.damaged {
            return self.respond(sqe.cid(), StatusCode::TransientTransportError.status(), 0);
        }
        if self.queue.as_ref().is_some_and(Queue::unauthenticated) && !is_auth_or_connect(&sqe) {
            tracing::debug!(opcode = sqe.opcode(), "command before authentication");
            return self.respond(sqe.cid(), zns_spec::auth::AUTHENTICATION_REQUIRED, 0);
        }
        if let Some(d) = capsule.data {
            self.host.clear();
            self.host.extend_from_slice(&d);
        }
        match self.gather(&sqe)? {
            Gathered::Refused(status) => self.respond(sqe.cid(), status, 0),
            Gathered::Requested => Ok(()),
            Gathered::Ready(room) => self.execute(&sqe, room),
        }
    }

    /// The data of a write asked for by R2T has come (`intact`: no PDU of
    /// it failed its digest): the command runs.
    pub(super) fn run_with_data(&mut self, sqe: SubmissionEntry, intact: bool) -> Result<()> {
        if !intact {
            return self.respond(sqe.cid(), StatusCode::TransientTransportError.status(), 0);
        }
        self.execute(&sqe, 0)
    }

    /// Runs a command whose data is in `self.host`: in flight on the
    /// device if it qualifies, else at once, answering it.
    fn execute(&mut self, sqe: &SubmissionEntry, room: usize) -> Result<()> {
        if self.start_inflight(sqe, room) {
            return Ok(());
        }
        let (status, result, data, next) = self.dispatch(sqe, room)?;
        if status == HELD {
            return Ok(());
        }
        tracing::trace!(
            cid = sqe.cid(),
            opcode = sqe.opcode(),
            nsid = sqe.nsid,
            cdw10 = sqe.cdw10,
            cdw11 = sqe.cdw11,
            cdw12 = sqe.cdw12,
            status = ?status,
            result,
            data,
            "command done"
        );
        if data > 0 {
            self.send_data(sqe.cid(), data)?;
        }
        self.respond(sqe.cid(), status, result)?;
        if let Next::Close = next {
            self.closing = true;
        }
        Ok(())
    }

    /// Leaves the command's data in `self.host`, which holds its
    /// in-capsule data on entry (trimmed to what the descriptor names), or
    /// asks for it by R2T.
    fn gather(&mut self, sqe: &SubmissionEntry) -> Result<Gathered> {
        let sgl = SglDescriptor::from_sqe(sqe);
        let to_controller = direction_to_controller(sqe);
        if sgl.len == 0 && self.host.is_empty() {
            return Ok(Gathered::Ready(0));
        }
        if let (SglKind::InCapsule { offset }, true) = (sgl.kind, to_controller) {
            let end = offset.checked_add(sgl.len as u64);
            if end.is_none_or(|e| e > self.host.len() as u64) {
                return Ok(Gathered::Refused(StatusCode::SglLengthInvalid.status()));
            }
            self.host.truncate(end.unwrap_or(0) as usize);
            self.host.drain(..offset as usize);
            return Ok(Gathered::Ready(0));
        }
        self.host.clear();
        match (sgl.kind, to_controller) {
            (SglKind::Transport, true) => {
                let limit = if self.is_admin() { ADMIN_MAX_DATA } else { self.max_io_data() };
                if sgl.len as usize > limit {
                    return Ok(Gathered::Refused(StatusCode::SglLengthInvalid.status()));
                }
                self.request_data(*sqe, sgl.len)?;
                Ok(Gathered::Requested)
            }
            (SglKind::Transport, false) => Ok(Gathered::Ready(sgl.len as usize)),
            _ if sgl.len == 0 => Ok(Gathered::Ready(0)),
            _ => Ok(Gathered::Refused(StatusCode::SglDescriptorTypeInvalid.status())),
        }
    }

    /// Puts an I/O command in flight on the device if it qualifies
    /// (`inflight::start`); `false`: run it alone.
    fn start_inflight(&mut self, sqe: &SubmissionEntry, room: usize) -> bool {
        let Some(q) = &mut self.queue else { return false };
        if q.qid == 0 || FabricsType::of(sqe).is_some() || !q.ctrl.enabled() {
            return false;
        }
        let Some(sub) = q.ctrl.subsystem() else { return false };
        inflight::start(&mut q.io, sub, sqe, &self.host, room)
    }

    fn is_admin(&self) -> bool {
        self.queue.as_ref().is_none_or(|q| q.qid == 0)
    }

    fn max_io_data(&self) -> usize {
        match self.queue.as_ref().and_then(|q| q.ctrl.subsystem()) {
            Some(s) => s.mdts_bytes(),
            None => ADMIN_MAX_DATA,
        }
    }

    /// Runs the command: `(status, result, bytes of data for the host,
    /// what next)`; status [`HELD`] for a held command.
    fn dispatch(
        &mut self,
        sqe: &SubmissionEntry,
        room: usize,
    ) -> Result<(Status, u64, usize, Next)> {
        if let Some(fctype) = FabricsType::of(sqe) {
            return Ok(self.fabrics(fctype, sqe, room));
        }
        let Some(q) = &mut self.queue else {
            return Ok((StatusCode::CommandSequenceError.status(), 0, 0, Next::Continue));
        };
        if !q.ctrl.enabled() {
            return Ok((StatusCode::CommandSequenceError.status(), 0, 0, Next::Continue));
        }
        if q.qid == 0 {
            return Ok(
                match admin::execute(
                    &q.ctrl,
                    &self.shared,
                    &mut q.aer,
                    sqe,
                    &self.host,
                    &mut self.data,
                ) {
                    Done::Complete { status, result, data } => {
                        (status, result, data.min(room), Next::Continue)
                    }
                    Done::Held => (HELD, 0, 0, Next::Continue),
                },
            );
        }
        let Some(sub) = q.ctrl.subsystem() else {
            return Ok((StatusCode::InvalidOpcode.status(), 0, 0, Next::Continue));
        };
        let d = io::execute(&mut q.io, sub, &q.ctrl, sqe, &self.host, room, &mut self.data);
        Ok((d.status, d.result, d.data.min(room), Next::Continue))
    }

    fn fabrics(
        &mut self,
        fctype: FabricsType,
        sqe: &SubmissionEntry,
        room: usize,
    ) -> (Status, u64, usize, Next) {
        let ok = |result: u64| (Status::SUCCESS, result, 0, Next::Continue);
        let err = |s: Status| (s, 0, 0, Next::Continue);
        match fctype {
            FabricsType::Connect => match self.connect(sqe) {
                Ok(result) => ok(result as u64),
                Err((status, result)) => (status, result as u64, 0, Next::Continue),
            },
            _ if self.queue.is_none() => err(StatusCode::CommandSequenceError.status()),
            FabricsType::PropertyGet => {
                let q = self.queue.as_ref().expect("checked");
                match PropertyGet::from_sqe(sqe) {
                    Some(p) if q.qid == 0 => match q.ctrl.property(p.offset, p.eight_bytes) {
                        Some(v) => ok(v),
                        None => err(StatusCode::InvalidField.status()),
                    },
                    _ => err(StatusCode::InvalidField.status()),
                }
            }
            FabricsType::PropertySet => {
                let q = self.queue.as_ref().expect("checked");
                match PropertySet::from_sqe(sqe) {
                    Some(p) if q.qid == 0 => match q.ctrl.set_property(p.offset, p.value) {
                        Ok(()) => ok(0),
                        Err(s) => err(s),
                    },
                    _ => err(StatusCode::InvalidField.status()),
                }
            }
            FabricsType::Disconnect => (Status::SUCCESS, 0, 0, Next::Close),
            FabricsType::AuthenticationSend | FabricsType::AuthenticationReceive => {
                self.authentication(sqe, room)
            }
            _ => err(StatusCode::InvalidField.status()),
        }
    }

    /// Authentication Send or Receive on a queue whose host must
    /// authenticate; a queue without secrets has nothing to authenticate.
    fn authentication(&mut self, sqe: &SubmissionEntry, room: usize) -> (Status, u64, usize, Next) {
        let err = |s: Status| (s, 0, 0, Next::Continue);
        let Some(cmd) = zns_spec::auth::AuthCommand::from_sqe(sqe) else {
            return err(StatusCode::InvalidField.status());
        };
        if !cmd.is_dhchap() || cmd.length == 0 {
            return err(StatusCode::InvalidField.status());
        }
        let Some(auth) = self.queue.as_mut().and_then(|q| q.auth.as_mut()) else {
            return err(StatusCode::CommandSequenceError.status());
        };
        let outcome = if cmd.send {
            let n = (cmd.length as usize).min(self.host.len());
            auth.send(&self.host[..n])
        } else {
            auth.receive((cmd.length as usize).min(room))
        };
        let (bytes, next) = match outcome {
            dhchap::Outcome::Continue(b) => (b, Next::Continue),
            dhchap::Outcome::Close(b) => (b, Next::Close),
        };
        self.data.clear();
        self.data.extend_from_slice(&bytes);
        (Status::SUCCESS, 0, bytes.len(), next)
    }

    /// Connect: creates the admin queue's controller or joins an I/O
    /// queue to one. `Err` carries the status and the result dword
    /// (Invalid Parameters names the bad field).
    fn connect(&mut self, sqe: &SubmissionEntry) -> std::result::Result<u32, (Status, u32)> {
        let invalid = |offset: u16, in_data: bool| {
            (
                connect_status::INVALID_PARAMETERS,
                fabrics::connect_invalid_parameter(offset, in_data),
            )
        };
        if self.queue.is_some() {
            return Err((StatusCode::CommandSequenceError.status(), 0));
        }
        let cmd = ConnectCommand::from_sqe(sqe);
        if cmd.recfmt != 0 {
            return Err((connect_status::INCOMPATIBLE_FORMAT, 0));
        }
        let Some(bytes) = self.host.get(..ConnectData::SIZE) else {
            return Err((StatusCode::SglLengthInvalid.status(), 0));
        };
        let data = ConnectData::from_bytes(bytes.try_into().expect("1024 bytes"))
            .map_err(|off| invalid(off, true))?;
        // SQSIZE is 0's based; at least 2 entries, at most MQES + 1.
        if cmd.sqsize == 0 || cmd.sqsize >= QUEUE_ENTRIES {
            return Err(invalid(44, false));
        }
        let discovery = data.subnqn == fabrics::DISCOVERY_NQN;
        if !discovery && data.subnqn != self.shared.subsystem.nqn() {
            tracing::info!(subnqn = %data.subnqn, "Connect to an unknown subsystem");
            return Err(invalid(256, true));
        }
        if !discovery && !self.shared.subsystem.allows(&data.hostnqn) {
            tracing::warn!(hostnqn = %data.hostnqn, "Connect from a host the subsystem does not allow");
            return Err((connect_status::INVALID_HOST, 0));
        }
        let ctrl = if cmd.qid == 0 {
            if data.cntlid != ConnectData::ANY_CONTROLLER {
                return Err(invalid(16, true));
            }
            // Changes made before this controller existed are not its own.
            self.shared.refresh_zone_changes();
            let role = if discovery {
                Role::Discovery
            } else {
                Role::Io(Arc::clone(&self.shared.subsystem))
            };
            self.shared
                .registry
                .create(role, &data.hostnqn, cmd.kato_ms)
                .ok_or((connect_status::CONTROLLER_BUSY, 0))?
        } else {
            let Some(c) = self.shared.registry.get(data.cntlid) else {
                return Err(invalid(16, true));
            };
            if c.hostnqn != data.hostnqn {
                return Err((connect_status::INVALID_HOST, 0));
            }
            if discovery || c.subsystem().is_none() {
                return Err(invalid(42, false));
            }
            if !c.enabled() {
                return Err((StatusCode::CommandSequenceError.status(), 0));
            }
            let granted = c.io_queues.load(std::sync::atomic::Ordering::Relaxed) as u16 + 1;
            if cmd.qid > granted {
                return Err(invalid(42, false));
            }
            let Some(closer) = self.closer.clone() else {
                return Err((StatusCode::InternalError.status(), 0));
            };
            match c.join(cmd.qid, closer) {
                Ok(()) => {}
                Err(JoinError::Gone) => return Err(invalid(16, true)),
                Err(JoinError::InUse) => {
                    tracing::warn!(
                        qid = cmd.qid,
                        cntlid = c.cntlid,
                        "Connect for a queue ID in use"
                    );
                    return Err((StatusCode::CommandSequenceError.status(), 0));
                }
            }
            c
        };
        ctrl.touch();
        tracing::info!(
            qid = cmd.qid,
            cntlid = ctrl.cntlid,
            hostnqn = %data.hostnqn,
            subnqn = %data.subnqn,
            "NVMe/TCP queue connected"
        );
        let cntlid = ctrl.cntlid;
        let auth = match (discovery, self.shared.subsystem.host_secrets(&data.hostnqn)) {
            (false, Some(secrets)) => {
                Some(QueueAuth::new(secrets, &data.hostnqn, self.shared.subsystem.nqn()))
            }
            _ => None,
        };
        let required = if auth.is_some() { zns_spec::auth::CONNECT_AUTH_REQUIRED } else { 0 };
        self.queue = Some(Queue {
            qid: cmd.qid,
            entries: cmd.sqsize + 1,
            sqhd: 1 % (cmd.sqsize + 1),
            no_sq_flow_control: cmd.cattr & fabrics::CATTR_DISABLE_SQ_FLOW_CONTROL != 0,
            ctrl,
            aer: AsyncEvents::default(),
            io: IoContext::default(),
            auth,
        });
        Ok(fabrics::connect_result(cntlid) | required)
    }
}

/// Connect and the authentication commands: what a queue that has not
/// authenticated may send.
fn is_auth_or_connect(sqe: &SubmissionEntry) -> bool {
    matches!(
        FabricsType::of(sqe),
        Some(
            FabricsType::Connect
                | FabricsType::AuthenticationSend
                | FabricsType::AuthenticationReceive
        )
    )
}

/// Whether a command moves data to the controller: opcode bits 1:0 = 01b,
/// or a Fabrics Connect (its data is the Connect data).
fn direction_to_controller(sqe: &SubmissionEntry) -> bool {
    match FabricsType::of(sqe) {
        Some(FabricsType::Connect) | Some(FabricsType::AuthenticationSend) => true,
        Some(_) => false,
        None => sqe.opcode() & 0b11 == 0b01,
    }
}
